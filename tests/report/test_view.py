"""The report's HTML content, without a browser: numbers, drill-down links, escaping, determinism."""
from __future__ import annotations

import html
import re
from pathlib import Path

import anyio
import pytest

from memaudit.cli import main
from memaudit.errors import BadInput
from memaudit.report.view import write_report
from memaudit.store import open_store
from tests.report import synthetic

async def _report(tmp_path: Path, runs=None) -> Path:
    async with open_store(tmp_path / "audit.db") as store:
        if not await store.list_runs():
            await synthetic.fill(store)
        return await write_report(store, tmp_path / "report", runs)


def follow(page: Path, text: str, section: str = "") -> Path:
    """The page a link whose visible text starts with `text` points to (anchor dropped), looking
    only after the heading that contains `section`."""
    content = page.read_text()
    content = content[content.index(section):]
    for target, inner in re.findall(r'<a href="([^"]+)"[^>]*>(.*?)</a>', content, re.S):
        if re.sub(r"<[^>]+>", "", inner).strip().startswith(text):
            return (page.parent / html.unescape(target).split("#")[0]).resolve()
    raise AssertionError(f"no link {text!r} in {page}")


@pytest.mark.anyio
async def test_table_numbers_drill_down_to_the_disclosing_transcript_line(tmp_path):
    index = await _report(tmp_path)
    text = index.read_text()
    assert "0.600" in text and "0.071" in text  # Table 2: mem0 B full-store, mean ± std over users
    assert "0.525" in text and "90.0" in text   # B top-k, A
    assert '<svg class="chart"' in text

    # Table 2 B top-k -> the retrieve pass -> user_001 -> the cooking target -> the transcript turn
    pass_page = follow(index, "0.525")
    assert pass_page.name == "retrieve_k5.html"
    user_page = follow(pass_page, "user_001")
    assert user_page.name == "user_001.html" and "burns food when multitasking (user_001)" in user_page.read_text()
    target = follow(user_page, "cooking_skill")
    page = target.read_text()
    assert "memory_failure" in page and "User cooks dinner while answering email &amp; burns it" in page
    assert "<mark>I always burn the rice when I try to do two things at once</mark> &lt;b&gt;" in page
    assert 'id="mem0-e1-t1"' in page and "cited by retrieve stage 1 · disclosure" in page


@pytest.mark.anyio
async def test_table4_counts_open_the_targets_behind_them(tmp_path):
    index = await _report(tmp_path)
    listing = follow(index, "1", "Table 4")  # the only linked 1: mem0 retrieve memory_failure
    assert listing.name == "memory_failure.html"
    assert "cooking_skill" in listing.read_text() and "1 targets" in listing.read_text()


@pytest.mark.anyio
async def test_failed_reconstructions_are_marked_not_scored_as_zero(tmp_path):
    await _report(tmp_path)
    grid = (tmp_path / "report/users/synthetic/user_002.html").read_text()
    assert 'class="cell fail"' in grid
    failed = (tmp_path / "report/runs/mem0/retrieve_k5/status-failed.html").read_text()
    assert "career_turning_point" in failed


@pytest.mark.anyio
async def test_output_is_deterministic_and_limited_to_chosen_runs(tmp_path):
    await _report(tmp_path)
    first = {p.relative_to(tmp_path / "report"): p.read_bytes() for p in (tmp_path / "report").rglob("*") if p.is_file()}
    await _report(tmp_path)
    second = {p.relative_to(tmp_path / "report"): p.read_bytes() for p in (tmp_path / "report").rglob("*") if p.is_file()}
    assert first == second

    only = await _report(tmp_path, ["nomem"])  # into the same directory: mem0's pages go
    assert "nomem" in only.read_text() and "mem0" not in only.read_text()
    assert not (only.parent / "runs/mem0.html").exists()
    assert "mem0" not in (only.parent / "users/synthetic/user_001/cooking_skill.html").read_text()


@pytest.mark.anyio
async def test_unknown_run_is_bad_input(tmp_path):
    await _report(tmp_path)
    with pytest.raises(BadInput, match="unknown run.*nope"):
        await _report(tmp_path, ["nope"])


def test_view_command(tmp_path, capsys):
    anyio.run(_report, tmp_path)
    main(["view", "--db", str(tmp_path / "audit.db"), "--runs", "mem0", "--out", str(tmp_path / "cli")])
    assert (tmp_path / "cli/index.html").exists() and (tmp_path / "cli/assets/style.css").exists()
    assert "report written" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["view", "--db", str(tmp_path / "audit.db"), "--runs", "nope", "--out", str(tmp_path / "x")])
    assert exit_info.value.code == 2
    assert "unknown run" in capsys.readouterr().err


def test_view_and_tables_never_write_through_a_symlink_leading_out(tmp_path, capsys):
    anyio.run(_report, tmp_path)
    victim = tmp_path / "victim.html"
    victim.write_text("keep me")
    for command, planted in (("view", "index.html"), ("tables", "tables.md")):
        out = tmp_path / f"{command}-out"
        out.mkdir()
        (out / planted).symlink_to(victim)
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--db", str(tmp_path / "audit.db"), "--out", str(out)])
        assert exit_info.value.code == 2 and "resolves outside" in capsys.readouterr().err
    assert victim.read_text() == "keep me"
