"""`memaudit plan … --shards N --emit slurm|k8s --out DIR`: the files that run a study on a cluster.
Their structure is checked here (the Kubernetes manifests parsed as YAML, no cluster contacted);
tests/study/test_slurm.py submits the Slurm files to a real single-node Slurm."""
from __future__ import annotations

import os

import pytest
import yaml

from memaudit.cli import main
from memaudit.config import OPTIONS, load_settings
from memaudit.study.emit import Resources, settings_env, study_commands, to_yaml
from memaudit.study.plan import STUDY_COMMANDS, Study

SECRET = "sk-never-in-a-file-0123456789"
STUDY_FLAGS = ["--bench", "sample", "--systems", "nomem,bm25", "--users", "user_001,user_003", "--tasks", "2",
               "--max-turns", "2", "--dims", "targeted", "--judges", "a,b,c", "--repeats", "2"]


def emit(tmp_path, engine: str, *extra: str):
    out = tmp_path / engine
    main(["plan", *STUDY_FLAGS, "--shards", "3", "--emit", engine, "--out", str(out), "--base-url",
          "http://127.0.0.1:9/v1", "--model", "fake", "--rpm", "600", *extra])
    return out


def no_key_in(out) -> None:
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def test_every_stage_runs_with_shard_auto_and_the_studys_flags():
    study = Study("sample", ("nomem", "bm25"), users="2", tasks=3, max_turns=2, dims="targeted", ks=(1, 5),
                  judges=("a", "b", "c"), repeats=2, tag="t")
    commands = study_commands(study, "sample")
    assert [c[0] for c in commands] == list(STUDY_COMMANDS)  # every stage a plan can ask for
    assert all(c[-2:] == ["--shard", "auto"] for c in commands)
    rollout, score, attribute = commands
    assert rollout[:5] == ["rollout", "--bench", "sample", "--systems", "nomem,bm25"]
    assert {"--users", "2", "--tasks", "3", "--max-turns", "--tag", "t"} <= set(rollout)
    assert score[:7] == ["score", "--mode", "both", "--k", "1,5", "--dims", "targeted"]
    assert {"--judges", "a,b,c", "--repeats", "2"} <= set(score)
    assert attribute[:3] == ["attribute", "--mode", "both"]
    assert [c[0] for c in study_commands(Study("sample", ("nomem",), stages=("rollout",)), "sample")] == ["rollout"]


def test_slurm_files_submit_an_array_and_a_merge_after_it(tmp_path, capsys):
    out = emit(tmp_path, "slurm", "--partition", "gpu", "--cpus", "4", "--mem-gb", "16", "--time", "02:00:00")
    printed = capsys.readouterr()
    assert "| nomem |" in printed.out and "| bm25 |" in printed.out  # the estimate beside the scripts
    assert "submit.sh" in printed.err
    array = (out / "array.sbatch").read_text()
    for line in ("#SBATCH --array=1-3", "#SBATCH --cpus-per-task=4", "#SBATCH --mem=16G",
                 "#SBATCH --time=02:00:00"):
        assert line in array
    commands = [line for line in array.splitlines() if line.startswith('"$MEMAUDIT"')]
    assert len(commands) == 3 and all("--shard auto" in c for c in commands)
    assert 'shard-$SLURM_ARRAY_TASK_ID.db' in array
    assert "--judges a,b,c --repeats 2" in array and "--users user_001,user_003" in array
    assert "merge" in (out / "merge.sbatch").read_text() and "shard-{1..3}.db" in (out / "merge.sbatch").read_text()
    submit = (out / "submit.sh").read_text()
    assert "--dependency=afterok:$array" in submit and os.access(out / "submit.sh", os.X_OK)
    assert "options=(--parsable --export=ALL --partition=gpu)" in submit  # a value of the plan: an argument
    env = (out / "study.env").read_text()
    assert "MEMAUDIT_BASE_URL=http://127.0.0.1:9/v1" in env and "MEMAUDIT_RPM=600" in env
    assert {p.name for p in out.iterdir()} >= {"bench.db", "plan.md", "shards", "logs"}
    no_key_in(out)


def test_the_config_file_given_with_the_flag_reaches_the_jobs(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[roles.recovery_judge]\ntemperature = 0.0\n')
    out = emit(tmp_path, "slurm", "--config", str(config))
    assert f"MEMAUDIT_CONFIG={config.resolve()}" in (out / "study.env").read_text()


def test_the_job_environment_reads_back_as_the_plans_settings(tmp_path):
    """Every variable a job file sets is a settings-table variable (config.OPTIONS), and a shard reading
    them gets the plan's settings back."""
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    config = tmp_path / "c.toml"
    config.write_text("[default]\n")
    plan = load_settings(base_url="http://127.0.0.1:9/v1", model="fake", backend="vllm", seed=7, concurrency=3,
                         timeout=12.5, rpm=600, tpm=90_000, embed_model="some/model", prompts_dir=prompts, env={})
    env = settings_env(plan, config)
    assert set(env) <= {o.env[0] for o in OPTIONS if o.env}
    shard = load_settings(env=env)
    for name in ("base_url", "model", "backend", "seed", "concurrency", "timeout", "rpm", "tpm", "embed_model",
                 "prompts_dir"):
        assert getattr(shard, name) == getattr(plan, name), name
    assert env["MEMAUDIT_CONFIG"] == str(config.resolve())


def test_k8s_files_are_an_indexed_job_and_a_merge_job_over_one_volume(tmp_path):
    out = emit(tmp_path, "k8s", "--image", "registry.test/memaudit:1", "--volume", "study-pvc", "--secret", "keys")
    job = yaml.safe_load((out / "job.yaml").read_text())
    merge = yaml.safe_load((out / "merge-job.yaml").read_text())
    assert job["kind"] == merge["kind"] == "Job" and job["apiVersion"] == "batch/v1"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 3
    assert "completionMode" not in merge["spec"]
    for manifest in (job, merge):
        pod = manifest["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == "registry.test/memaudit:1"
        assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "study-pvc"
        assert container["volumeMounts"][0]["mountPath"] == "/study"
        env = {e["name"]: e for e in container["env"]}
        assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "keys"
        assert env["MEMAUDIT_MODEL"]["value"] == "fake"
        assert container["resources"]["requests"]["memory"] == "8Gi"
    script = spec["template"]["spec"]["containers"][0]["command"][2]
    env = {e["name"]: e.get("value") for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert env["MEMAUDIT_SHARDS"] == "3" and "JOB_COMPLETION_INDEX + 1" in script
    assert script.count("--shard auto") == 3
    assert "shard-{1..3}.db" in merge["spec"]["template"]["spec"]["containers"][0]["command"][2]
    no_key_in(out)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/v1?api-key=" + SECRET, f"http://me:{SECRET}@127.0.0.1:9/v1"])
def test_a_base_url_holding_credentials_is_never_written(tmp_path, capsys, url):
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", *STUDY_FLAGS, "--shards", "3", "--emit", "slurm", "--out", str(tmp_path / "s"), "--base-url",
              url, "--model", "fake"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "credentials" in err and SECRET not in err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("extra, says", [(["--emit", "slurm"], "--emit needs --shards N and --out DIR"),
                                         (["--shards", "3"], "--shards and --out go with --emit"),
                                         (["--emit", "k8s", "--shards", "2", "--out", "o", "--time", "1h"],
                                          "--time expects HH:MM:SS")])
def test_incomplete_emit_options_are_one_line(tmp_path, capsys, extra, says):
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--bench", "sample", "--systems", "nomem", *extra])
    assert exit_info.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_yaml_writer_round_trips_what_the_manifests_hold():
    value = {"a": [{"b": "x: y", "c": ["1", 2, True]}, "multi\nline \"quoted\""], "empty": [], "none": {},
             "n": 1.5}
    assert yaml.safe_load(to_yaml(value)) == value
    assert Resources(time="100:30:00").seconds() == 361_800
