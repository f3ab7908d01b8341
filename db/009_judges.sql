-- Judges you can check (issue 24): every panel judge's verdict per target, control answers and
-- their verdicts (judge-check), and human grades from the audit page. IF NOT EXISTS: the tables
-- may already be there when another numbered migration was applied in a different order.

-- One verdict per (target, panel judge, repeat); repeat 0 is the one the panel median uses, 1..N-1
-- are the test-retest re-asks with their own seeds. The target row is in `reconstructions`.
CREATE TABLE IF NOT EXISTS judge_verdicts (
    run TEXT NOT NULL,
    mode TEXT NOT NULL,
    k INTEGER NOT NULL,
    variant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    judge TEXT NOT NULL,                    -- the panel name of the judge (its model, or [judges.NAME])
    repeat INTEGER NOT NULL,
    score REAL,                             -- NULL: the judge stayed invalid after repair (dropped)
    reason TEXT,
    status TEXT NOT NULL,                   -- ok | failed
    error TEXT,
    PRIMARY KEY (run, mode, k, variant, user_id, dimension, judge, repeat)
);

-- Every judge-check pass and what it ran with (judges, repeats, thresholds): replay re-executes it.
CREATE TABLE IF NOT EXISTS judge_checks (
    bench TEXT NOT NULL,
    seed INTEGER NOT NULL,
    per_category INTEGER NOT NULL,
    config TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (bench, seed, per_category)
);

-- Control answers of one bank entry: truth, paraphrase, other_user, non_answer, reversed.
CREATE TABLE IF NOT EXISTS control_answers (
    bench TEXT NOT NULL,
    user_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    kind TEXT NOT NULL,
    category TEXT NOT NULL,
    text TEXT,                              -- NULL when the generator failed (error says why)
    source TEXT,                            -- other_user: the user whose value it is
    error TEXT,
    PRIMARY KEY (bench, user_id, dimension, kind)
);

CREATE TABLE IF NOT EXISTS control_verdicts (
    bench TEXT NOT NULL,
    user_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    kind TEXT NOT NULL,
    judge TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    score REAL,
    reason TEXT,
    status TEXT NOT NULL,                   -- ok | failed
    error TEXT,
    PRIMARY KEY (bench, user_id, dimension, kind, judge, repeat)
);

-- Grades a person gave on the audit page (memaudit human import).
CREATE TABLE IF NOT EXISTS human_grades (
    grader TEXT NOT NULL,
    run TEXT NOT NULL,
    mode TEXT NOT NULL,
    k INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    score REAL NOT NULL,
    PRIMARY KEY (grader, run, mode, k, user_id, dimension)
);
-- Grades are read per run (tables, agreement with the judges).
CREATE INDEX IF NOT EXISTS human_grades_by_target ON human_grades(run, mode, k, user_id, dimension, grader);
