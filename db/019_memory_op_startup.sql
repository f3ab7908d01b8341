-- Comparable latencies (issue 44): the first memory operation after a system was opened also paid
-- its one-time start-up (a sentence model loaded, a library's worker started), so it is timed apart
-- (`startup`), and a rollout run with --time-alone ran one (system, user) at a time, without
-- other systems on the machine's cores (`alone`). Rows from before count as neither.
ALTER TABLE memory_ops ADD COLUMN startup INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memory_ops ADD COLUMN alone INTEGER NOT NULL DEFAULT 0;
