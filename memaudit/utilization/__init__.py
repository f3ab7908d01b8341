"""Beyond recovery (issue 16): does the assistant act on what its memory holds?

    act.py        the `utilization` stage: Know (recovery in retrieve mode at k) vs Act (a blind,
                  two-order pairwise judge of a memory-backed answer against a no-memory baseline),
                  and the oracle chain for known entries that were not used

The stage runs after scoring and changes nothing an earlier stage wrote. It imports the rollout's
assistant reply function, so the Act answers always come from the same scaffold as the episodes.
Its rows in `tables` (utilization, carryover) are aggregated in memaudit/tables/, which reads the
store only and calls no model.
"""
