"""Pure aggregation over the store: every number a table shows. Reads stored rows, calls no model
and imports nothing of memaudit.llm (tests/test_architecture.py holds it to that).

    metrics.py      per-user A, C, D, E and B, attribution counts, tokens and models per role group
    stats.py        mean and sample std, user-level bootstrap intervals, paired comparisons
    robustness.py   scoring variants compared on the same targets
    utilization.py  the `utilization` rows (Know vs Act counts, Act accuracy, Utilization Rate)
    carryover.py    the `carryover` rows: preference carry-over and bother rate from recorded turns
    paper.py        the paper's tables built from the above, and their md / latex / csv / json text
"""
