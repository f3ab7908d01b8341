"""A deployed library's configuration card: every setting memaudit passes to the library or
patches in it, beside the library's own default and why, so that a maintainer can check that the
library was run as its authors ship and document it (docs/adapters.md).

A row's `library_default` is what the installed library does when nothing is passed (read from
the package where it can be, so an upgrade that moves it is seen), `used` what memaudit's run
used, `why` the reason for any difference (an upstream issue where one exists). A feature that is
off because a piece cannot be installed offline is a row with `used` "off"."""
from __future__ import annotations

from dataclasses import asdict, dataclass

FIELDS = ("setting", "library_default", "used", "why")


@dataclass(frozen=True)
class CardRow:
    setting: str
    library_default: str
    used: str
    why: str

    def to_json(self) -> dict:
        return asdict(self)
