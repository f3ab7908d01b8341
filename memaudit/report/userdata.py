"""The report's per-user drill-down as data: one compressed file per user holding everything the
user's pages show (bank, tasks, transcripts, final memories, every read, prediction, judge verdict
and attribution stage), rendered in the browser by one shared page (`user.html`, assets/user.js).

Why data and not pages: a user's pages repeated the same transcripts, memory items and markup
across ~40 files (3.7 MiB per user); the data says each thing once and compresses well. The file
is a script (`memauditData(key, "gzipped JSON")`) because a page opened from disk (file://) may
load scripts but not fetch files. The gzip bytes sit in the string literal as they are, read as
windows-1252 (the page loads the script with that charset: every byte is one character), with
only `\\`, `"`, LF and CR escaped: base64 cost a third more bytes. Output is deterministic (gzip
without a time)."""
from __future__ import annotations

import functools
import gzip
import re
from urllib.parse import quote

import orjson

from memaudit.report.html import slug

APP = "user.html"
DATA_DIR = "data"
MEMORY_REF = "$m"
# A user's data (about 1 MB of transcripts and memories) compresses to about a third: level 4
# (lazy matching) took no longer than level 1 for a tenth fewer bytes; level 6 saved another tenth
# for four times the time.
LEVEL = 4
# Which users' data files a static report holds (`view --user-data`): "all", "none" or "auto" (all
# when the report covers at most AUTO_USER_RUNS user-runs); `view --serve` builds it with "served"
# (none on disk: report/serve.py answers them). On the published release a user-run's data is about 0.14 MiB compressed and takes longer to
# write than its share of the tables, so 100 user-runs (20 users of 5 systems) is ~14 MiB; a larger
# study's static report holds the tables and pages, and its drill-down is served or asked for.
USER_DATA = ("auto", "all", "none")
AUTO_USER_RUNS = 100
CHARSET = "windows-1252"  # one character per byte: what the page reads the data file's bytes as
_ESCAPES = ((b"\\", b"\\\\"), (b'"', b'\\"'), (b"\n", b"\\n"), (b"\r", b"\\r"))
_UNESCAPE = {b"\\": b"\\", b'"': b'"', b"n": b"\n", b"r": b"\r"}


def data_key(bench: str, user: str) -> str:
    return f"{slug(bench)}/{slug(user)}"


def data_file(bench: str, user: str) -> str:
    return f"{DATA_DIR}/{data_key(bench, user)}.js"


def app_anchor(bench: str, user: str, view: str = "grid", *, dimension: str | None = None, run: str | None = None,
               anchor: str | None = None) -> str:
    """The fragment of `user.html` that opens one view of a user's drill-down."""
    params = (("f", data_key(bench, user)), ("v", view), ("d", dimension), ("r", run), ("a", anchor))
    return "&".join(f"{k}={_quoted(v)}" for k, v in params if v is not None)


@functools.lru_cache(maxsize=65536)
def _quoted(value: str) -> str:
    """A fragment value as URLSearchParams reads it back (report links repeat the same few values)."""
    return quote(value, safe="/")


def encode(bench: str, user: str, payload: dict) -> bytes:
    """The data file's bytes: a call the shared page answers, with the payload gzipped into a string."""
    packed = gzip.compress(orjson.dumps(payload), compresslevel=LEVEL, mtime=0)
    for raw, escaped in _ESCAPES:
        packed = packed.replace(raw, escaped)
    return b"memauditData(" + orjson.dumps(data_key(bench, user)) + b',"' + packed + b'");\n'


def decode(data: bytes) -> dict:
    """The payload of a data file (for tests and tools)."""
    start = data.index(b',"') + 2
    packed = re.sub(rb"\\(.)", lambda m: _UNESCAPE[m.group(1)], data[start:data.rindex(b'");')], flags=re.S)
    return orjson.loads(gzip.decompress(packed))


def payload(user: dict, runs: list[dict], passes: dict, detail: dict, snapshots: dict, citations,
            sections: dict) -> dict:
    """Everything the user's views show. `passes`: run -> [pass dicts with the user's B per category];
    `detail`: data.load_user_detail; `snapshots`: run -> final snapshot or None; `citations(row)`: what
    an attribution's stages point at in the transcript; `sections`: view -> dimension -> HTML that
    other report parts render for that view of one target (the history of an evolving entry)."""
    memories = {run["run"]: _MemoryIndex((snapshots.get(run["run"]) or {}).get("items") or []) for run in runs}
    shorts = {e["dimension"]: e["short"] for e in user["bank"]}
    return {
        "user": user["user_id"], "persona": user["persona"],
        "bank": [{k: e[k] for k in ("category", "dimension", "short", "explanation")} for e in user["bank"]],
        "tasks": [{"idx": t["idx"], "text": t["text"], "dimension": t["target_dimension"], "rationale": t["rationale"]}
                  for t in user["tasks"]],
        "runs": [_run(run, passes.get(run["run"], []), detail, snapshots.get(run["run"])) for run in runs],
        "recons": {dim: [_recon(r, detail, memories.get(r["run"]), citations, shorts.get(dim)) for r in rows]
                   for dim, rows in sorted(detail["recons"].items())},
        "sections": {view: html for view, html in sections.items() if html},
    }


def _run(run: dict, passes: list[dict], detail: dict, snapshot: dict | None) -> dict:
    episodes = [{"idx": idx, "task": ep["task"], "end": ep["end_reason"], "n_turns": ep["n_turns"],
                 "error": ep["error"],
                 "turns": [[t["turn"], t["assistant"], t["feedback_type"], t["user_text"], t["preference_score"],
                            t["fallback"]] for t in ep["turns"]]}
                for (name, idx), ep in sorted(detail["episodes"].items()) if name == run["run"]]
    memory = None if snapshot is None else {k: snapshot[k] for k in ("task_idx", "n_items", "avg_chars", "items")}
    return {"run": run["run"], "system": run["system"], "slug": slug(run["run"]), "passes": passes,
            "episodes": episodes, "memory": memory}


def _recon(r: dict, detail: dict, memory: "_MemoryIndex | None", citations, short: str | None) -> dict:
    """One reading of a target; `truth` only where the run's truth is not the bank's current value
    (an evolving entry of a run that stopped before its last change)."""
    attribution = detail["attributions"].get((r["run"], r["mode"], r["k"], r["dimension"]))
    evidence = dict(r["evidence"] or {})
    if isinstance(evidence.get("items"), list) and memory is not None:
        evidence["items"] = [memory.referenced(item) for item in evidence["items"]]
    out = {k: r[k] for k in ("run", "mode", "k", "status", "error", "label", "reason", "score", "judge_reason")}
    if r["ground_truth"] != short:
        out["truth"] = r["ground_truth"]
    out["evidence"] = evidence
    if attribution is not None:
        out["attribution"] = {k: attribution[k] for k in ("label", "ep_index", "note", "stages")}
        out["cites"] = citations(attribution)
    return out


class _MemoryIndex:
    """A run's final store, to write a retrieved item found in it (by content) as a reference."""

    def __init__(self, items: list):
        self.items = items
        self.where: dict[str, int] = {}
        for i, item in enumerate(items):
            if isinstance(item, dict) and isinstance(item.get("content"), str):
                self.where.setdefault(item["content"], i)

    def referenced(self, item):
        content = item.get("content") if isinstance(item, dict) else None
        i = self.where.get(content) if isinstance(content, str) else None
        if i is None or not set(self.items[i]) <= set(item):  # a reference may add fields, never drop them
            return item
        stored = self.items[i]
        return {MEMORY_REF: i, **{k: v for k, v in item.items() if k not in stored or stored[k] != v}}
