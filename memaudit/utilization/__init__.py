"""Beyond recovery (issue 16): does the assistant act on what its memory holds?

    act.py        the `utilization` stage: Know (recovery in retrieve mode at k) vs Act (a blind,
                  two-order pairwise judge of a memory-backed answer against a no-memory baseline),
                  and the oracle chain for known entries that were not used
    summary.py    the `utilization` rows of `tables` (counts, Act accuracy, Utilization Rate)
    carryover.py  the `carryover` rows: preference carry-over and bother rate from recorded turns

The stage runs after scoring and changes nothing an earlier stage wrote. It imports the rollout's
assistant reply function, so the Act answers always come from the same scaffold as the episodes;
summary.py and carryover.py read the store only and call no model.
"""
