-- The memory snapshot a reconstruction read: the task index of the user's snapshot (run and user
-- are in the row). A row whose snapshot is no longer the user's final one is stale: scoring
-- replaces it and tables refuse it. NULL: scored before this column existed, or an imported
-- record of a user without a stored memory.
ALTER TABLE reconstructions ADD COLUMN snapshot_task INTEGER;
-- Imported records are the release's scores of its final stores: they read the imported snapshot.
UPDATE reconstructions SET snapshot_task = (SELECT MAX(s.task_idx) FROM snapshots s
                                            WHERE s.run = reconstructions.run AND s.user_id = reconstructions.user_id)
WHERE run IN (SELECT run FROM runs WHERE origin = 'import');
