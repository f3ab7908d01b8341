"""`prompts import-published` on hostile checkouts and output paths: each is refused in one line
naming the file, without a traceback, and nothing is written (issue 36 item 7). The checkout's
files are read only when they are regular files inside it and small (memaudit/userfiles.py), and a
constant Python would take from its last assignment is refused rather than guessed. The pack's
commit comes from git, or from a `COMMIT` file in a checkout copied without `.git` (issue 35 item 6)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memaudit.published.pack import MAX_SOURCE_BYTES
from tests.scoring.stand_in import write_stand_in
from tests.scoring.test_published_pack import run_cli


def import_pack(capsys, src, out) -> tuple[int, str, str]:
    return run_cli(["prompts", "import-published", str(src), "--out", str(out)], capsys)


def refused(capsys, src, out, *words) -> str:
    """The command failed with one line holding `words`, and left nothing beside `out`."""
    before = sorted(p.name for p in out.parent.iterdir()) if out.parent.is_dir() else []
    code, stdout, err = import_pack(capsys, src, out)
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(word in err for word in words), err
    assert (sorted(p.name for p in out.parent.iterdir()) if out.parent.is_dir() else []) == before
    return err


def replace_scorer(src, make) -> None:
    scorer = src / "scorer.py"
    scorer.unlink()
    make(scorer)


@pytest.mark.parametrize("target", ["/etc/passwd", "/dev/zero", "outside"])
def test_a_source_file_linked_out_of_the_checkout_is_refused(tmp_path, capsys, target):
    src = write_stand_in(tmp_path / "checkout")
    if target == "outside":  # a valid source file, but not the checkout's
        target = tmp_path / "elsewhere.py"
        target.write_text((src / "scorer.py").read_text())
    replace_scorer(src, lambda scorer: scorer.symlink_to(target))
    refused(capsys, src, tmp_path / "pack", "scorer.py", "resolves outside")


def test_a_link_inside_the_checkout_is_read(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    (src / "scorer.py").rename(src / "scorer_real.py")
    (src / "scorer.py").symlink_to("scorer_real.py")
    code, _, err = import_pack(capsys, src, tmp_path / "pack")
    assert code == 0, err


@pytest.mark.parametrize("kind, made", [("a FIFO", os.mkfifo), ("a directory", os.mkdir)])
def test_a_source_that_is_no_regular_file_is_refused_without_reading_it(tmp_path, capsys, kind, made):
    src = write_stand_in(tmp_path / "checkout")
    replace_scorer(src, made)  # a FIFO is opened without blocking: nothing waits for a writer
    refused(capsys, src, tmp_path / "pack", "scorer.py", kind)


def test_a_source_larger_than_the_limit_is_refused_unread(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    with open(src / "scorer.py", "r+b") as handle:
        handle.truncate(MAX_SOURCE_BYTES + 1)  # sparse: nothing of it is on disk
    refused(capsys, src, tmp_path / "pack", "scorer.py", "larger than")


def test_a_constant_assigned_twice_is_refused_as_python_keeps_the_last(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    scorer = src / "scorer.py"
    scorer.write_text(scorer.read_text() + '\nif True:\n    _SLOT_JUDGE_PROMPT = "another {dimension}"\n')
    refused(capsys, src, tmp_path / "pack", "scorer.py", "_SLOT_JUDGE_PROMPT is assigned more than once")


def test_an_annotated_constant_is_read(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    scorer = src / "scorer.py"
    scorer.write_text(scorer.read_text().replace("_SLOT_JUDGE_PROMPT = ", "_SLOT_JUDGE_PROMPT: str = "))
    code, _, err = import_pack(capsys, src, tmp_path / "pack")
    assert code == 0, err
    assert "STAND-IN JUDGE." in (tmp_path / "pack" / "recovery_judge.md").read_text()


def test_an_out_symlink_is_refused(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    (tmp_path / "target").mkdir()
    (tmp_path / "pack").symlink_to(tmp_path / "target")
    refused(capsys, src, tmp_path / "pack", "symlink")
    assert list((tmp_path / "target").iterdir()) == []


def test_an_out_where_nothing_can_be_written_is_refused(tmp_path, capsys):
    """/proc takes no new directory, not even from root (file permissions would not stop root)."""
    src = write_stand_in(tmp_path / "checkout")
    code, stdout, err = import_pack(capsys, src, Path("/proc/memaudit-pack"))
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "cannot write the pack there" in err, err
    assert not Path("/proc/memaudit-pack").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_out_is_refused(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        refused(capsys, src, locked / "pack", "cannot write the pack there")
    finally:
        locked.chmod(0o755)


def test_a_checkout_without_git_takes_its_commit_from_its_commit_file(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    (src / "COMMIT").write_text("19bb8364aaaabbbbccccddddeeeeffff00001111\n")
    code, _, err = import_pack(capsys, src, tmp_path / "pack")
    assert code == 0, err
    assert json.loads((tmp_path / "pack" / "pack.json").read_text())["commit"] == \
        "19bb8364aaaabbbbccccddddeeeeffff00001111"
    code, out, _ = run_cli(["--prompts", str(tmp_path / "pack"), "prompts", "list"], capsys)
    assert code == 0 and out.startswith("prompts: published-19bb836 ")


@pytest.mark.parametrize("content", ["not a commit\n", ""])
def test_a_commit_file_without_a_commit_id_is_refused(tmp_path, capsys, content):
    src = write_stand_in(tmp_path / "checkout")
    (src / "COMMIT").write_text(content)
    refused(capsys, src, tmp_path / "pack", "COMMIT", "not a commit id")


def test_a_commit_file_linked_out_of_the_checkout_is_refused(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    (src / "COMMIT").symlink_to("/dev/zero")
    refused(capsys, src, tmp_path / "pack", "COMMIT", "resolves outside")
