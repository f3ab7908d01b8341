"""The published prompt pack: `memaudit prompts import-published SRC --out DIR`.

memaudit's own prompts follow the published runner's rules in our words. A user who needs the
published measurement itself builds this pack from their own checkout of the published code
(sora1998/MemProbe): the prompt constants are read from its source files with `ast` (nothing of it
is executed), checked for the placeholders memaudit fills, and written as verbatim prompt files
under the names memaudit's roles load, so `--prompts DIR` sends the published request text. The
category guides become `category_guides.json` (slot-fill definitions and the retrieve query). The
assistant, simulator and preference-judge requests, which the published code assembles in
functions, are read the same way by memaudit/published/rollout.py (prompt files plus
`rollout_layout.json`), and so are A-Mem's own memory-side requests from the A-mem-sys the checkout
vendors (memaudit/published/amem.py). Every other prompt file of memaudit is copied in unchanged, so the directory
serves every command. `pack.json` records the commit and each source file's sha256. memaudit never
ships the text.
"""
from __future__ import annotations

import ast
import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memaudit.canonical import canonical_pretty, dumps_indented
from memaudit.config import PROMPTS_DIR
from memaudit.errors import BadInput
from memaudit.prompts import GUIDES_FILE, LAYOUT_FILE, PACK_FILE
from memaudit.published.amem import build as build_amem
from memaudit.published.code import Shape, assigned_names, format_template, module_statements
from memaudit.published.rollout import Reader, build as build_rollout
from memaudit.roles import DISCLOSURE, ELICITATION, ORACLE, RECOVERY_JUDGE, SLOT_FILL
from memaudit.types import CATEGORIES
from memaudit.userfiles import read_regular

ATTRIBUTION = "failure_attribution.py"
# The published source files are tens of kB; anything far larger is not one of them.
MAX_SOURCE_BYTES = 2 * 1024 * 1024
# A checkout copied without `.git` names its commit in this file (its first line).
COMMIT_FILE = "COMMIT"
COMMIT_ID = re.compile(r"[0-9a-f]{7,40}")
MAX_COMMIT_BYTES = 1024
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
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise BadInput("not a directory: give a checkout of the published code", file=str(src))
    checkout = Checkout(src)
    files = {s.prompt: Piece(s.prompt, f"{s.file} {s.constant}", "", _converted(checkout, s)) for s in SOURCES}
    guides = _guides(checkout)
    reader = Reader(checkout.tree, checkout.constant, str(src))
    rollout, layout, published = build_rollout(reader)
    amem, layout["amem"], amem_published = build_amem(reader)
    published |= amem_published
    files |= {name: Piece(role, where, system, user) for name, (role, where, system, user)
              in (rollout | amem).items()}
    manifest = {"pack": "published", "repository": PUBLISHED_REPO, "commit": _commit(src),
                "source_files": dict(sorted(checkout.sha256.items())),
                "published": {s.prompt: f"{s.file} {s.constant}" for s in SOURCES} | published | {
                    GUIDES_FILE.removesuffix(".json"): f"{GUIDES[0]} {GUIDES[1]}"}}
    _check_out(out)
    try:
        _install(out, lambda partial: _write(partial, files, checkout.sha256, guides, layout, manifest))
    except OSError as exc:
        raise BadInput(f"cannot write the pack there ({exc.strerror or exc})", file=str(out)) from None
    return manifest


def _check_out(out: Path) -> None:
    """`--out` must be a new or empty directory, never a link (the pack would land where it leads)."""
    if out.is_symlink():
        raise BadInput("output directory is a symlink; refused: give a new or empty directory", file=str(out))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BadInput("output directory exists and is not empty", file=str(out))


def _install(out: Path, write) -> None:
    """Written beside the target and renamed into place: never a half-written pack."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        write(partial)
        if out.exists():
            out.rmdir()
        partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


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
    # Keys in their native order: a response format's schema is sent as read (strict structured
    # output writes an answer's fields in the schema's order).
    (out / LAYOUT_FILE).write_text(dumps_indented(layout))
    (out / PACK_FILE).write_bytes(canonical_pretty(manifest))


# -- reading the checkout ----------------------------------------------------------------------
class Checkout:
    """The user's checkout, read with `ast` only; every file read has its sha256 recorded. A file is
    read only when it is a regular file inside the checkout and at most MAX_SOURCE_BYTES long
    (memaudit/userfiles.py): a link out of the checkout, a FIFO or a device is refused."""

    def __init__(self, root: Path):
        self.root = root
        self.sha256: dict[str, str] = {}
        self._trees: dict[str, ast.Module] = {}

    def tree(self, file: str) -> ast.Module:
        if file not in self._trees:
            path = self.root / file
            if not path.exists() and not path.is_symlink():
                raise BadInput("missing from the checkout", file=str(path))
            data = read_regular(path, limit=MAX_SOURCE_BYTES, root=self.root)
            self.sha256[file] = hashlib.sha256(data).hexdigest()
            try:
                self._trees[file] = ast.parse(data, filename=str(path))
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # ValueError: a NUL byte
                raise BadInput(f"not Python source: {getattr(exc, 'msg', exc)}", file=str(path)) from None
        return self._trees[file]

    def constant(self, file: str, name: str):
        """The value of the module-level literal `name = …` (or `name: type = …`) in `file`. A name
        assigned more than once is refused: Python keeps the last value, and which one the published
        code meant is not the pack's to guess."""
        path = str(self.root / file)
        found = [node for node in module_statements(self.tree(file)) if name in assigned_names(node)]
        if not found:
            raise BadInput(f"no constant {name}", file=path, field=name)
        if len(found) > 1:
            lines = ", ".join(str(node.lineno) for node in found)
            raise BadInput(f"{name} is assigned more than once (lines {lines}); refused", file=path, field=name)
        node = found[0]
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not all(isinstance(t, ast.Name) for t in targets):
            raise BadInput(f"{name} is not assigned a literal on its own", file=path, field=name)
        try:
            return ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise BadInput(f"{name} is not a literal", file=path, field=name) from None


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
    """The checkout's commit: from git when it is a git work tree of its own (git on PATH), else
    from its `COMMIT` file (a checkout copied without `.git`: the commit id on its first line); else
    None."""
    if (src / ".git").exists():
        try:
            done = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                                  check=False)
        except OSError:
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    path = src / COMMIT_FILE
    if not path.exists() and not path.is_symlink():
        return None
    lines = read_regular(path, limit=MAX_COMMIT_BYTES, root=src).decode(errors="replace").splitlines()
    commit = lines[0].strip().lower() if lines else ""
    if not COMMIT_ID.fullmatch(commit):
        raise BadInput("the first line is not a commit id (7 to 40 hex digits)", file=str(path))
    return commit


def _prompt_file(piece: Piece, file_sha: str) -> str:
    """A verbatim prompt file: byte for byte the templates (memaudit/prompts.py); a system section
    only where the published request had a system message."""
    header = (f"---\nrole: {piece.role}\nsource: {PUBLISHED_REPO} {piece.where} (sha256 {file_sha})\n"
              f"verbatim: true\n---\n")
    system = f"## system\n{piece.system}\n" if piece.system else ""
    return f"{header}{system}## user\n{piece.user}"
