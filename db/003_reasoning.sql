-- Hosted reasoning models: the reasoning tokens of each call (part of its completion tokens, as
-- the API reports them), and the request parameters a model refused with a 400 (memaudit then
-- leaves them out: memaudit/llm/dialect.py). Keyed like an answerer in a cache key: model and
-- dialect, so a replayed or merged store keys its calls the same way.
ALTER TABLE calls ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;

CREATE TABLE param_refusals (
    model TEXT NOT NULL,
    backend TEXT NOT NULL,
    param TEXT NOT NULL,                   -- max_tokens | temperature | top_p
    PRIMARY KEY (model, backend, param)
);
