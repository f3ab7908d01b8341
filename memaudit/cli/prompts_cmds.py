"""Commands: prompts import-published, prompts list — the published prompt pack, and which prompt
file each role uses."""
from __future__ import annotations

import hashlib
from pathlib import Path

import click

from memaudit.cli.common import Group, current_settings, global_options


@click.group("prompts", cls=Group)
def prompts():
    """Prompt directories: build the published pack; list the prompts in effect."""


@prompts.command("import-published")
@click.argument("src", type=click.Path(path_type=Path, file_okay=False))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="the prompt directory to write (new or empty); use it with --prompts")
def import_published_cmd(src, out_dir):
    """Build a prompt directory from a checkout of the published code (sora1998/MemProbe): its
    assistant (per memory system), simulator, preference-judge, scorer and attribution prompts and
    category guides, byte for byte; memaudit's own prompts for every other role."""
    from memaudit.published.pack import import_published
    from memaudit.prompts import prompt_pack

    manifest = import_published(src, out_dir)
    pack = prompt_pack(out_dir)
    click.echo(f"wrote {out_dir}: {pack['name']} {pack['hash']} (commit {manifest['commit'] or 'unknown'}; "
               f"{len(manifest['published'])} items from {', '.join(manifest['source_files'])})")


@prompts.command("list")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
@global_options(uses=("prompts_dir",))
def list_cmd(as_json):
    """Per prompt file of the directory in effect (--prompts, else memaudit's own): the role it
    serves, its sha256, and where its text comes from (memaudit, or the published source)."""
    import orjson

    from memaudit.prompts import GUIDES_FILE, LAYOUT_FILE, is_published_pack, load_prompt, prompt_pack

    prompts_dir = current_settings().prompts_dir
    pack = prompt_pack(prompts_dir)
    rows = []
    for path in sorted(Path(prompts_dir).glob("*.md")):
        prompt = load_prompt(path.stem, Path(prompts_dir))
        header = dict(line.split(":", 1) for line in prompt.header.splitlines() if ":" in line and
                      not line.startswith(" "))
        rows.append({"prompt": path.stem, "role": header.get("role", "").strip(), "sha256": prompt.sha256,
                     "source": header.get("source", "").strip() or "memaudit", "file": str(path)})
    published = is_published_pack(prompts_dir)
    for name, role, source in ((GUIDES_FILE, "slot_fill, retrieve query", "published category guides"),
                               (LAYOUT_FILE, "agent, simulator, pref_judge", "published request layout")):
        path = Path(prompts_dir) / name
        if path.exists():
            rows.append({"prompt": path.stem, "role": role, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                         "source": source if published else "", "file": str(path)})
    if as_json:
        for row in rows:
            click.echo(orjson.dumps({**row, "pack": pack}).decode())
        return
    click.echo(f"prompts: {pack['name']} {pack['hash']} ({prompts_dir})")
    for row in rows:
        click.echo(f"{row['prompt']:<24} {row['role']:<22} {row['sha256'][:16]}  {row['source']}")


COMMANDS = [prompts]
