-- The footprint of each user's final memory (Table 2's items and chars/item) read from an index
-- (issue 27): the snapshot row holds the whole state and dump before these two fields, so reading
-- them from the table walks about two megabytes of a large store's row per user. Idempotent, like 013.
CREATE INDEX IF NOT EXISTS snapshots_footprint ON snapshots(run, user_id, task_idx, n_items, avg_chars);
