"""HTML building blocks: escaping, file names, relative links, score colours."""
from __future__ import annotations

from memaudit.report.html import href, legend_list, panel_chart, score_class, slug, table
from memaudit.report.palette import run_colours


def test_slug_keeps_safe_ids_and_separates_changed_ones():
    assert slug("user_001") == "user_001"
    assert slug("a/b") != slug("a_b") and slug("a/b").startswith("a_b-")
    assert slug("../x") != slug("x") and "/" not in slug("../x")


def test_relative_links_between_pages():
    assert href("index.html", "runs/mem0.html") == "runs/mem0.html"
    assert href("users/b/u/dim.html", "runs/mem0.html", "x") == "../../../runs/mem0.html#x"


def test_text_is_escaped():
    html = table(["a<b"], [["<td>ok</td>"]])
    assert "a&lt;b" in html
    chart = panel_chart("<script>", [("<b>", [("<i>", [("<u>", 0.5, [0.4, 0.6])])])], {"<u>": "#000"})
    assert "<script>" not in chart and "&lt;i&gt;" in chart and "<u>" not in chart
    assert "<em>" not in legend_list([("<em>", "a `name` <em>")]) and "<code>name</code>" in legend_list([("x", "`name`")])


def test_a_panel_chart_shows_zero_missing_and_the_interval():
    chart = panel_chart("t", [("p", [("g", [("zero", 0.0, [0.0, 0.1]), ("missing", None, None)])])],
                        {"zero": "#123456", "missing": "#654321"})
    assert 'width="2.0"' in chart and 'fill="#123456"' in chart   # a zero bar is a visible sliver
    assert ">n/a</text>" in chart and 'class="err"' in chart       # a missing value reads n/a; the interval


def test_a_system_keeps_its_hue_whatever_else_is_in_the_panel():
    alone = run_colours([("simple_rag", "simple_rag"), ("nomem", "nomem")])
    more = run_colours([("simple_rag", "simple_rag"), ("nomem", "nomem"), ("simple_rag_b", "simple_rag")])
    assert alone["simple_rag"] == more["simple_rag"] != more["simple_rag_b"] and len(set(more.values())) == 3


def test_score_colours_follow_the_rubric():
    assert [score_class(s) for s in (1.0, 0.75, 0.5, 0.25, 0.0, None)] == ["s100", "s75", "s50", "s25", "s0", "snone"]
    assert score_class(0.6) == "s50"
