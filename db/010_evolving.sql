-- Evolving banks (issue 25). Idempotent (IF NOT EXISTS), so it is safe whatever order migrations
-- land in. A static benchmark writes no row into these tables.

-- The versions of an evolving bank entry, in order (memaudit/bench/history.py).
CREATE TABLE IF NOT EXISTS bank_history (
    bench TEXT NOT NULL,
    user_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    version INTEGER NOT NULL,               -- 0-based position in the history
    short TEXT NOT NULL,
    explanation TEXT NOT NULL DEFAULT '',
    valid_from_task INTEGER NOT NULL,       -- 1-based task index
    op TEXT NOT NULL,                       -- add | update | delete
    PRIMARY KEY (bench, user_id, dimension, version),
    FOREIGN KEY (bench, user_id, dimension) REFERENCES bank_entries(bench, user_id, dimension) ON DELETE CASCADE
);

-- The turn on which the simulated user disclosed a change (one per change and run).
CREATE TABLE IF NOT EXISTS turn_changes (
    run TEXT NOT NULL,
    user_id TEXT NOT NULL,
    task_idx INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    dimension TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (run, user_id, dimension, version),
    FOREIGN KEY (run, user_id, task_idx, turn) REFERENCES turns(run, user_id, task_idx, turn) ON DELETE CASCADE
);

-- Yes/no criteria of evolving targets: `current_present` and `stale_absent` (per superseded
-- version) on a reconstruction of (mode, k); `stale_in_store` (per superseded version) on the full
-- final store, recorded with mode 'store' and k 0.
CREATE TABLE IF NOT EXISTS evolving_judgments (
    run TEXT NOT NULL,
    mode TEXT NOT NULL,                     -- dump_all | retrieve | store
    k INTEGER NOT NULL,
    variant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    category TEXT NOT NULL,
    dimension TEXT NOT NULL,
    criterion TEXT NOT NULL,                -- current_present | stale_absent | stale_in_store
    version INTEGER NOT NULL,               -- the version the criterion is about
    verdict INTEGER,                        -- 1 = the criterion holds; NULL when status is not ok
    reason TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,                   -- ok | overflow | failed
    error TEXT,
    snapshot_task INTEGER,                  -- the memory judged: the user's snapshot after this task
    PRIMARY KEY (run, mode, k, variant, user_id, dimension, criterion, version)
);
