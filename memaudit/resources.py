"""Where memaudit's own data files are. The prompts (prompts/*.md) and the schema migrations
(db/*.sql) sit at the top of a source checkout, as the design card lays out; a built wheel carries
them inside the package as memaudit/_data/prompts and memaudit/_data/db (copied by setup.py). The
bundled sample, the dimension pool and the report assets are package data already."""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def data_dir(name: str) -> Path:
    """The folder of memaudit's `prompts` or `db` files, installed or in a checkout."""
    packaged = Path(str(files("memaudit"))) / "_data" / name
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / name
