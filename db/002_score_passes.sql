-- Every scoring pass and the parameters it ran with, so replay can re-execute it and tables can
-- say what was scored (a targeted pass is partial).
CREATE TABLE score_passes (
    run TEXT NOT NULL,
    mode TEXT NOT NULL,                     -- dump_all | retrieve
    k INTEGER NOT NULL,                     -- 0 for dump_all
    variant TEXT NOT NULL,                  -- default | a frozen-rescoring variant
    config TEXT NOT NULL DEFAULT '{}',      -- JSON: context_window, window, dims, models and prompt hashes, rescore
    PRIMARY KEY (run, mode, k, variant)
);
