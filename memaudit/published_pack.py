"""The published prompt pack: `memaudit prompts import-published SRC --out DIR`.

memaudit's own prompts follow the published runner's rules in our words. A user who needs the
published measurement itself builds this pack from their own checkout of the published code
(sora1998/MemProbe): the prompt constants are read from its source files with `ast` (nothing of it
is executed), checked for the placeholders memaudit fills, and written as verbatim prompt files
under the names memaudit's roles load, so `--prompts DIR` sends the published request text. The
category guides become `category_guides.json` (slot-fill definitions and the retrieve query). Every
other prompt file of memaudit is copied in unchanged, so the directory serves every command.
`pack.json` records the commit and each source file's sha256. memaudit never ships the text.
"""
from __future__ import annotations

import ast
import hashlib
import shutil
import string
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memaudit.canonical import canonical_pretty
from memaudit.config import PROMPTS_DIR
from memaudit.errors import BadInput
from memaudit.prompts import GUIDES_FILE, PACK_FILE, PLACEHOLDER, VERBATIM_SECTIONS
from memaudit.types import CATEGORIES

ATTRIBUTION = "failure_attribution.py"
PUBLISHED_REPO = "sora1998/MemProbe"
STAGE_VALUES = {"dimension": "dimension", "gt_short": "ground_truth", "gt_explanation": "explanation",
                "task_text": "task"}


@dataclass(frozen=True)
class Source:
    """One published prompt: the constant holding it and what each of its placeholders means here."""
    prompt: str            # memaudit's prompt file name (= the role's prompt)
    file: str              # path inside the checkout
    constant: str
    placeholders: dict     # published placeholder -> memaudit value name


SOURCES = (
    Source("slot_fill", "scorer.py", "_SLOT_FILL_PROMPT",
           {"memories_json": "memory", "category": "category", "category_guide": "definition",
            "dimension": "dimension"}),
    Source("recovery_judge", "scorer.py", "_SLOT_JUDGE_PROMPT",
           {"dimension": "dimension", "explanation": "explanation", "ground_truth": "ground_truth",
            "predicted": "prediction"}),
    Source("oracle", ATTRIBUTION, "_ORACLE_PROMPT", STAGE_VALUES),
    Source("disclosure", ATTRIBUTION, "_DISCLOSURE_PROMPT", {**STAGE_VALUES, "transcript": "transcript"}),
    Source("elicitation", ATTRIBUTION, "_SUBCLASS_PROMPT", {**STAGE_VALUES, "transcript": "transcript"}),
)
GUIDES = ("scorer.py", "_CATEGORY_GUIDE")


def import_published(src: Path, out: Path) -> dict:
    """Build the pack in `out` (created; must not hold a pack already) from the checkout `src`;
    returns the manifest written to `out/pack.json`. Nothing is written unless every check passes."""
    src = Path(src)
    if not src.is_dir():
        raise BadInput("not a directory: give a checkout of the published code", file=str(src))
    files: dict[str, str] = {}
    texts = {s.prompt: _converted(src, s, files) for s in SOURCES}
    guides = _guides(src, files)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInput("output directory exists and is not empty", file=str(out))
    manifest = {"pack": "published", "repository": PUBLISHED_REPO, "commit": _commit(src),
                "source_files": dict(sorted(files.items())),
                "published": {s.prompt: f"{s.file} {s.constant}" for s in SOURCES} | {
                    GUIDES_FILE.removesuffix(".json"): f"{GUIDES[0]} {GUIDES[1]}"}}
    # Written beside the target and renamed into place: never a half-written pack.
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _write(partial, texts, files, guides, manifest)
        if out.exists():
            out.rmdir()
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return manifest


def _write(out: Path, texts: dict, files: dict, guides: dict, manifest: dict) -> None:
    for bundled in sorted(PROMPTS_DIR.glob("*.md")):
        if bundled.stem not in texts:
            shutil.copyfile(bundled, out / bundled.name)
    for source in SOURCES:
        (out / f"{source.prompt}.md").write_text(_prompt_file(source, files[source.file], texts[source.prompt]))
    (out / GUIDES_FILE).write_bytes(canonical_pretty(guides))
    (out / PACK_FILE).write_bytes(canonical_pretty(manifest))


# -- reading the checkout ----------------------------------------------------------------------
def _constant(src: Path, file: str, name: str, files: dict):
    path = src / file
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"missing from the checkout (needed for {name})", file=str(path)) from None
    files[file] = hashlib.sha256(data).hexdigest()
    try:
        tree = ast.parse(data, filename=str(path))
    except SyntaxError as exc:
        raise BadInput(f"not Python source: {exc.msg}", file=str(path)) from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                raise BadInput(f"{name} is not a literal", file=str(path), field=name) from None
    raise BadInput(f"no constant {name}", file=str(path), field=name)


def _converted(src: Path, source: Source, files: dict) -> str:
    """The template in memaudit's syntax: `{x}` -> `{{value}}`, `{{`/`}}` -> `{`/`}`, checked."""
    where = {"file": str(src / source.file), "field": source.constant}
    template = _constant(src, source.file, source.constant, files)
    if not isinstance(template, str):
        raise BadInput(f"{source.constant} is not a string", **where)
    parts, seen = [], set()
    for literal, name, spec, conversion in string.Formatter().parse(template):
        if PLACEHOLDER.search(literal) or any(line in VERBATIM_SECTIONS for line in literal.split("\n")):
            raise BadInput(f"{source.constant} holds text memaudit's prompt files cannot carry verbatim", **where)
        parts.append(literal)
        if name is None:
            continue
        if name not in source.placeholders or spec or conversion:
            raise BadInput(f"{source.constant} has an unexpected placeholder {{{name}}}", **where)
        seen.add(name)
        parts.append(f"{{{{{source.placeholders[name]}}}}}")
    missing = sorted(set(source.placeholders) - seen)
    if missing:
        raise BadInput(f"{source.constant} lacks the placeholder {{{missing[0]}}}", **where)
    return "".join(parts)


def _guides(src: Path, files: dict) -> dict:
    file, name = GUIDES
    guides = _constant(src, file, name, files)
    if not isinstance(guides, dict) or sorted(guides) != sorted(CATEGORIES) or \
            not all(isinstance(v, str) and v for v in guides.values()):
        raise BadInput(f"{name} must map the five categories to their guides", file=str(src / file), field=name)
    return {category: guides[category] for category in CATEGORIES}


def _commit(src: Path) -> str | None:
    """The checkout's commit, when it is a git work tree (git on PATH); else None."""
    try:
        done = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=False)
    except OSError:
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def _prompt_file(source: Source, file_sha: str, text: str) -> str:
    """A verbatim prompt file: one user message, byte for byte the template (memaudit/prompts.py)."""
    header = (f"---\nrole: {source.prompt}\nsource: {PUBLISHED_REPO} {source.file} {source.constant} "
              f"(sha256 {file_sha})\nverbatim: true\n---\n")
    return f"{header}## user\n{text}"
