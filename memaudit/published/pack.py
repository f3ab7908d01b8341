"""The published prompt pack: `memaudit prompts import-published SRC --out DIR`.

memaudit's own prompts follow the published runner's rules in our words. A user who needs the
published measurement itself builds this pack from their own checkout of the published code
(sora1998/MemProbe): the prompt constants are read from its source files with `ast` (nothing of it
is executed), checked for the placeholders memaudit fills, and written as verbatim prompt files
under the names memaudit's roles load, so `--prompts DIR` sends the published request text. The
category guides become `category_guides.json` (slot-fill definitions and the retrieve query). The
assistant, simulator and preference-judge requests, which the published code assembles in
functions, are read the same way by memaudit/published/rollout.py (prompt files plus
`rollout_layout.json`). Every other prompt file of memaudit is copied in unchanged, so the directory
serves every command. `pack.json` records the commit and each source file's sha256. memaudit never
ships the text.
"""
from __future__ import annotations

import ast
import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memaudit.canonical import canonical_pretty
from memaudit.config import PROMPTS_DIR
from memaudit.errors import BadInput
from memaudit.prompts import GUIDES_FILE, LAYOUT_FILE, PACK_FILE
from memaudit.published.code import Shape, format_template
from memaudit.published.rollout import Reader, build as build_rollout
from memaudit.roles import DISCLOSURE, ELICITATION, ORACLE, RECOVERY_JUDGE, SLOT_FILL
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
    Source(SLOT_FILL, "scorer.py", "_SLOT_FILL_PROMPT",
           {"memories_json": "memory", "category": "category", "category_guide": "definition",
            "dimension": "dimension"}),
    Source(RECOVERY_JUDGE, "scorer.py", "_SLOT_JUDGE_PROMPT",
           {"dimension": "dimension", "explanation": "explanation", "ground_truth": "ground_truth",
            "predicted": "prediction"}),
    Source(ORACLE, ATTRIBUTION, "_ORACLE_PROMPT", STAGE_VALUES),
    Source(DISCLOSURE, ATTRIBUTION, "_DISCLOSURE_PROMPT", {**STAGE_VALUES, "transcript": "transcript"}),
    Source(ELICITATION, ATTRIBUTION, "_SUBCLASS_PROMPT", {**STAGE_VALUES, "transcript": "transcript"}),
)
GUIDES = ("scorer.py", "_CATEGORY_GUIDE")


def import_published(src: Path, out: Path) -> dict:
    """Build the pack in `out` (created; must not hold a pack already) from the checkout `src`;
    returns the manifest written to `out/pack.json`. Nothing is written unless every check passes."""
    src = Path(src)
    if not src.is_dir():
        raise BadInput("not a directory: give a checkout of the published code", file=str(src))
    checkout = Checkout(src)
    files = {s.prompt: Piece(s.prompt, f"{s.file} {s.constant}", "", _converted(checkout, s)) for s in SOURCES}
    guides = _guides(checkout)
    rollout, layout, published = build_rollout(Reader(checkout.tree, checkout.constant, str(src)))
    files |= {name: Piece(role, where, system, user) for name, (role, where, system, user) in rollout.items()}
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInput("output directory exists and is not empty", file=str(out))
    manifest = {"pack": "published", "repository": PUBLISHED_REPO, "commit": _commit(src),
                "source_files": dict(sorted(checkout.sha256.items())),
                "published": {s.prompt: f"{s.file} {s.constant}" for s in SOURCES} | published | {
                    GUIDES_FILE.removesuffix(".json"): f"{GUIDES[0]} {GUIDES[1]}"}}
    # Written beside the target and renamed into place: never a half-written pack.
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _write(partial, files, checkout.sha256, guides, layout, manifest)
        if out.exists():
            out.rmdir()
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return manifest


@dataclass(frozen=True)
class Piece:
    """One prompt file of the pack: the role it serves, where its text was read, the templates."""
    role: str
    where: str    # "<file> <constant or function>, …": the first word is the source file
    system: str
    user: str


def _write(out: Path, files: dict[str, Piece], sha256: dict, guides: dict, layout: dict, manifest: dict) -> None:
    for bundled in sorted(PROMPTS_DIR.glob("*.md")):
        if bundled.stem not in files:
            shutil.copyfile(bundled, out / bundled.name)
    for name, piece in files.items():
        (out / f"{name}.md").write_text(_prompt_file(piece, sha256[piece.where.split()[0]]))
    (out / GUIDES_FILE).write_bytes(canonical_pretty(guides))
    (out / LAYOUT_FILE).write_bytes(canonical_pretty(layout))
    (out / PACK_FILE).write_bytes(canonical_pretty(manifest))


# -- reading the checkout ----------------------------------------------------------------------
class Checkout:
    """The user's checkout, read with `ast` only; every file read has its sha256 recorded."""

    def __init__(self, root: Path):
        self.root = root
        self.sha256: dict[str, str] = {}
        self._trees: dict[str, ast.Module] = {}

    def tree(self, file: str) -> ast.Module:
        if file not in self._trees:
            path = self.root / file
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise BadInput("missing from the checkout", file=str(path)) from None
            self.sha256[file] = hashlib.sha256(data).hexdigest()
            try:
                self._trees[file] = ast.parse(data, filename=str(path))
            except SyntaxError as exc:
                raise BadInput(f"not Python source: {exc.msg}", file=str(path)) from None
        return self._trees[file]

    def constant(self, file: str, name: str):
        """The value of the module-level literal `name = …` in `file`."""
        path = str(self.root / file)
        for node in self.tree(file).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                try:
                    return ast.literal_eval(node.value)
                except ValueError:
                    raise BadInput(f"{name} is not a literal", file=path, field=name) from None
        raise BadInput(f"no constant {name}", file=path, field=name)


def _converted(checkout: Checkout, source: Source) -> str:
    """The template in memaudit's syntax (memaudit/published/code.py `format_template`), checked."""
    where = {"file": str(checkout.root / source.file), "field": source.constant}
    template = checkout.constant(source.file, source.constant)
    if not isinstance(template, str):
        raise BadInput(f"{source.constant} is not a string", **where)
    try:
        return format_template(template, source.placeholders)
    except Shape as exc:
        raise BadInput(f"{source.constant} {exc}", **where) from None


def _guides(checkout: Checkout) -> dict:
    file, name = GUIDES
    guides = checkout.constant(file, name)
    if not isinstance(guides, dict) or sorted(guides) != sorted(CATEGORIES) or \
            not all(isinstance(v, str) and v for v in guides.values()):
        raise BadInput(f"{name} must map the five categories to their guides", file=str(checkout.root / file),
                       field=name)
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


def _prompt_file(piece: Piece, file_sha: str) -> str:
    """A verbatim prompt file: byte for byte the templates (memaudit/prompts.py); a system section
    only where the published request had a system message."""
    header = (f"---\nrole: {piece.role}\nsource: {PUBLISHED_REPO} {piece.where} (sha256 {file_sha})\n"
              f"verbatim: true\n---\n")
    system = f"## system\n{piece.system}\n" if piece.system else ""
    return f"{header}{system}## user\n{piece.user}"
