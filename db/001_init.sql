-- memaudit artifact store, schema version 1.
-- JSON columns hold orjson text. Keys say what identifies a row; stages skip existing keys (resume).

CREATE TABLE benchmarks (
    name TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    pool TEXT                              -- JSON {category: [{name, axis, answer_space, source}]} or NULL
);

CREATE TABLE users (
    bench TEXT NOT NULL REFERENCES benchmarks(name) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    persona TEXT NOT NULL,                 -- JSON base_profile
    position INTEGER NOT NULL,
    PRIMARY KEY (bench, user_id)
);

CREATE TABLE bank_entries (
    bench TEXT NOT NULL,
    user_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    category TEXT NOT NULL,
    dimension TEXT NOT NULL,
    short TEXT NOT NULL,
    explanation TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (bench, user_id, dimension),
    FOREIGN KEY (bench, user_id) REFERENCES users(bench, user_id) ON DELETE CASCADE
);

CREATE TABLE tasks (
    bench TEXT NOT NULL,
    user_id TEXT NOT NULL,
    idx INTEGER NOT NULL,                  -- 1-based; episode i = i-th task
    text TEXT NOT NULL,
    target_category TEXT NOT NULL,
    target_dimension TEXT NOT NULL,
    target_short TEXT NOT NULL,
    rationale TEXT NOT NULL DEFAULT '',
    review TEXT NOT NULL DEFAULT '{}',     -- JSON: critic verdicts, editor revisions, pipeline note
    PRIMARY KEY (bench, user_id, idx),
    FOREIGN KEY (bench, user_id) REFERENCES users(bench, user_id) ON DELETE CASCADE
);

CREATE TABLE runs (
    run TEXT PRIMARY KEY,
    system TEXT NOT NULL,
    bench TEXT NOT NULL,
    origin TEXT NOT NULL DEFAULT 'rollout', -- rollout | import
    config TEXT NOT NULL DEFAULT '{}',      -- JSON: max_turns, tasks, users, k, models per role
    prompt_hashes TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE episodes (
    run TEXT NOT NULL REFERENCES runs(run) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    task_idx INTEGER NOT NULL,
    task TEXT NOT NULL,
    end_reason TEXT NOT NULL,               -- satisfied | max_turns | failed
    n_turns INTEGER NOT NULL,
    final_preference_score REAL,
    error TEXT,
    PRIMARY KEY (run, user_id, task_idx)
);

CREATE TABLE turns (
    run TEXT NOT NULL,
    user_id TEXT NOT NULL,
    task_idx INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    assistant TEXT NOT NULL,
    feedback_type TEXT,
    user_text TEXT,
    preference_score REAL,                  -- NULL = unscorable turn
    per_pref TEXT NOT NULL DEFAULT '[]',
    fallback INTEGER NOT NULL DEFAULT 0,    -- 1 = simulator output invalid after retries
    PRIMARY KEY (run, user_id, task_idx, turn),
    FOREIGN KEY (run, user_id, task_idx) REFERENCES episodes(run, user_id, task_idx) ON DELETE CASCADE
);

CREATE TABLE snapshots (
    run TEXT NOT NULL,
    user_id TEXT NOT NULL,
    task_idx INTEGER NOT NULL,              -- memory state after this episode
    state TEXT NOT NULL,                    -- JSON, the adapter's snapshot()
    items TEXT NOT NULL,                    -- JSON, the adapter's dump()
    n_items INTEGER NOT NULL,
    avg_chars REAL NOT NULL,
    PRIMARY KEY (run, user_id, task_idx)
);

CREATE TABLE reconstructions (
    run TEXT NOT NULL,
    mode TEXT NOT NULL,                     -- dump_all | retrieve
    k INTEGER NOT NULL,                     -- 0 for dump_all
    variant TEXT NOT NULL,                  -- default | a frozen-rescoring variant
    user_id TEXT NOT NULL,
    category TEXT NOT NULL,
    dimension TEXT NOT NULL,
    explanation TEXT NOT NULL,
    ground_truth TEXT NOT NULL,
    evidence TEXT NOT NULL DEFAULT '{}',
    label TEXT,
    reason TEXT,
    score REAL,
    judge_reason TEXT,
    status TEXT NOT NULL,                   -- ok | overflow | failed
    error TEXT,
    PRIMARY KEY (run, mode, k, variant, user_id, dimension)
);

CREATE TABLE attributions (
    run TEXT NOT NULL,
    mode TEXT NOT NULL,
    k INTEGER NOT NULL,
    variant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    category TEXT NOT NULL,
    dimension TEXT NOT NULL,
    label TEXT NOT NULL,
    score REAL,
    stages TEXT NOT NULL DEFAULT '[]',
    ep_index INTEGER,
    note TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run, mode, k, variant, user_id, dimension)
);

-- Stage 0 oracle verdicts, shared across systems and modes: keyed by user, dimension and task text.
CREATE TABLE oracle (
    bench TEXT NOT NULL,
    user_id TEXT NOT NULL,
    dimension TEXT NOT NULL,
    task_hash TEXT NOT NULL,
    can_invite INTEGER,                     -- NULL = unparsable
    reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (bench, user_id, dimension, task_hash)
);

-- The call cache: content-addressed; ok = 0 rows are recorded failures, used only by replay.
CREATE TABLE calls (
    key TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,                  -- JSON, the keyed record (no key, host or transport knobs)
    response TEXT NOT NULL,                 -- JSON {text, body} or {error_kind, error}
    ok INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    latency REAL NOT NULL DEFAULT 0,
    created TEXT NOT NULL                   -- wall time lives only here
);

-- Which artifact used which call: token accounting per run and role, and traceability.
CREATE TABLE call_uses (
    run TEXT NOT NULL,
    artifact TEXT NOT NULL,                 -- e.g. "episode:user_001:3", "recon:dump_all:0:user_001:dim"
    key TEXT NOT NULL,
    role TEXT NOT NULL,
    from_cache INTEGER NOT NULL,
    PRIMARY KEY (run, artifact, key)
);
CREATE INDEX call_uses_key ON call_uses(key);

CREATE TABLE embeddings (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,                   -- float32 little-endian, normalised
    PRIMARY KEY (model, text_hash)
);
