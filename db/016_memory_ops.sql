-- The wall time of every memory operation of a rollout (issue 32): each write (`observe`, `op` the
-- event kind) and each read the assistant makes (`context`, op `search`), timed around the adapter
-- call on the machine that ran the rollout, with the model calls it made and how many of them the
-- call cache answered. The footprint table reports p50/p95 over what no cache answered. A
-- measurement of a machine, not an artifact: replay neither reproduces nor compares it.
CREATE TABLE memory_ops (
    run TEXT NOT NULL,
    user_id TEXT NOT NULL,
    task_idx INTEGER NOT NULL,
    seq INTEGER NOT NULL,                   -- order within the episode
    op TEXT NOT NULL,                       -- task_start | assistant | user | episode_end | search
    seconds REAL NOT NULL,
    calls INTEGER NOT NULL,                 -- model calls the operation made
    cached INTEGER NOT NULL,                -- of those, answered from the call cache
    PRIMARY KEY (run, user_id, task_idx, seq)
);
