"""Pure aggregation over the store: every number a table shows. Reads stored rows, calls no model
and imports nothing of memaudit.llm (tests/test_architecture.py holds it to that).

    metrics.py      per-user A, C, D, E and B, attribution counts, tokens and models per role group
    stats.py        mean and sample std, user-level bootstrap intervals, paired comparisons
    robustness.py   scoring variants compared on the same targets
    utilization.py  the `utilization` rows (Know vs Act counts, Act accuracy, Utilization Rate)
    carryover.py    the `carryover` rows: preference carry-over and bother rate from recorded turns
    evolving.py     the `evolving` rows: FAMA and stale memory of evolving targets
    judges.py, agreement.py, judge_checks.py, judges_render.py
                    the `judges` section: panel agreement, per-judge figures, judge-check summaries
    columns.py      how a table is declared (a list of columns) and how its cells read as text
    paper.py        the paper's tables built from the above: their values (JSON-ready)
    paper_render.py their md / latex / csv / json text

Each table is declared once as columns: Tables 2-4, footprint, gap, tokens, comparisons and prompts
in columns.py, the others beside their rows (UTILIZATION, CARRYOVER, EVOLVING, PER_JUDGE, CHECKS).
"""
