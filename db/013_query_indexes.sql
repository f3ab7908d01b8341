-- Indexes that match the per-user reads (issue 27). The primary keys of reconstructions and
-- attributions start with (run, mode, k, variant): a read of one user's rows across runs
-- (`user_rows`, the report's per-user pages and the export) could narrow only to the run and then
-- read every user's rows of it, which makes a report quadratic in users. Idempotent, so a store
-- that skipped this number (a higher migration applied first) can take it again safely.
CREATE INDEX IF NOT EXISTS reconstructions_user ON reconstructions(run, variant, user_id, mode, k);
CREATE INDEX IF NOT EXISTS attributions_user ON attributions(run, variant, user_id, mode, k);
