"""Prompt files: `prompts/<name>.md`.

Each file starts with a header between `---` lines (role, inputs, output schema: documentation for
people) followed by `## system` and `## user` sections. Placeholders are `{{name}}`; a missing
value is an error, never an empty string. `--prompts DIR` swaps in another directory (e.g. a
paraphrase for robustness checks); runs record the sha256 of every prompt they used."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from memaudit.errors import BadInput

PLACEHOLDER = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
SECTION = re.compile(r"^## (system|user)\s*$", re.M)


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
            messages.append({"role": "system", "content": self._fill(self.system, values)})
        messages.append({"role": "user", "content": self._fill(self.user, values)})
        return messages

    def _fill(self, template: str, values: dict) -> str:
        def sub(match: re.Match) -> str:
            name = match.group(1)
            if name not in values:
                raise BadInput(f"prompt needs a value for {{{{{name}}}}}", file=str(self.path), field=name)
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
    parts = SECTION.split(text)
    sections = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}
    if "user" not in sections:
        raise BadInput("prompt has no '## user' section", file=str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Prompt(name, path, header, sections.get("system", ""), sections["user"], digest)


def prompt_hashes(names, prompts_dir: Path) -> dict[str, str]:
    return {n: load_prompt(n, Path(prompts_dir)).sha256 for n in sorted(names)}
