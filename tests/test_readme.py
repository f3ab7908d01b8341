"""The README is a front page whose commands run as written: every shell block that starts the fake
model is run here, line by line as a user pastes it, against a loopback `memaudit serve --fake`;
the other blocks need a build (`make`) or a remote endpoint, and each is named below. The reference
lives in docs/, one page a topic, and every page the README links to exists."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from memaudit.config import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```sh\n(.*?)```", README, re.S)
FAKE = "serve --fake"
# What a block that is not run here needs instead (the first line that says so).
NOT_RUN_HERE = {"make run": "the build of `make install`", "api.openai.com": "a remote API and its key"}
PORT = "8765"  # the README's port; the test serves on a free one instead
INSTALL = "pip install"  # the tour's light install: perf/fake_tour.py --install times it in a fresh venv


def test_the_readme_is_a_front_page():
    assert len(README.splitlines()) <= 300
    for page in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (REPO_ROOT / page).is_file(), f"README links to {page}, which does not exist"


def test_every_shell_block_is_run_on_the_fake_or_says_what_it_needs():
    for block in BLOCKS:
        assert FAKE in block or any(marker in block for marker in NOT_RUN_HERE), f"a README block no test runs:\n{block}"


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def as_written(block: str, work: Path) -> str:
    """The block as a script: the installed `memaudit` is this checkout's, the port a free one, the
    install left out, and the fake stopped however the script ends."""
    bin_dir = work / ".venv" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "memaudit").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO_ROOT / "memaudit.py"}" "$@"\n')
    (bin_dir / "memaudit").chmod(0o755)
    lines = [line for line in block.splitlines() if INSTALL not in line]
    return "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + "\n".join(lines).replace(PORT, free_port()) + "\n"


def skip_without_its_systems(block: str) -> None:
    """The libraries' comparison needs them installed (`make install`; the light install has none)."""
    from memaudit.adapters.registry import get_adapter

    for system in sorted(systems_of(block)):
        try:
            get_adapter(system)
        except Exception as exc:  # noqa: BLE001 - whatever stops it loading, the block cannot run here
            pytest.skip(f"{system} does not load here: {exc}")


def user_env() -> dict:
    """A user's shell: no memaudit setting of this machine leaks in."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MEMAUDIT_", "OPENAI_"))}


def block_id(block: str) -> str:
    """A block by the systems it runs: `nomem,bm25` (the tour), `mem0ai,graphiti,…` (the libraries)."""
    return re.search(r"--systems (\S+)", block).group(1).split(",")[0]


def systems_of(block: str) -> set[str]:
    return {s for systems in re.findall(r"--systems (\S+)", block) for s in systems.split(",")}


def as_param(block: str):
    """A block that runs deployed libraries takes minutes: marked `libraries` (the fast suite skips it)."""
    from memaudit.adapters.registry import extras

    slow = systems_of(block) & extras()
    return pytest.param(block, id=block_id(block), marks=[pytest.mark.libraries] if slow else [])


@pytest.mark.parametrize("block", [as_param(b) for b in BLOCKS if FAKE in b])
def test_the_readme_block_runs_on_the_fake(block, tmp_path):
    skip_without_its_systems(block)
    done = subprocess.run(["bash", "-c", as_written(block, tmp_path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=1200, env=user_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "identical" in done.stdout or "identical" not in block
    shown = shown_output(block)  # the README quotes what the block prints: it must be what it prints
    assert shown is None or table_lines(shown) == table_lines(done.stdout), "the README quotes another output"


def shown_output(block: str) -> str | None:
    """The plain output block the README quotes right after `block` (before the next shell block)."""
    after = README.split(f"```sh\n{block}```", 1)[1].split("```sh", 1)[0]
    found = re.search(r"\n```\n(.*?)```", after, re.S)
    return found.group(1) if found else None


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]
