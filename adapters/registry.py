"""Memory systems by name, from one list: every system, memaudit's own and third-party ones alike,
is registered under the `memaudit.adapters` entry-point group (`name = "package.module:Class"`).
memaudit's own are declared in its pyproject.toml; a source checkout run without installing
(`python memaudit.py`) reads that same table from the checkout's pyproject.toml, which is also what
an editable install should see (installed metadata goes stale until the next install).

A plugin named like a built-in is not used (the built-in keeps the name) and says so, and a
plugin whose module does not import is listed with its error: `memaudit systems` shows both."""
from __future__ import annotations

import difflib
import functools
import importlib
from dataclasses import dataclass
from importlib.metadata import distributions, entry_points
from pathlib import Path

from memaudit.errors import BadInput, MemauditError

GROUP = "memaudit.adapters"
DISTRIBUTION = "memaudit-bench"  # our own distribution: its registrations are the built-ins
BUILTIN_ORIGIN = "built-in"
CHECKOUT_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@dataclass(frozen=True)
class Registration:
    name: str
    target: str           # "package.module:Class"
    origin: str           # "built-in", or the plugin's "package==version"
    problem: str | None = None  # why this registration is not used (a name clash), else None


def _checkout_project() -> dict | None:
    """The `[project]` table of a source checkout's pyproject.toml, or None when not in one."""
    if not CHECKOUT_PYPROJECT.is_file():
        return None
    import tomllib

    project = tomllib.loads(CHECKOUT_PYPROJECT.read_text()).get("project", {})
    return project if project.get("name") == DISTRIBUTION else None


def _checkout_builtins() -> dict[str, str] | None:
    """The built-ins declared in a source checkout's pyproject.toml, or None when not in one."""
    project = _checkout_project()
    return None if project is None else dict(project.get("entry-points", {}).get(GROUP, {}))


@functools.cache
def extras() -> frozenset[str]:
    """Our distribution's extras (a deployed library's is named like its system), as the checkout
    declares them, else as the installed metadata does."""
    project = _checkout_project()
    if project is not None:
        return frozenset(project.get("optional-dependencies", {}))
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        return frozenset(metadata(DISTRIBUTION).get_all("Provides-Extra") or ())
    except PackageNotFoundError:
        return frozenset()


def install_hint(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra(name: str) -> str | None:
    """The extra that brings a built-in system's library (named like the system), or None."""
    return name if name in extras() and name in builtin_names() else None


@functools.cache  # scanning the installed distributions costs ~15 ms, and commands ask often
def registrations() -> tuple[Registration, ...]:
    """Every registration, built-ins first, then plugins by name (clashing ones marked)."""
    checkout = _checkout_builtins()
    builtins = dict(checkout or {})
    plugins = []
    for ep in entry_points(group=GROUP):
        dist = ep.dist.metadata["Name"] if ep.dist is not None else None
        if dist == DISTRIBUTION:
            if checkout is None:  # installed: our own registrations are the built-ins
                builtins[ep.name] = ep.value
            continue
        origin = f"{dist}=={ep.dist.version}" if ep.dist is not None else "unknown package"
        plugins.append((ep.name, ep.value, origin))
    found = [Registration(name, target, BUILTIN_ORIGIN) for name, target in sorted(builtins.items())]
    for name, target, origin in sorted(plugins):
        clash = "the built-in" if name in builtins else "another plugin" if name in {r.name for r in found} else None
        found.append(Registration(name, target, origin, clash and f"{clash} is called {name!r}: not used"))
    return tuple(found)


def _targets() -> dict[str, Registration]:
    return {r.name: r for r in registrations() if r.problem is None}


def builtin_names() -> list[str]:
    return sorted(r.name for r in registrations() if r.origin == BUILTIN_ORIGIN)


def available() -> list[str]:
    return sorted(_targets())


def load(registration: Registration):
    """The adapter class of a registration; BadInput naming the system and its origin when its
    module does not import or lacks the class."""
    module, _, attr = registration.target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except MemauditError:  # the module's own one-line refusal (e.g. a missing optional library)
        raise
    except ModuleNotFoundError as exc:
        extra = missing_extra(registration.name)
        if extra is None:
            raise _does_not_load(registration, exc) from None
        raise BadInput(f"memory system {registration.name!r} needs the {extra!r} extra, which is not installed "
                       f"({exc}): {install_hint(extra)} (make install brings it)", field="systems") from None
    except Exception as exc:  # a plugin's import error is its author's to fix: one line, not a traceback
        raise _does_not_load(registration, exc) from None


def _does_not_load(registration: Registration, exc: Exception) -> BadInput:
    return BadInput(f"memory system {registration.name!r} ({registration.origin}) does not load: "
                    f"{type(exc).__name__}: {exc}", field="systems")


def get_adapter(name: str):
    targets = _targets()
    if name not in targets:
        raise BadInput(f"unknown memory system {name!r}; available: {', '.join(sorted(targets))}"
                       f"{_group_typos()}", field="systems")
    return load(targets[name])


def _group_typos() -> str:
    """Installed packages that register under a group close to GROUP (a typo in a plugin's
    pyproject.toml), named so the unknown-system message points at the fix."""
    near = set()
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group != GROUP and difflib.SequenceMatcher(None, ep.group, GROUP).ratio() > 0.8:
                near.add(f"{dist.metadata['Name']} registers {ep.name!r} under {ep.group!r}")
    return f" ({'; '.join(sorted(near))}; the group is {GROUP!r})" if near else ""


def origin_of(name: str) -> str:
    """"built-in", or the plugin's "package==version"."""
    get_adapter(name)  # unknown or broken: its one-line error
    return _targets()[name].origin


def system_of(run: str) -> str:
    """The system a run id belongs to: `amem_pooled_50` -> `amem` (longest known prefix wins)."""
    names = sorted(_targets(), key=len, reverse=True)
    for name in names:
        if run == name or run.startswith(name + "_"):
            return name
    return run.split("_", 1)[0]
