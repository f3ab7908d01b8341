-- Know/Act utilization (issue 16).
-- Act scenarios are benchmark inputs like tasks: one realistic new request per user and bank entry,
-- checked by the blind anti-fishing critic. `review` keeps the critic verdicts and editor revisions.
CREATE TABLE act_scenarios (
    bench TEXT NOT NULL,
    user_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    category TEXT NOT NULL,
    text TEXT NOT NULL,
    rationale TEXT NOT NULL DEFAULT '',
    review TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (bench, user_id, dimension),
    FOREIGN KEY (bench, user_id) REFERENCES users(bench, user_id) ON DELETE CASCADE
);

-- Every utilization pass and what it ran with (Know threshold, models, prompt hashes): replay
-- re-executes it, tables say what was measured.
CREATE TABLE utilization_passes (
    run TEXT NOT NULL,
    k INTEGER NOT NULL,                     -- the retrieve k of Know and of the assistant's context()
    config TEXT NOT NULL DEFAULT '{}',      -- JSON: threshold, agent/judge models, prompt hashes
    PRIMARY KEY (run, k)
);

-- One Know/Act case per (run, k, user, bank entry).
CREATE TABLE act_cases (
    run TEXT NOT NULL,
    k INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    category TEXT NOT NULL,
    dimension TEXT NOT NULL,
    know_score REAL,                        -- the retrieve recovery score at k (NULL: recovery failed)
    know INTEGER,                           -- 1 = score >= threshold; NULL when the score is missing
    scenario TEXT NOT NULL,
    answer TEXT,                            -- the reply with the system's own context()
    baseline TEXT,                          -- the reply without memory (shared by every system)
    verdicts TEXT NOT NULL DEFAULT '[]',    -- JSON: the judge in both orders
    act TEXT,                               -- pass | fail | disagree (NULL when status = failed)
    oracle TEXT,                            -- KP and not AP: retrieval | comprehension | application
    oracle_steps TEXT NOT NULL DEFAULT '[]',-- JSON: each re-answer with its injected notes and verdicts
    status TEXT NOT NULL,                   -- ok | failed
    error TEXT,
    PRIMARY KEY (run, k, user_id, dimension)
);
