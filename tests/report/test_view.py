"""The report's HTML content, without a browser: numbers, drill-down links, escaping, determinism."""
from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import parse_qs

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.errors import BadInput
from memaudit.report import userdata
from memaudit.report.view import write_report
from memaudit.store import open_store
from tests.report import synthetic

async def _report(tmp_path: Path, runs=None) -> Path:
    async with open_store(tmp_path / "audit.db") as store:
        if not await store.runs.names():
            await synthetic.fill(store)
        return await write_report(store, tmp_path / "report", runs)


def link_to(page: Path, text: str, section: str = "") -> tuple[Path, str]:
    """(page, fragment) of the link whose visible text starts with `text`, looking only after the
    heading that contains `section`."""
    content = page.read_text()
    content = content[content.index(section):]
    for target, inner in re.findall(r'<a href="([^"]+)"[^>]*>(.*?)</a>', content, re.S):
        if re.sub(r"<[^>]+>", "", inner).strip().startswith(text):
            path, _, fragment = html.unescape(target).partition("#")
            return (page.parent / path).resolve(), fragment
    raise AssertionError(f"no link {text!r} in {page}")


def follow(page: Path, text: str, section: str = "") -> Path:
    """The page a link whose visible text starts with `text` points to (fragment dropped)."""
    return link_to(page, text, section)[0]


def user_view(page: Path, text: str, section: str = "") -> tuple[dict, dict]:
    """(the user's data, the view's parameters) behind a link into the user drill-down (user.html#…)."""
    app, fragment = link_to(page, text, section)
    assert app.name == userdata.APP, app
    params = {k: v[0] for k, v in parse_qs(fragment).items()}
    return userdata.decode((app.parent / f"{userdata.DATA_DIR}/{params['f']}.js").read_bytes()), params


def listing(page: Path) -> dict:
    """The targets a list page renders (its data: report/view.py _target_list, assets/user.js)."""
    found = re.search(r'<script>window\.MEMAUDIT = (\{"list": .*?\});</script>', page.read_text())
    return orjson.loads(found.group(1).replace("<\\/", "</"))["list"]


def listed(page: Path, dimension: str) -> tuple[dict, dict]:
    """(the user's data, the view's parameters) behind a list page's link to a target, as the
    page's script builds it."""
    found = listing(page)
    user = next(row[0] for row in found["rows"] if row[2] == dimension)
    app = (page.parent / found["app"]).resolve()
    assert app.name == userdata.APP, app
    params = {"f": found["keys"][user], "v": "target", "d": dimension, "a": found["anchor"]}
    return userdata.decode((app.parent / f"{userdata.DATA_DIR}/{params['f']}.js").read_bytes()), params


def recons(user: dict, dimension: str, run: str, mode: str) -> dict:
    return next(r for r in user["recons"][dimension] if r["run"] == run and r["mode"] == mode)


def episode(user: dict, run: str, idx: int) -> dict:
    found = next(r for r in user["runs"] if r["run"] == run)
    return next(e for e in found["episodes"] if e["idx"] == idx)


@pytest.mark.anyio
async def test_table_numbers_drill_down_to_the_disclosing_transcript_line(tmp_path):
    index = await _report(tmp_path)
    text = index.read_text()
    assert "0.600" in text and "0.071" in text  # Table 2: mem0 B full-store, mean ± std over users
    assert "0.525" in text and "90.0" in text   # B top-k, A
    assert '<svg class="chart"' in text

    # Table 2 B top-k -> the retrieve pass -> user_001's drill-down: the cooking target's read,
    # verdict, attribution and the transcript line it cites (rendered in Chromium: test_browser.py)
    pass_page = follow(index, "0.525")
    assert pass_page.name == "retrieve_k5.html"
    user, view = user_view(pass_page, "user_001")
    assert view == {"f": "synthetic/user_001", "v": "grid", "a": "mem0-retrieve_k5"}
    assert user["bank"][0]["short"] == "burns food when multitasking (user_001)"
    read = recons(user, "cooking_skill", "mem0", "retrieve")
    assert read["attribution"]["label"] == "memory_failure" and read["score"] == 0.5
    memory = next(r for r in user["runs"] if r["run"] == "mem0")["memory"]["items"]
    assert memory[read["evidence"]["items"][0][userdata.MEMORY_REF]]["content"] == synthetic.STORE_ITEM
    assert read["evidence"]["items"][0]["score"] == 0.81  # what the read added to the stored item
    assert ["retrieve stage 1 · disclosure", None, "I always burn the rice when I try to do two things at once"] \
        in read["cites"]
    assert episode(user, "mem0", 1)["turns"][0][3] == synthetic.DISCLOSURE


@pytest.mark.anyio
async def test_table4_counts_open_the_targets_behind_them(tmp_path):
    index = await _report(tmp_path)
    listing = follow(index, "1", "Table 4")  # the only linked 1: mem0 retrieve memory_failure
    assert listing.name == "memory_failure.html"
    assert "1 target." in listing.read_text()
    _, view = listed(listing, "cooking_skill")
    assert view == {"f": "synthetic/user_001", "v": "target", "d": "cooking_skill", "a": "mem0-retrieve_k5"}


@pytest.mark.anyio
async def test_failed_reconstructions_are_marked_not_scored_as_zero(tmp_path):
    await _report(tmp_path)
    user, _ = listed(tmp_path / "report/runs/mem0/retrieve_k5/status-failed.html", "career_turning_point")
    failed = recons(user, "career_turning_point", "mem0", "retrieve")
    assert failed["status"] == "failed" and failed["score"] is None and failed["error"] == "invalid output"


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
    user = userdata.decode((only.parent / "data/synthetic/user_001.js").read_bytes())
    assert [r["run"] for r in user["runs"]] == ["nomem"]
    assert {r["run"] for rows in user["recons"].values() for r in rows} == {"nomem"}


@pytest.mark.anyio
async def test_unknown_run_is_bad_input(tmp_path):
    await _report(tmp_path)
    with pytest.raises(BadInput, match="unknown run.*nope"):
        await _report(tmp_path, ["nope"])


def test_view_command(tmp_path, capsys):
    anyio.run(_report, tmp_path)
    main(["view", "--db", str(tmp_path / "audit.db"), "--runs", "mem0", "--out", str(tmp_path / "cli")])
    assert (tmp_path / "cli/index.html").exists() and (tmp_path / "cli/assets/style.css").exists()
    assert (tmp_path / "cli/user.html").exists() and (tmp_path / "cli/assets/user.js").exists()
    assert "report written" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["view", "--db", str(tmp_path / "audit.db"), "--runs", "nope", "--out", str(tmp_path / "x")])
    assert exit_info.value.code == 2
    assert "unknown run" in capsys.readouterr().err


def test_user_data_written_for_small_reports_and_asked_for_large_ones(tmp_path, capsys, monkeypatch):
    """`--user-data auto` writes every user's data file up to AUTO_USER_RUNS user-runs; above it (or
    with `none`) the report holds its tables and pages, says so in one line, and the user page tells
    the reader how to get the drill-down. Data files of an earlier report into the folder go."""
    anyio.run(_report, tmp_path)
    db, out = str(tmp_path / "audit.db"), tmp_path / "cli"
    main(["view", "--db", db, "--out", str(out)])
    written = sorted(p.name for p in (out / "data/synthetic").glob("*.js"))
    assert written and "drill-down data not written" not in capsys.readouterr().out
    monkeypatch.setattr(userdata, "AUTO_USER_RUNS", 1)
    main(["view", "--db", db, "--out", str(out)])
    said = capsys.readouterr().out
    assert re.search(r"drill-down data not written \(\d+ user-runs, more than 1 for --user-data auto\)", said)
    assert not list((out / "data").rglob("*.js")) and (out / "index.html").exists()
    assert "without its users' data" in (out / "user.html").read_text()
    main(["view", "--db", db, "--out", str(out), "--user-data", "all"])
    assert sorted(p.name for p in (out / "data/synthetic").glob("*.js")) == written
    assert "without its users' data" not in (out / "user.html").read_text()
    monkeypatch.undo()
    main(["view", "--db", db, "--out", str(out), "--user-data", "none"])
    assert not list((out / "data").rglob("*.js")) and "drill-down data not written" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["view", "--db", db, "--out", str(out), "--serve", "--user-data", "all"])
    assert exit_info.value.code == 2 and "--user-data is for a static report" in capsys.readouterr().err


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


@pytest.mark.anyio
async def test_served_report_answers_user_data_from_the_store_on_loopback(tmp_path):
    """`view --serve`: the pages on disk hold no user data; the server produces a user's data file
    (the same bytes a static report writes) when asked, and only for users of the report."""
    import urllib.error
    import urllib.request

    from memaudit.report.serve import serve_report
    from memaudit.report.view import build_report

    static = await _report(tmp_path)
    async with open_store(tmp_path / "audit.db") as store:
        report = await build_report(store, tmp_path / "served", user_data="served")
        assert not (tmp_path / "served/data").exists() and (tmp_path / "served/user.html").exists()
        urls = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve_report(report, started=urls.append))
            while not urls:
                await anyio.sleep(0.01)
            assert urls[0].startswith("http://127.0.0.1:") and urls[0].endswith("/index.html")
            root = urls[0].removesuffix("index.html")

            def get(path: str) -> bytes:
                with urllib.request.urlopen(root + path) as response:
                    return response.read()

            served = await anyio.to_thread.run_sync(get, "data/synthetic/user_001.js")
            assert served == (static.parent / "data/synthetic/user_001.js").read_bytes()
            assert b"Table 2" in await anyio.to_thread.run_sync(get, "index.html")
            with pytest.raises(urllib.error.HTTPError, match="404"):
                await anyio.to_thread.run_sync(get, "data/synthetic/user_999.js")
            tg.cancel_scope.cancel()
