-- Two figures Table 2 reads from every turn and every final snapshot, kept in their own columns
-- and read from covering indexes (issue 27): before, each `tables` parsed every turn's
-- per-preference JSON (did the preference judge fail?) and every final snapshot's state (the
-- adapter's count of memory writes lost), walking the long texts stored before them in the row
-- (about a third of `tables`' time at 500 users). The store writes both with the row
-- (store/episodes.py); this fills them for rows written before.
ALTER TABLE turns ADD COLUMN judge_failed INTEGER NOT NULL DEFAULT 0;
UPDATE turns SET judge_failed = EXISTS (
    SELECT 1 FROM json_each(CASE WHEN json_valid(turns.per_pref) THEN turns.per_pref ELSE '[]' END)
    WHERE json_type(value, '$.error') IS NOT NULL);
CREATE INDEX turns_figures ON turns(run, user_id, task_idx, turn, preference_score, fallback, judge_failed);
ALTER TABLE snapshots ADD COLUMN write_failures INTEGER;
UPDATE snapshots SET write_failures = json_extract(state, '$.write_failures');
DROP INDEX IF EXISTS snapshots_footprint;
CREATE INDEX snapshots_footprint ON snapshots(run, user_id, task_idx, n_items, avg_chars, write_failures);
