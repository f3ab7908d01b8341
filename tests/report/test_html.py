"""HTML building blocks: escaping, file names, relative links, score colours."""
from __future__ import annotations

from memaudit.report.html import bar_chart, href, score_class, slug, table


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
    chart = bar_chart("<script>", [("<i>", [("dump_all", 0.5, 0.1)])], {"dump_all": "#000"})
    assert "<script>" not in chart and "&lt;i&gt;" in chart


def test_score_colours_follow_the_rubric():
    assert [score_class(s) for s in (1.0, 0.75, 0.5, 0.25, 0.0, None)] == ["s100", "s75", "s50", "s25", "s0", "snone"]
    assert score_class(0.6) == "s50"
