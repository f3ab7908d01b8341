"""Benchmark for issue 42: the hostile-server, hostile-answer and hostile-value probe, run as a user
meets each case (a `memaudit` CLI process against a loopback server, or the emitted job scripts
under stub `sbatch`/`kubectl`/`memaudit`), printing each case, whether it held, its wall time, and
at the end how many cases were tried and how many held.

    .venv/bin/python perf/hostile_probe.py

A case holds when memaudit does what docs/hostile-input.md says: an echoed key is in no file of the
store (and the command says once it was removed), an emitted script runs no value, a value no job
file may hold is one line, an odd answer is a recorded failure, a number that is no count is
unknown, and a hostile price file or scheduler variable is one line. Never a traceback, never a hang
(each process gets 300 s).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.config import load_settings  # noqa: E402
from memaudit.errors import EndpointError, InvalidOutput  # noqa: E402
from memaudit.llm.client import LLM  # noqa: E402
from memaudit.llm.tools import MAX_TOOL_CALLS  # noqa: E402
from memaudit.store import open_store  # noqa: E402
from memaudit.testing.fake_openai import FakeOpenAI  # noqa: E402
from memaudit.testing.http_server import scripted_fake, serve  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, str(REPO / "memaudit.py")]
KEY = "sk-echoed-by-a-careless-proxy-0123456789"
MARKER = "PWNED"
HOSTILE = f"""a"b'c $(touch {MARKER}) `touch {MARKER}`; touch {MARKER} & \\"""
ROLLOUT = ["rollout", "--bench", "sample", "--users", "1", "--tasks", "1", "--max-turns", "1", "--quiet"]
TOOLS = {"tools": [{"type": "function", "function": {"name": "note", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}}}}}], "tool_choice": "required"}
STUB = """#!/bin/bash
printf '%s\\n' "$(basename "$0") $*" >> "$STUB_LOG"
[ "$(basename "$0")" = sbatch ] && echo "4242;cluster"
exit 0
"""


def cli(args: list[str], env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, **(env or {})})


def one_line(done: subprocess.CompletedProcess, says: str = "") -> bool:
    lines = done.stderr.strip().splitlines()
    return done.returncode == 2 and len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr


def no_marker(folder: Path) -> bool:
    return not list(folder.rglob(MARKER))


# -- the fakes ----------------------------------------------------------------------------------------
class Shaped(FakeOpenAI):
    """A fake whose chat answers `shape(answer)` rewrites (deep arguments, odd usage, many calls)."""

    def __init__(self, shape):
        super().__init__()
        self.shape = shape

    def completion(self, body, text, calls=None):
        return self.shape(super().completion(body, text, calls))


def deep_arguments(answer: dict) -> dict:
    for call in answer["choices"][0]["message"].get("tool_calls") or []:
        call["function"]["arguments"] = '{"text": ' * 5000 + '"x"' + "}" * 5000
    return answer


def many_calls(answer: dict) -> dict:
    calls = answer["choices"][0]["message"].get("tool_calls")
    if calls:
        answer["choices"][0]["message"]["tool_calls"] = [dict(calls[0], id=f"c{n}") for n in range(5000)]
    return answer


def usage_of(count):
    def shape(answer: dict) -> dict:
        answer["usage"].update(prompt_tokens=count, completion_tokens=count, total_tokens=count)
        return answer
    return shape


async def call_through(url: str, db: Path, **call) -> object:
    """One agent call on the openai dialect to `url` (real loopback HTTP), twice: the second from the cache."""
    settings = replace(load_settings(db=db, base_url=url, model="fake", backend="openai", env={}), repair_attempts=0,
                       tpm=call.pop("tpm", None))
    outcomes = []
    for _ in range(2):
        async with open_store(db) as store:
            llm = LLM(settings, store.calls)
            try:
                outcomes.append(await llm.call("agent", [{"role": "user", "content": "note this"}], **call))
            except (InvalidOutput, EndpointError) as exc:
                outcomes.append(exc)
            finally:
                await llm.aclose()
    return outcomes


# -- the cases ----------------------------------------------------------------------------------------
def echoed_key(tmp: Path) -> bool:
    fake = scripted_fake()
    fake.api_key, fake.echo_key = KEY, True
    db = tmp / "store" / "m.db"
    db.parent.mkdir()
    with serve(fake) as url:
        done = cli(["--db", str(db), "--base-url", url, "--model", "fake", *ROLLOUT, "--systems", "longctx_full"],
                   {"OPENAI_API_KEY": KEY})
    held = [p for p in db.parent.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    return done.returncode == 0 and not held and done.stderr.count("echoed the API key") == 1


def emitted_scripts_run_no_value(tmp: Path) -> bool:
    stubs = tmp / "stubs"
    stubs.mkdir()
    for name in ("sbatch", "kubectl", "memaudit"):
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)
    out = tmp / f"study {HOSTILE}"
    done = cli(["plan", "--bench", "sample", "--systems", "nomem", "--users", "1", "--tasks", "1", "--shards", "2",
                "--emit", "slurm", "--out", str(out), "--partition", f"gpu {HOSTILE}", "--base-url",
                "http://127.0.0.1:9/v1", "--model", HOSTILE])
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "STUB_LOG": str(tmp / "calls.log"), "MEMAUDIT_BIN": str(stubs / "memaudit"),
           "SLURM_ARRAY_TASK_ID": "1"}
    ran = [subprocess.run(["bash", str(out / name)], cwd=tmp, env=env, capture_output=True, timeout=60).returncode
           for name in ("submit.sh", "array.sbatch", "merge.sbatch")] if done.returncode == 0 else [1]
    return ran == [0, 0, 0] and no_marker(tmp)


def refused(option: str, value: str, engine: str = "slurm"):
    def case(tmp: Path) -> bool:
        out = tmp / "s"
        flags = {"--out": str(out), option: str(tmp / value) if option == "--out" else value}
        done = cli(["plan", "--bench", "sample", "--systems", "nomem", "--shards", "2", "--emit", engine,
                    *[part for pair in flags.items() for part in pair]])
        return one_line(done) and not out.exists()
    case.__name__ = f"{option} with a newline is one line ({engine})"
    return case


def deep_tool_arguments(tmp: Path) -> bool:
    with serve(Shaped(deep_arguments)) as url:
        live, cached = anyio.run(lambda: call_through(url, tmp / "m.db", tools=TOOLS))
    return isinstance(live, InvalidOutput) and isinstance(cached, InvalidOutput)


def parallel_tool_calls(tmp: Path) -> bool:
    with serve(Shaped(many_calls)) as url:
        live, _ = anyio.run(lambda: call_through(url, tmp / "m.db", tools=TOOLS))
    return len(live.tool_calls) == MAX_TOOL_CALLS and live.usage["tool_calls_dropped"] == 5000 - MAX_TOOL_CALLS


def named_tools_only(tmp: Path) -> bool:
    fake = FakeOpenAI()
    fake.tools_only_when_named = True

    async def probe(url):
        settings = load_settings(db=tmp / "m.db", base_url=url, model="fake", backend="openai", env={})
        async with open_store(settings.db) as store:
            llm = LLM(settings, store.calls)
            try:
                await llm.check_native_tools("agent")
            except EndpointError as exc:
                return "only when the request names it" in str(exc) and "\n" not in str(exc)
            finally:
                await llm.aclose()
        return False
    with serve(fake) as url:
        return anyio.run(probe, url)


def odd_usage(count, tpm=None):
    def case(tmp: Path) -> bool:
        with serve(Shaped(usage_of(count))) as url:
            live, cached = anyio.run(lambda: call_through(url, tmp / "m.db", tpm=tpm))
        return not isinstance(live, Exception) and live.usage["prompt_tokens"] == 0 and "unknown" in live.usage \
            and cached.usage == live.usage
    case.__name__ = f"usage {count!r}{' with --tpm' if tpm else ''} is unknown"
    return case


def usage_1e20_rollout(tpm: list[str]):
    def case(tmp: Path) -> bool:
        with serve(Shaped(usage_of(1e20))) as url:
            done = cli(["--db", str(tmp / "m.db"), "--base-url", url, "--model", "fake", *ROLLOUT, "--systems", "nomem",
                        *tpm])
        return done.returncode == 0 and "Traceback" not in done.stderr
    case.__name__ = f"rollout with usage 1e20{' and --tpm' if tpm else ''}: no traceback"
    return case


def tpm_below_one_request(tmp: Path) -> bool:
    with serve(scripted_fake()) as url:
        done = cli(["--db", str(tmp / "m.db"), "--base-url", url, "--model", "fake", *ROLLOUT, "--systems", "nomem",
                    "--tpm", "1"])
    return one_line(done, "--tpm")


def price_file(text: str, says: str):
    def case(tmp: Path) -> bool:
        path = tmp / "prices.toml"
        path.write_text(text)
        done = cli(["--db", str(tmp / "m.db"), "cost", "--prices", str(path)])
        return one_line(done, says) and "\x1b" not in done.stderr
    case.__name__ = f"price file: {says}"
    return case


def scheduler(env: dict, says: str):
    def case(tmp: Path) -> bool:
        scrubbed = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RANK", "WORLD_SIZE",
                                                                             "JOB_COMPLETION"))}
        done = subprocess.run([*CLI, "--db", str(tmp / "m.db"), *ROLLOUT, "--systems", "nomem", "--shard", "auto"],
                              capture_output=True, text=True, timeout=300, env={**scrubbed, **env})
        return one_line(done, says) and len(done.stderr) < 400
    case.__name__ = f"--shard auto with {', '.join(f'{k}={v[:8]!r}' for k, v in env.items())}"
    return case


def plan_tag(tmp: Path) -> bool:
    return one_line(cli(["--db", str(tmp / "m.db"), "plan", "--bench", "sample", "--systems", "nomem", "--tag", "../x"]),
                    "not a safe id")


PRICE = ("[models.m]\ninput_per_mtok = {v}\ncached_input_per_mtok = 1.0\noutput_per_mtok = 1.0\n"
         "batch_input_per_mtok = 1.0\nbatch_output_per_mtok = 1.0\n")
CASES = [
    echoed_key, emitted_scripts_run_no_value,
    refused("--partition", "gpu\ntouch PWNED"), refused("--out", "s\ntouch PWNED"),
    refused("--mount", "/study\ntouch PWNED", "k8s"), refused("--secret", "keys\nx", "k8s"),
    refused("--volume", "pvc\nx", "k8s"), deep_tool_arguments, parallel_tool_calls, named_tools_only,
    *(odd_usage(count) for count in (1e20, 2.0**64, 1e308, -5, "abc", 1.5)), odd_usage(-5, tpm=10**6),
    usage_1e20_rollout([]), usage_1e20_rollout(["--tpm", "1000000"]), tpm_below_one_request,
    price_file("x = " + "[" * 100_000 + "]" * 100_000, "nested too deeply"), price_file(PRICE.format(v="1e308"), "from 0"),
    price_file('date = "2026\\u001b[2J"\n', "printable"), price_file('source = "a\\nb"\n', "printable"),
    scheduler({"RANK": "1_0", "WORLD_SIZE": "16"}, "whole number"),
    scheduler({"RANK": "9" * 5000, "WORLD_SIZE": "16"}, "(5000 characters)"),
    scheduler({"SLURM_ARRAY_TASK_ID": "", "RANK": "0", "WORLD_SIZE": "2"}, "SLURM_ARRAY_TASK_ID is set"),
    plan_tag,
]


def main() -> None:
    held = 0
    for case in CASES:
        tmp = Path(tempfile.mkdtemp(prefix="memaudit-probe-"))
        start = time.perf_counter()
        try:
            ok = case(tmp)
        except Exception as exc:  # a case that crashed did not hold
            ok = False
            print(f"  ({type(exc).__name__}: {str(exc)[:200]})")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        held += ok
        name = case.__name__ if " " in case.__name__ else case.__name__.replace("_", " ")
        print(f"{'held  ' if ok else 'FAILED'} {time.perf_counter() - start:6.1f} s  {name}", flush=True)
    print(f"cases tried: {len(CASES)}, held: {held}")
    sys.exit(0 if held == len(CASES) else 1)


if __name__ == "__main__":
    main()
