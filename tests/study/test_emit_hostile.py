"""Issue 42, finding 2: emitted job files are data, never code. Every emitted script (submit.sh,
array.sbatch, merge.sbatch; the Kubernetes pods' `bash -c` scripts and submit.sh) runs here under
stub `sbatch`, `kubectl` and `memaudit` with hostile values (quotes, `$(…)`, backticks, `;`) in the
study folder, the mount, the memaudit binary's path, the partition, the model and the config path:
no value runs (no marker file appears) and each arrives whole as one argument or variable. A value
with a newline or another control character is refused in one line, and nothing is written."""
from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from memaudit.cli import main

MARKER = "PWNED"
# Every way a value could end a quoted word and start a command.
HOSTILE = f"""a"b'c $(touch {MARKER}) `touch {MARKER}`; touch {MARKER} & \\"""
STUDY_FLAGS = ["--bench", "sample", "--systems", "nomem", "--users", "1", "--tasks", "1", "--max-turns", "1"]
STUB = """#!/bin/bash
# records its name, argv (NUL-separated) and the variables the study sets, then answers like the real one
{ printf '%s\\0' "$(basename "$0")" "$@"; printf '\\n'; } >> "$STUB_LOG"
env | grep '^MEMAUDIT_' | sort >> "$STUB_ENV" || true
[ "$(basename "$0")" = sbatch ] && echo "4242;cluster"
exit 0
"""


def stub(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(STUB)
    path.chmod(0o755)
    return path


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Stub commands first on PATH (the real kubectl, if installed, is never reached) and a clean
    working directory, where a marker would appear."""
    stubs = tmp_path / "stubs"
    for name in ("sbatch", "kubectl", "memaudit"):
        stub(stubs, name)
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "STUB_LOG": str(tmp_path / "calls.log"),
           "STUB_ENV": str(tmp_path / "env.log"), "HOME": str(tmp_path)}
    return tmp_path, work, env


def bash(args: list[str], work: Path, env: dict, script: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", *args] if script is None else ["bash", "-c", script], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "calls.log"
    return [line.split("\0")[:-1] for line in log.read_text().splitlines() if line] if log.exists() else []


def no_marker(tmp_path: Path) -> None:
    assert not [p for p in tmp_path.rglob(MARKER)], "a value ran as a command"


def plan(tmp_path: Path, engine: str, out: Path, *extra: str) -> None:
    config = tmp_path / f"conf {HOSTILE}.toml"
    config.write_text("[default]\n")
    main(["plan", *STUDY_FLAGS, "--shards", "2", "--emit", engine, "--out", str(out), "--base-url",
          f"http://127.0.0.1:9/v1/{HOSTILE.replace(' ', '')}", "--model", HOSTILE, "--config", str(config), *extra])


def test_slurm_scripts_run_no_value(sandbox, monkeypatch):
    tmp_path, work, env = sandbox
    binary = stub(tmp_path / f"bin {HOSTILE}", "memaudit")  # the memaudit path pasted into the scripts
    monkeypatch.setattr("memaudit.cli.study_cmds._memaudit_command", lambda: str(binary))
    out = tmp_path / f"study {HOSTILE}"
    plan(tmp_path, "slurm", out, "--partition", f"gpu {HOSTILE}")
    bash([str(out / "submit.sh")], work, env)
    bash([str(out / "array.sbatch")], work, {**env, "SLURM_ARRAY_TASK_ID": "1"})
    bash([str(out / "merge.sbatch")], work, env)
    no_marker(tmp_path)
    sbatch = [c for c in calls(tmp_path) if c[0] == "sbatch"]
    assert len(sbatch) == 2 and f"--partition=gpu {HOSTILE}" in sbatch[0]
    assert f"--output={out.resolve()}/logs/shard-%a.out" in sbatch[0] and sbatch[1][-1] == f"{out.resolve()}/merge.sbatch"
    ran = [c for c in calls(tmp_path) if c[0] == "memaudit"]
    assert [c[1] for c in ran] == ["rollout", "score", "attribute", "merge"]
    assert ran[0][-1] == f"{out.resolve()}/shards/shard-1.db"  # the folder arrives whole, as one argument
    assert f"MEMAUDIT_MODEL={HOSTILE}" in (tmp_path / "env.log").read_text()


def test_kubernetes_scripts_run_no_value(sandbox):
    tmp_path, work, env = sandbox
    mount = tmp_path / f"mnt {HOSTILE}"
    mount.mkdir()
    out = tmp_path / "k8s"
    plan(tmp_path, "k8s", out, "--mount", str(mount), "--image", f"registry.test/{HOSTILE}")
    shutil.copy(out / "bench.db", mount / "bench.db")  # what submit.sh's comment asks for
    bash([str(out / "submit.sh")], work, env)
    assert [c[:2] for c in calls(tmp_path)] == [["kubectl", "apply"], ["kubectl", "wait"], ["kubectl", "apply"]]
    for manifest, extra in (("job.yaml", {"JOB_COMPLETION_INDEX": "0"}), ("merge-job.yaml", {})):
        (container,) = yaml.safe_load((out / manifest).read_text())["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"registry.test/{HOSTILE}"  # a YAML string, read back whole
        assert container["volumeMounts"][0]["mountPath"] == str(mount)
        pod_env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        assert pod_env["MEMAUDIT_MODEL"] == HOSTILE
        bash([], work, {**env, **pod_env, **extra}, script=container["command"][2])
    no_marker(tmp_path)
    ran = [c for c in calls(tmp_path) if c[0] == "memaudit"]
    assert [c[1] for c in ran] == ["rollout", "score", "attribute", "merge"]
    assert ran[0][-1] == f"{mount}/shards/shard-1.db"


@pytest.mark.parametrize("engine, option, value", [
    ("slurm", "--partition", "gpu\ntouch PWNED"), ("slurm", "--out", "study\ntouch PWNED"),
    ("k8s", "--mount", "/study\ntouch PWNED"), ("k8s", "--image", "img\rx"), ("k8s", "--secret", "keys\nx"),
    ("k8s", "--volume", "pvc\nx"), ("k8s", "--secret", 'a"b'), ("k8s", "--volume", "pvc $(x)"),
    ("slurm", "--model", "fake\ntouch PWNED"), ("slurm", "--tag", "t\nx"), ("slurm", "--users", "1\n2"),
    ("k8s", "--mount", "relative"), ("slurm", "--partition", "gpu\u2028x")])
def test_a_value_no_job_file_may_hold_is_one_line_and_writes_nothing(tmp_path, capsys, engine, option, value):
    out = tmp_path / "s"
    flags = {"--out": str(out), "--model": "fake", **({option: str(tmp_path / value)} if option == "--out" else
                                                       {option: value})}
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", *STUDY_FLAGS, "--shards", "2", "--emit", engine, "--base-url", "http://127.0.0.1:9/v1",
              *[part for pair in flags.items() for part in pair]])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert not out.exists() and not (tmp_path / value).exists()


def test_a_plan_tag_is_refused_as_rollout_refuses_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", *STUDY_FLAGS, "--tag", "../x", "--db", str(tmp_path / "m.db")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "not a safe id" in err and err.count("\n") == 1


def test_emitted_env_values_read_back_exactly(sandbox):
    """study.env, sourced by bash, gives each variable back as the plan wrote it."""
    tmp_path, work, env = sandbox
    out = tmp_path / "plain"
    plan(tmp_path, "slurm", out)
    shown = bash([], work, env, script=f'source {shlex.quote(str(out / "study.env"))}; printf "%s" "$MEMAUDIT_MODEL"')
    assert shown.stdout == HOSTILE
    no_marker(tmp_path)
