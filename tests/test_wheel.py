"""The package outside a checkout: build the wheel, install it into a scratch virtualenv, and from a
directory outside the repository validate the bundled sample and run a tiny pipeline (rollout of
1 user × 1 task, score, tables, the HTML report) on the loopback fake. The dependencies come from
the running environment through a .pth file, so nothing is downloaded; the wheel is installed with
--no-deps."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from memaudit.testing import serve

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("memaudit", "adapters", "prompts", "db", "setup.py", "pyproject.toml", "README.md")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The scratch venv's python, with memaudit installed from the wheel built from this repo."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    source.mkdir()
    for name in SOURCES:  # a copy, so the build leaves nothing behind in the repo
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"),
                            str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (root / "dist").glob("memaudit_bench-*.whl")
    top_level = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {name for name in top_level if not name.endswith(".dist-info")} == {"memaudit"}

    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    packages = {p.name for p in site.iterdir() if (p / "__init__.py").is_file()}
    assert packages == {"memaudit"}, packages  # no top-level `adapters` (or anything else)
    return python


def memaudit(python: Path, cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMAUDIT_", "OPENAI_", "PYTHON"))}
    done = subprocess.run([str(python.parent / "memaudit"), *args], cwd=cwd, env={**env, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    found = subprocess.run([str(installed), "-c", "import memaudit, memaudit.adapters, memaudit.resources as r; "
                            "print(memaudit.__file__); print(memaudit.adapters.__file__); "
                            "print(r.data_dir('prompts')); print(r.data_dir('db'))"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
    site = str(installed.parent.parent)
    assert all(path.startswith(site) for path in found), found


def test_validate_and_a_tiny_pipeline_from_outside_the_repo(installed, tmp_path):
    assert not tmp_path.is_relative_to(REPO)
    out = memaudit(installed, tmp_path, "bench", "validate", "sample")
    assert "sample" in out
    with serve() as url:
        model = ["--base-url", url, "--model", "fake", "--db", "w.db"]
        memaudit(installed, tmp_path, *model, "rollout", "--bench", "sample", "--systems", "longctx_full",
                 "--users", "1", "--tasks", "1", "--max-turns", "2", "--quiet")
        scored = memaudit(installed, tmp_path, *model, "score", "--mode", "dump_all")
    assert "31 targets" in scored
    assert "longctx_full" in memaudit(installed, tmp_path, "--db", "w.db", "tables", "--format", "md")
    memaudit(installed, tmp_path, "--db", "w.db", "view", "--out", "report")
    assert (tmp_path / "report" / "index.html").is_file()
    assert list((tmp_path / "report").rglob("*.css"))
