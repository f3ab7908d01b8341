-- Batch scoring (issue 26): calls of a stage sent through the OpenAI Batch API or written as files
-- for vLLM's batch runner instead of being made live. Idempotent (IF NOT EXISTS), so applying it
-- after a higher-numbered migration that landed first changes nothing else.

-- One input file: uploaded and made a provider batch, or written to a directory (`--batch-file`).
-- The row exists before the batch is created, so a kill never loses a batch id: a row with a file
-- and no batch id is matched to the provider's batches by its input file on the next submit.
CREATE TABLE IF NOT EXISTS batches (
    name TEXT PRIMARY KEY,          -- ours: a hash of the input file's content
    role TEXT NOT NULL,             -- whose endpoint and credentials it goes to (the first role in it)
    endpoint TEXT NOT NULL,         -- the base URL without credentials, or the directory written to
    input_file TEXT,                -- the provider's file id, or the path written
    batch_id TEXT,                  -- the provider's batch id (NULL: not created yet, or a file)
    status TEXT NOT NULL,           -- uploading | written | the provider's status
    collected INTEGER NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL,
    counts TEXT NOT NULL DEFAULT '{}',   -- the provider's request_counts, as last seen
    created TEXT NOT NULL
);

-- One pending call per cache key: the exact body of its next attempt, until its result is in
-- `calls`. `batch` NULL: waiting to be sent (new, or to be sent again with `note` saying why).
CREATE TABLE IF NOT EXISTS batch_requests (
    key TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    model TEXT NOT NULL,
    request TEXT NOT NULL,          -- the cache key's record, as `calls.request` stores it
    attempt INTEGER NOT NULL DEFAULT 0,  -- the repair attempt `body` is
    body TEXT NOT NULL,             -- exactly what the live path would POST
    first_messages TEXT,            -- attempt 0's messages (repair attempts extend them)
    usage TEXT NOT NULL DEFAULT '{}',    -- tokens spent by earlier attempts of this call
    batch TEXT,
    note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS batch_requests_batch ON batch_requests(batch);
