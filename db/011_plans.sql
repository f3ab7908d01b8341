-- Cost estimates made before a study runs (`memaudit plan`, memaudit/study/plan.py), one per run id
-- the plan names: `memaudit cost` prints each beside what the run actually used.
-- IF NOT EXISTS: safe however migrations of other numbers are ordered around this one.
CREATE TABLE IF NOT EXISTS plans (
    run TEXT PRIMARY KEY,
    estimate TEXT NOT NULL                  -- JSON: calls, tokens, USD, by stage and role, and the plan's inputs
);
