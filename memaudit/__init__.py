"""memaudit: audit the long-term memory of LLM agents by hidden user-state recovery."""
from __future__ import annotations

import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

# The memory-system adapters live in the repository's top-level adapters/ folder (the design
# card's layout); a built wheel maps that folder to memaudit/adapters (setup.py). In a source
# checkout, `memaudit.adapters` is that folder, so the same import works in both.
_checkout_adapters = _Path(__file__).resolve().parent.parent / "adapters"
if not (_Path(__file__).resolve().parent / "adapters").is_dir() and (_checkout_adapters / "__init__.py").is_file():
    _spec = _util.spec_from_file_location(f"{__name__}.adapters", _checkout_adapters / "__init__.py",
                                          submodule_search_locations=[str(_checkout_adapters)])
    _module = _util.module_from_spec(_spec)
    _sys.modules[_spec.name] = _module
    _spec.loader.exec_module(_module)
