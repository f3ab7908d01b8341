-- The texts a memory system's embedding model cut at its window (issue 41): the adapter counts
-- them in its snapshot state (`embed_truncated`, absent where the window is not known), and the
-- store keeps the count beside the other figures Table 2 reads from the final snapshot, in the
-- covering index (db/015). Snapshots written before hold no count: NULL, shown as n/a.
ALTER TABLE snapshots ADD COLUMN embed_truncated INTEGER;
UPDATE snapshots SET embed_truncated = json_extract(state, '$.embed_truncated');
DROP INDEX IF EXISTS snapshots_footprint;
CREATE INDEX snapshots_footprint ON snapshots(run, user_id, task_idx, n_items, avg_chars, write_failures,
                                              embed_truncated);
