-- Issue 23. Idempotent, so it is safe whatever order migrations land in.
-- Stage-0 verdicts imported with a published release: attribution reuses them without a call, as
-- the published runner reused its oracle cache. An input (replay copies it), unlike `oracle`, the
-- record of every verdict attribution used.
CREATE TABLE IF NOT EXISTS imported_oracle (
    bench TEXT NOT NULL,
    user_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    task_hash TEXT NOT NULL,
    can_invite INTEGER,                     -- NULL = unparsable: not reused
    reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (bench, user_id, dimension, task_hash)
);
-- What an attribution pass ran with: the prompt directory (name, hash, path) and the stage roles'
-- models and sampling (memaudit/provenance.py).
CREATE TABLE IF NOT EXISTS attribution_passes (
    run TEXT NOT NULL,
    mode TEXT NOT NULL,
    k INTEGER NOT NULL,
    variant TEXT NOT NULL,
    config TEXT NOT NULL,
    PRIMARY KEY (run, mode, k, variant)
);
