-- Which shard of a sharded study ran which command to its end in this store (`--shard I/N`,
-- memaudit/shards.py): `memaudit merge` refuses while a shard of a study is missing and names it.
-- IF NOT EXISTS: safe however migrations of other numbers are ordered around this one.
CREATE TABLE IF NOT EXISTS shard_stages (
    stage TEXT NOT NULL,      -- the command: rollout, score, attribute, utilization, judge-check
    shard INTEGER NOT NULL,   -- I, 1-based
    shards INTEGER NOT NULL,  -- N
    PRIMARY KEY (stage, shard, shards)
);
