"""Prompt files: `prompts/<name>.md`.

Each file starts with a header between `---` lines (role, inputs, output schema: documentation for
people) followed by `## system` and `## user` sections. Placeholders are `{{name}}`; a missing
value is an error, never an empty string. `--prompts DIR` swaps in another directory (e.g. a
paraphrase for robustness checks, or the published pack: memaudit/published/pack.py); runs record
the sha256 of every prompt they used, and the directory's identity (`prompt_pack`).

A header line `verbatim: true` marks a file whose sections are taken byte for byte (no stripping):
the published pack's templates, which must reach the model exactly as the published code sent them.
A directory may also hold `category_guides.json` (the category definitions the slot-fill reader and
the retrieve query use; default: the pool's), `pack.json` (where the pack came from) and
`rollout_layout.json` (the pieces the published assistant, simulator and preference-judge requests
are assembled from: memaudit/published/layout.py)."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from memaudit.config import PROMPTS_DIR
from memaudit.errors import BadInput
from memaudit.types import CATEGORY_DEFINITIONS

PLACEHOLDER = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
SECTION = re.compile(r"^## (system|user)\s*$", re.M)
VERBATIM_SECTIONS = ("## system", "## user")
GUIDES_FILE = "category_guides.json"
PACK_FILE = "pack.json"
LAYOUT_FILE = "rollout_layout.json"


@dataclass(frozen=True)
class Prompt:
    name: str
    path: Path
    header: str
    system: str
    user: str
    sha256: str

    def render(self, **values) -> list[dict]:
        """Messages for the chat API: a system message (static per prompt, so servers can cache it)
        and a user message with the values filled in."""
        messages = []
        if self.system:
            messages.append({"role": "system", "content": fill(self.system, values, str(self.path))})
        messages.append({"role": "user", "content": fill(self.user, values, str(self.path))})
        return messages


def fill(template: str, values: dict, where: str = "prompt template") -> str:
    """`{{name}}` -> str(values[name]), in one pass (a value is never read as a template); a missing
    value is an error naming the template's file, never an empty string."""
    def sub(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise BadInput(f"prompt needs a value for {{{{{name}}}}}", file=where, field=name)
        return str(values[name])
    return PLACEHOLDER.sub(sub, template)


@lru_cache(maxsize=None)
def load_prompt(name: str, prompts_dir: Path) -> Prompt:
    path = Path(prompts_dir) / f"{name}.md"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise BadInput(f"prompt file not found for {name}", file=str(path)) from None
    header = ""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end < 0:
            raise BadInput("unterminated header", file=str(path))
        header, text = text[3:end].strip(), text[end + 4:]
    sections = _verbatim_sections(text, path) if "verbatim: true" in header.splitlines() else _sections(text)
    if "user" not in sections:
        raise BadInput("prompt has no '## user' section", file=str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Prompt(name, path, header, sections.get("system", ""), sections["user"], digest)


def _sections(text: str) -> dict[str, str]:
    parts = SECTION.split(text)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def _verbatim_sections(text: str, path: Path) -> dict[str, str]:
    """`## system` (optional) and `## user`, each line once, the text after each taken exactly."""
    body = text[1:] if text.startswith("\n") else text
    system = ""
    if body.startswith("## system\n"):
        system, sep, body = body[len("## system\n"):].partition("\n## user\n")
        if not sep:
            raise BadInput("verbatim prompt has no '## user' section", file=str(path))
    elif body.startswith("## user\n"):
        body = body[len("## user\n"):]
    else:
        raise BadInput("verbatim prompt must start with '## system' or '## user'", file=str(path))
    return {"system": system, "user": body}


@lru_cache(maxsize=None)
def category_guides(prompts_dir: Path) -> dict[str, str]:
    """category -> the definition shown to the slot-fill reader and appended to the retrieve query."""
    path = Path(prompts_dir) / GUIDES_FILE
    if not path.exists():
        return dict(CATEGORY_DEFINITIONS)
    try:
        guides = json.loads(path.read_text())
    except ValueError as exc:
        raise BadInput(f"not JSON: {exc}", file=str(path)) from None
    missing = [c for c in CATEGORY_DEFINITIONS if not isinstance(guides.get(c), str)]
    if missing:
        raise BadInput("no guide for this category", file=str(path), field=missing[0])
    return {c: guides[c] for c in CATEGORY_DEFINITIONS}


def is_published_pack(prompts_dir: Path) -> bool:
    """A directory built by `memaudit prompts import-published` (it holds the pack's manifest)."""
    return (Path(prompts_dir) / PACK_FILE).exists()


@lru_cache(maxsize=None)
def rollout_layout(prompts_dir: Path) -> dict | None:
    """The directory's `rollout_layout.json` (a published pack's request layout:
    memaudit/published/layout.py, and A-Mem's requests: adapters/amem.py), or None."""
    path = Path(prompts_dir) / LAYOUT_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise BadInput(f"not JSON: {exc}", file=str(path)) from None


@lru_cache(maxsize=None)
def prompt_pack(prompts_dir: Path) -> dict:
    """The identity of a prompt directory: {name, hash}. The name is `bundled` for memaudit's own
    prompts, `published-<commit>` for a published pack, else the directory's name; the hash covers
    every prompt file, the guides and the manifest, so two directories that send the same text agree."""
    prompts_dir = Path(prompts_dir)
    digest = hashlib.sha256()
    for path in sorted([*prompts_dir.glob("*.md"), *prompts_dir.glob("*.json")]):
        digest.update(f"{path.name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    if is_published_pack(prompts_dir):
        commit = json.loads((prompts_dir / PACK_FILE).read_text()).get("commit") or "unknown"
        name = f"published-{commit[:7]}"
    else:
        name = "bundled" if prompts_dir.resolve() == PROMPTS_DIR.resolve() else prompts_dir.name
    return {"name": name, "hash": f"sha256:{digest.hexdigest()}"}


def prompt_hashes(names, prompts_dir: Path) -> dict[str, str]:
    return {n: load_prompt(n, Path(prompts_dir)).sha256 for n in sorted(names)}
