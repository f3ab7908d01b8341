"""`memaudit plan … --shards N --emit slurm|k8s --out DIR`: the files that run a planned study on a
cluster engine people already run, so that memaudit grows no scheduler of its own.

Every shard runs the study's commands (`study_commands`: rollout, score, attribute, as the plan's
flags ask) with `--shard auto` into its own store, `shards/shard-<i>.db`, which starts as a copy of
`bench.db`: the benchmark (and the plan's estimate, so `cost` on the merged study shows it) written
when the plan is made, so every shard plays the same benchmark whatever `--bench` named. A merge
then joins the shards into `study.db`; it refuses to run while a shard is missing and names it.

- Slurm: `array.sbatch` (one array task per shard, `--array=1-N`, so the task id is the shard),
  `merge.sbatch`, and `submit.sh`, which submits both, the merge with `--dependency=afterok` on the
  array; `bash submit.sh 2,5` submits those indices again, and a merge after them.
- Kubernetes: `job.yaml`, an Indexed Job (`completionMode: Indexed`, `completions: N`) whose pods
  mount a shared volume, and `merge-job.yaml`, run once the Indexed Job completed (`submit.sh`:
  apply, wait, apply).

Model settings travel by environment (`study.env` for Slurm, the pods' `env` for Kubernetes): the
endpoint, model, dialect, seed, rate budget, config file. An API key is never written: a Slurm job
inherits it from the shell that submits (sbatch passes the environment), a pod reads it from a
Secret. A base URL holding credentials is not written either: it must come from the environment.

The files are data, never code: every value that reaches them (paths, the memaudit binary, the
study's flags, settings, Slurm and Kubernetes names) is refused in one line if it holds a control
character (a newline would end the line it is written on and start a command), and written with
shell quoting in scripts and as a quoted YAML string in manifests. User values never go into an
`#SBATCH` line: `submit.sh` passes them to sbatch as quoted arguments. Kubernetes names (`--volume`,
`--secret`) must be DNS-1123 names, as the API server requires."""
from __future__ import annotations

import json
import re
import shlex
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from yarl import URL

from memaudit.config import BUNDLED_EMBED_MODEL, OPTION, PROMPTS_DIR
from memaudit.errors import BadInput
from memaudit.study.plan import Study

ENGINES = ("slurm", "k8s")
SEED_STORE = "bench.db"
STUDY_STORE = "study.db"
SHARD_STORE = "shards/shard-{}.db"
KEY_ENV = "OPENAI_API_KEY"  # what a pod reads the key from (the Secret's `api-key`)
_TIME = re.compile(r"(\d+):([0-5]\d):([0-5]\d)")
# A Kubernetes object name (a PersistentVolumeClaim, a Secret): a DNS-1123 subdomain.
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def one_line(value: str, field: str) -> str:
    """`value` if it is one line of printable text; else BadInput naming the option it came from. A
    control character (a newline, a carriage return, an escape) or a Unicode line separator would
    end the line of a job file it is written on: what follows would run as a command."""
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)
    if bad is not None:
        shown = value if len(value) <= 60 else value[:60] + "…"
        raise BadInput(f"must be one line of printable text; {shown!r} holds {bad!r}", field=field)
    return value


@dataclass(frozen=True)
class Resources:
    """What each shard asks of the cluster (the merge asks for one CPU and the same memory)."""
    cpus: int = 2
    mem_gb: int = 8
    time: str = "24:00:00"   # HH:MM:SS; Kubernetes: the pod's activeDeadlineSeconds
    partition: str | None = None   # Slurm; None: the cluster's default
    image: str = "memaudit:latest"  # Kubernetes: an image with memaudit installed
    volume: str = "memaudit-study"  # Kubernetes: the PersistentVolumeClaim shared by the pods
    mount: str = "/study"           # Kubernetes: where the pods mount it
    secret: str = "memaudit-api-key"  # Kubernetes: the Secret holding the key (`api-key`), optional

    def check(self) -> None:
        """Refuse, in one line, a value no job file may hold (before anything is written)."""
        self.seconds()
        for name in ("partition", "image", "mount"):
            if getattr(self, name) is not None:
                one_line(getattr(self, name), name)
        for name in ("volume", "secret"):
            if not _K8S_NAME.fullmatch(getattr(self, name)):
                raise BadInput(f"--{name} names a Kubernetes object: lower-case letters, digits, '-' and '.', "
                               f"starting and ending with a letter or digit; got {getattr(self, name)!r}", field=name)
        if not self.mount.startswith("/"):
            raise BadInput(f"--mount must be an absolute path in the pod, got {self.mount!r}", field="mount")

    def seconds(self) -> int:
        match = _TIME.fullmatch(self.time)
        if match is None:
            raise BadInput(f"--time expects HH:MM:SS such as 24:00:00, got {self.time!r}", field="time")
        hours, minutes, secs = map(int, match.groups())
        return hours * 3600 + minutes * 60 + secs


def study_commands(study: Study, bench_name: str) -> list[list[str]]:
    """The argument lists (after `memaudit`, before `--db`) of the commands every shard runs."""
    mode = "both" if len(study.modes) > 1 else study.modes[0]
    stages = {
        "rollout": ["rollout", "--bench", bench_name, "--systems", ",".join(study.systems),
                    *_flag("--users", study.users), *_flag("--tasks", study.tasks),
                    "--max-turns", str(study.max_turns), *_flag("--tag", study.tag), "--quiet"],
        "score": ["score", "--mode", mode, "--k", ",".join(map(str, study.ks)), "--dims", study.dims,
                  *_flag("--judges", ",".join(study.judges) if study.judges else None),
                  *_flag("--repeats", study.repeats if study.repeats != 1 else None)],
        "attribute": ["attribute", "--mode", mode],
    }
    commands = [[*stages[stage], "--shard", "auto"] for stage in study.stages]
    for command in commands:
        for arg in command:
            one_line(arg, command[0])
    return commands


def _flag(name: str, value) -> list[str]:
    return [] if value is None else [name, str(value)]


def settings_env(settings, config_file: Path | None) -> dict[str, str]:
    """The model settings of the plan, as the environment variables a shard's commands read: each
    setting under its first variable in config.OPTIONS. The seed, concurrency and timeout always; the
    endpoint with its model and dialect when there is one; the rest when set or not the default."""
    chosen = ["seed", "concurrency", "timeout"]
    if settings.base_url is not None:
        if any(_has_credentials(u) for u in settings.base_url.split(",")):
            raise BadInput("the base URL holds credentials (user:key@ or a query such as ?api-key=): they are "
                           f"never written into a job file; emit without it and set {OPTION['base_url'].env[0]} "
                           "in the environment the jobs run in", field="base_url")
        chosen += ["base_url", "model", "backend"]
    if settings.embed_model != BUNDLED_EMBED_MODEL:
        chosen.append("embed_model")
    if Path(settings.prompts_dir).resolve() != PROMPTS_DIR.resolve():
        chosen.append("prompts_dir")
    chosen += [name for name in ("rpm", "tpm") if getattr(settings, name) is not None]
    env = {OPTION[name].env[0]: _env_text(getattr(settings, name)) for name in chosen}
    if config_file is not None:
        env[OPTION["config"].env[0]] = _env_text(Path(config_file))
    for name, value in env.items():
        one_line(value, name)
    return env


def _env_text(value) -> str:
    """A setting as its variable holds it: a path absolute (jobs run elsewhere), a number as short as it reads."""
    if isinstance(value, Path):
        return str(value.resolve())
    return f"{value:g}" if isinstance(value, float) else str(value)


def _has_credentials(url: str) -> bool:
    parsed = URL(url.strip())
    return parsed.user is not None or bool(parsed.query_string)


def shard_body(commands: list[list[str]], index: str) -> list[str]:
    """The shell lines of one shard, `$STUDY` its study folder and `$MEMAUDIT` the memaudit it runs
    (both set by the script), `index` the shell word of its shard number: its store from the seed
    (once), then the commands, every argument shell-quoted."""
    return [f'DB="$STUDY/{SHARD_STORE.format(index)}"',
            f'[ -e "$DB" ] || {{ cp "$STUDY/{SEED_STORE}" "$DB.tmp" && mv "$DB.tmp" "$DB"; }}  # a copy of the benchmark, once',
            *(f'"$MEMAUDIT" {shlex.join(c)} --db "$DB"' for c in commands)]


def merge_line(shards: int) -> str:
    return f'"$MEMAUDIT" merge "$STUDY"/shards/shard-{{1..{shards}}}.db --into "$STUDY/{STUDY_STORE}"'


def _set(name: str, value: str, field: str) -> str:
    """`NAME='value'`: a value of the plan in a shell variable, quoted (and refused if not one line)."""
    return f"{name}={shlex.quote(one_line(value, field))}"


# -- Slurm -------------------------------------------------------------------------------------
def slurm_files(study: Study, bench_name: str, shards: int, res: Resources, env: dict[str, str], out: Path,
                memaudit: str) -> dict[str, str]:
    """array.sbatch, merge.sbatch, submit.sh and study.env, by file name."""
    res.check()  # a bad value is refused before anything is written
    header = [f"#SBATCH --time={res.time}", f"#SBATCH --mem={res.mem_gb}G"]
    prelude = ["set -euo pipefail", _set("STUDY", str(out.resolve()), "out"), 'source "$STUDY/study.env"',
               _set("MEMAUDIT_DEFAULT", memaudit, "MEMAUDIT_BIN"), 'MEMAUDIT="${MEMAUDIT_BIN:-$MEMAUDIT_DEFAULT}"']
    array = ["#!/bin/bash", "#SBATCH --job-name=memaudit-study", f"#SBATCH --array=1-{shards}",
             f"#SBATCH --cpus-per-task={res.cpus}", *header,
             f"# One array task per shard of {shards}: the task id is the shard (--shard auto reads it).",
             *prelude, *shard_body(study_commands(study, bench_name), "$SLURM_ARRAY_TASK_ID")]
    merge = ["#!/bin/bash", "#SBATCH --job-name=memaudit-merge", "#SBATCH --cpus-per-task=1", *header,
             "# Refuses to run while a shard is missing, and names it.", *prelude, merge_line(shards)]
    # The values of the plan go to sbatch as quoted arguments, never into an #SBATCH line.
    options = ["--parsable", "--export=ALL", *([f"--partition={res.partition}"] if res.partition else [])]
    submit = ["#!/bin/bash", "# bash submit.sh        the study: every shard, then the merge once all succeeded",
              "# bash submit.sh 2,5    shards 2 and 5 again (failed ones), then the merge once they succeeded",
              "# The API key is not in these files: export it here first (sbatch passes the environment on).",
              "set -euo pipefail", _set("STUDY", str(out.resolve()), "out"),
              '[[ -z ${1:-} || $1 =~ ^[0-9][0-9,:%-]*$ ]] || '
              '{ echo "submit.sh: give shard indices such as 2,5 or 1-3, got: $1" >&2; exit 2; }',
              f"options=({shlex.join(options)})",
              'array=$(sbatch "${options[@]}" --output="$STUDY/logs/shard-%a.out" ${1:+--array=$1} '
              '"$STUDY/array.sbatch")',
              'array=${array%%;*}',
              'merge=$(sbatch "${options[@]}" --output="$STUDY/logs/merge.out" "--dependency=afterok:$array" '
              '"$STUDY/merge.sbatch")',
              'merge=${merge%%;*}',
              f'echo "array job $array (shards ${{1:-1-{shards}}} of {shards}), merge job $merge after it; '
              f'logs in $STUDY/logs"']
    exported = [f"export {_set(name, value, name)}" for name, value in sorted(env.items())]
    study_env = ["# The model settings every command of the study runs with (no API key: it comes from the",
                 "# environment sbatch is called in).", *exported]
    return {"array.sbatch": _lines(array), "merge.sbatch": _lines(merge), "submit.sh": _lines(submit),
            "study.env": _lines(study_env)}


# -- Kubernetes --------------------------------------------------------------------------------
def k8s_files(study: Study, bench_name: str, shards: int, res: Resources, env: dict[str, str],
              name: str = "memaudit-study") -> dict[str, str]:
    """job.yaml (the Indexed Job), merge-job.yaml and submit.sh, by file name."""
    res.check()
    deadline = res.seconds()
    mount = res.mount.rstrip("/") or "/"
    prelude = ["set -eu", _set("STUDY", mount, "mount"), "MEMAUDIT=memaudit"]
    shard = [*prelude, 'mkdir -p "$STUDY/shards"',
             # Arithmetic on a variable evaluates its text: only a number is let in.
             'case ${JOB_COMPLETION_INDEX:-} in ""|*[!0-9]*) echo "JOB_COMPLETION_INDEX is not a number" >&2; '
             'exit 2;; esac',
             "I=$((JOB_COMPLETION_INDEX + 1))", *shard_body(study_commands(study, bench_name), "$I")]
    job = _job(name, res, env, shard, deadline, {"MEMAUDIT_SHARDS": str(shards)},
               {"completionMode": "Indexed", "completions": shards, "parallelism": shards})
    merge = _job(f"{name}-merge", res, env, [*prelude, merge_line(shards)], deadline, {}, {})
    submit = ["#!/bin/bash", "# The volume must hold the study's bench.db first (copy it there, e.g. with kubectl cp",
              f"# into a pod that mounts {res.volume} at {mount}). The key comes from Secret {res.secret}.",
              "set -euo pipefail", 'HERE=$(cd "$(dirname "$0")" && pwd)', 'kubectl apply -f "$HERE/job.yaml"',
              f"kubectl wait --for=condition=complete --timeout={deadline}s job/{name}",
              'kubectl apply -f "$HERE/merge-job.yaml"']
    return {"job.yaml": to_yaml(job), "merge-job.yaml": to_yaml(merge), "submit.sh": _lines(submit)}


def _job(name: str, res: Resources, env: dict[str, str], script: list[str], deadline: int, extra_env: dict,
         spec: dict) -> dict:
    variables = [{"name": k, "value": v} for k, v in sorted({**env, **extra_env}.items())]
    variables.append({"name": KEY_ENV, "valueFrom": {"secretKeyRef": {"name": res.secret, "key": "api-key",
                                                                      "optional": True}}})
    container = {"name": "memaudit", "image": res.image, "command": ["bash", "-c", "\n".join(script)],
                 "env": variables,
                 "resources": {"requests": {"cpu": str(res.cpus), "memory": f"{res.mem_gb}Gi"},
                               "limits": {"memory": f"{res.mem_gb}Gi"}},
                 "volumeMounts": [{"name": "study", "mountPath": res.mount}]}
    pod = {"restartPolicy": "OnFailure", "activeDeadlineSeconds": deadline, "containers": [container],
           "volumes": [{"name": "study", "persistentVolumeClaim": {"claimName": res.volume}}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": {"app": "memaudit"}},
            "spec": {**spec, "backoffLimit": 6, "template": {"metadata": {"labels": {"app": "memaudit"}},
                                                             "spec": pod}}}


def to_yaml(value, indent: int = 0) -> str:
    """A small YAML writer for the manifests (no dependency): mappings, lists, numbers, booleans and
    strings as JSON-quoted scalars (valid YAML), a multi-line string as a literal block."""
    return "\n".join(_yaml_lines(value, indent)) + "\n"


def _yaml_lines(value, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines += [f"{pad}{key}:", *_yaml_lines(item, indent + 2)]
            else:
                lines.append(f"{pad}{key}: {_scalar(item, indent + 2)}")
        return lines
    lines = []
    for item in value:
        inner = _yaml_lines(item, indent + 2) if isinstance(item, (dict, list)) and item else \
            [f"{pad}  {_scalar(item, indent + 2)}"]
        lines += [f"{pad}- {inner[0].lstrip()}", *inner[1:]]
    return lines


def _scalar(value, indent: int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    if "\n" in value and _literal(value):
        return "|-\n" + "\n".join(" " * indent + line for line in value.split("\n"))
    return json.dumps(value)  # a double-quoted YAML string: every character escaped that needs it


def _literal(value: str) -> bool:
    """Whether a multi-line string reads back unchanged from a literal block: printable lines (tabs
    allowed), none led or ended by blanks, and no empty last line."""
    lines = value.split("\n")
    return lines[-1] != "" and all(line == line.strip() and all(
        c == "\t" or unicodedata.category(c) not in ("Cc", "Zl", "Zp") for c in line) for line in lines)


def _lines(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def write_files(out: Path, files: dict[str, str]) -> list[Path]:
    """The files under `out` (created with `shards/` and `logs/`); scripts executable."""
    for folder in ("shards", "logs"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        path.write_text(text)
        if name.endswith((".sh", ".sbatch")):
            path.chmod(0o755)
        written.append(path)
    return written
