"""`memaudit merge SHARD.db… --into STUDY.db`: join the stores of a sharded study (shard.py).

All or nothing: the study is copied to a side file beside it, every shard is checked and merged into the copy, and only a
complete copy replaces the study, by one rename. A refusal, a failure or a kill at any point leaves
STUDY.db as it was, byte for byte. A merge that adds nothing leaves the study untouched too, so
merging the same shards again is a no-op. One merger at a time: a second gets "busy".

A shard is refused when it cannot belong to the same study:
- a benchmark of the same name with other content (users, banks, tasks, pool);
- a run of the same name made differently (system, run config, protocol, models, prompt hashes),
  or a scoring / utilization pass recorded with another configuration;
- a row of a cell (episode, turn, snapshot, reconstruction, attribution, Know/Act case …) that the
  study already holds with other content: cells are disjoint, or identical where they overlap;
- a cached call whose key the study holds with other response bytes (the key, the role and the
  stores holding each version are named): a content-addressed cache never overwrites an answer.
The call cache itself is joined by the same union as `memaudit cache merge` (CACHE_UNION).

Tables are handled generically from SQLite's own schema (primary keys from PRAGMA table_info), so
tables that later migrations add are merged with the same rules without a change here."""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sqlite3
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from memaudit.errors import BadInput, StoreError
from memaudit.canonical import differences
from memaudit.store import Store, loads
from memaudit.store.calls import CACHE_TABLES, CACHE_UNION, store_tables
from memaudit.store.faults import faults
from memaudit.store.shard_stages import missing_shards
from memaudit.store.sidefile import swap_in

BENCH_TABLES = ("benchmarks", "users", "bank_entries", "tasks")  # one benchmark's content: compared as a whole
# Bookkeeping that may differ between two records of the same cell: whether a call came from the
# cache depends on what that machine's store already held, not on the artifact.
VOLATILE = {("call_uses", "from_cache")}
SHOWN = 80  # characters of a differing value shown in a refusal


class MergeBusy(BadInput):
    """Another merge into the same study is running."""


@dataclass
class ShardReport:
    shard: str
    added: dict[str, int] = field(default_factory=dict)  # table -> rows added


@dataclass
class MergeReport:
    into: str
    shards: list[ShardReport]
    changed: bool
    missing: list[str] = field(default_factory=list)  # shards absent from a --partial merge


async def merge_shards(shards: list[Path], into: Path, *, partial: bool = False) -> MergeReport:
    """Merge every shard store into `into` (created when absent), all or nothing. A shard of the
    study that neither a store given nor the study has run is refused by name (`partial`: merged
    without it, and named in the report)."""
    into = Path(into)
    shards = _checked_paths(shards, into)
    with _merge_lock(into):
        _refuse_live_writer(into)
        for shard in shards:
            await (await Store.open(shard)).close()  # brings a store made by an older version up to date
        missing = missing_shards([into, *shards])
        if missing and not partial:
            raise BadInput(f"a shard of the study is missing: {'; '.join(missing)} (in the stores given and the "
                           "study); run that shard again (Slurm: bash submit.sh INDEX) and merge once it has "
                           "finished, or merge what there is with --partial", file=str(into))
        side = into.with_name(f".{into.name}.merging")
        _remove(side)  # left by a killed merge (this process holds the lock now), journal included
        try:
            await _prepare_copy(into, side)
            with faults(into):  # a full disk while writing the copy names the study
                reports, changed = _merge_into_copy(side, shards, into)
            if changed or not into.exists():
                _refuse_live_writer(into)
                swap_in(side, into)
            return MergeReport(str(into), reports, changed, missing)
        finally:
            _remove(side)


def _remove(side: Path) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        side.with_name(side.name + suffix).unlink(missing_ok=True)


def _checked_paths(shards: list[Path], into: Path) -> list[Path]:
    if not shards:
        raise BadInput("give at least one shard store to merge", field="shards")
    out = []
    for shard in map(Path, shards):
        if not shard.is_file():
            raise BadInput("no such shard store", file=str(shard))
        if into.exists() and shard.resolve() == into.resolve():
            raise BadInput("cannot merge the study into itself", file=str(shard))
        if shard.resolve() not in {s.resolve() for s in out}:  # a shard named twice is merged once
            out.append(shard)
    return out


@contextmanager
def _merge_lock(into: Path):
    """An advisory lock beside the study, dropped by the system however the holder exits; the holder
    removes its file when done. A merger that opened the file just before the holder removed it
    holds a lock on a removed file: it sees so and takes the lock anew on the file now there."""
    path = into.with_name(into.name + ".merge.lock")
    while True:
        fd = _open_lock(path, into)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise MergeBusy(f"busy: another memaudit merge into {into} is running") from None
        if _is_file_at(fd, path):
            break
        os.close(fd)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _open_lock(path: Path, into: Path) -> int:
    try:
        into.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BadInput(f"cannot write beside the study store: {exc.strerror or exc}", file=str(into)) from None


def _is_file_at(fd: int, path: Path) -> bool:
    try:
        there = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)


def _refuse_live_writer(into: Path) -> None:
    """A non-empty WAL beside the study means a process is writing it now: replacing the file
    under that process would lose its work (and its WAL would be replayed onto the new file)."""
    wal = into.with_name(into.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise MergeBusy(f"busy: another process is writing {into}; merge when it has finished", file=str(into))


async def _prepare_copy(into: Path, side: Path) -> None:
    """The side copy: the study as it is (or an empty store), at the current schema version. A
    plain file copy: the study has no write-ahead log to fold in (_refuse_live_writer), and unlike
    SQLite's backup in one step it needs no memory in proportion to the study."""
    if into.exists():
        _check_store(into)
        shutil.copyfile(into, side)
    try:
        await (await Store.open(side)).close()
    except StoreError as exc:  # e.g. a study written by a newer memaudit: name it, not its copy
        raise StoreError(exc.detail.replace(str(side), str(into)), file=str(into)) from None


def _check_store(path: Path) -> None:
    if not {"runs", "calls"} <= store_tables(path):
        raise BadInput("not a memaudit store (no runs or calls table)", file=str(path))


def _merge_into_copy(side: Path, shards: list[Path], into: Path) -> tuple[list[ShardReport], bool]:
    with closing(sqlite3.connect(side, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")  # the copy becomes one file, renamed as a whole
        before = conn.total_changes
        reports = []
        for shard in shards:
            _check_store(shard)
            conn.execute("ATTACH DATABASE ? AS src", (str(shard),))
            try:
                conn.execute("BEGIN IMMEDIATE")
                _check_shard(conn, shard, shards, into)
                reports.append(ShardReport(str(shard), _union(conn)))
                conn.execute("COMMIT")
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                conn.execute("DETACH DATABASE src")
        changed = conn.total_changes != before
        conn.execute("PRAGMA journal_mode=WAL")  # as every store is kept (Store.open)
        return reports, changed


# -- checks -------------------------------------------------------------------------------------
def _check_shard(conn: sqlite3.Connection, shard: Path, shards: list[Path], into: Path) -> None:
    tables = _tables(conn, "src")
    unknown = sorted(tables - _tables(conn, "main"))
    if unknown:
        raise BadInput(f"the shard has tables this memaudit does not know ({', '.join(unknown)}): it was made by a "
                       "newer version; merge with that version", file=str(shard))
    _check_benchmarks(conn, shard)
    _check_runs(conn, shard)
    _check_calls(conn, shard, shards, into)
    for table in sorted(tables - set(BENCH_TABLES) - set(CACHE_TABLES) - {"runs"}):
        _check_overlap(conn, table, shard)


def _tables(conn: sqlite3.Connection, schema: str) -> set[str]:
    return {r[0] for r in conn.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type='table' "
                                       "AND name NOT LIKE 'sqlite_%'")}


def bench_digest(conn: sqlite3.Connection, schema: str, bench: str) -> str:
    """The content hash of one benchmark in an attached store: its row, users, banks and tasks."""
    h = hashlib.sha256()
    for table in BENCH_TABLES:
        column = "name" if table == "benchmarks" else "bench"
        for row in conn.execute(f"SELECT * FROM {schema}.{table} WHERE {column}=? ORDER BY 1, 2, 3",
                                (bench,)).fetchall():
            h.update(repr(tuple(row)).encode())
    return f"sha256:{h.hexdigest()}"


def _check_benchmarks(conn: sqlite3.Connection, shard: Path) -> None:
    for (name,) in conn.execute("SELECT s.name FROM src.benchmarks s JOIN main.benchmarks m ON m.name = s.name "
                                "ORDER BY s.name").fetchall():
        mine, theirs = bench_digest(conn, "main", name), bench_digest(conn, "src", name)
        if mine != theirs:
            raise BadInput(f"benchmark {name!r} differs from the study's (content {theirs[:19]}…, the study's "
                           f"{mine[:19]}…): shards of one study run the same benchmark", file=str(shard))


def _check_runs(conn: sqlite3.Connection, shard: Path) -> None:
    rows = conn.execute("SELECT m.run, m.system, m.bench, m.origin, m.config, m.prompt_hashes, s.system, s.bench, "
                        "s.origin, s.config, s.prompt_hashes FROM src.runs s JOIN main.runs m ON m.run = s.run ORDER BY s.run"
                        ).fetchall()  # read to the end: an open statement would keep the shard attached
    for run, *both in rows:
        mine, theirs = (_run_record(*both[:5]), _run_record(*both[5:]))
        changed = differences(mine, theirs)
        if changed:
            more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
            raise BadInput(f"run {run!r} was made differently in this shard: {changed[0]}{more} (recorded = "
                           "the study, now = the shard); shards of one study share benchmark, protocol, prompts "
                           "and run config", file=str(shard))


def _run_record(system, bench, origin, config, prompt_hashes) -> dict:
    return {"system": system, "bench": bench, "origin": origin, **loads(config), "prompts": loads(prompt_hashes)}


def _check_calls(conn: sqlite3.Connection, shard: Path, shards: list[Path], into: Path) -> None:
    conflicts = conn.execute("SELECT s.key, s.role FROM src.calls s JOIN main.calls m ON m.key = s.key "
                             "WHERE CAST(s.response AS BLOB) IS NOT CAST(m.response AS BLOB) ORDER BY s.key").fetchall()
    if not conflicts:
        return
    key, role = conflicts[0]
    holders = [str(p) for p in [into, *shards[:shards.index(shard)]] if p.exists() and _holds_key(p, key)]
    more = f"; {len(conflicts) - 1} more conflicting keys" if len(conflicts) > 1 else ""
    raise BadInput(f"call cache conflict: key {key} (role {role}) has different response bytes in {shard} and in "
                   f"{', '.join(holders) or 'an earlier shard'}{more}; a cached answer is never overwritten, so "
                   "the merge is refused and the study left as it was", file=str(shard))


def _holds_key(path: Path, key: str) -> bool:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT 1 FROM calls WHERE key=?", (key,)).fetchone() is not None


def _columns(conn: sqlite3.Connection, table: str) -> tuple[list[str], list[str]]:
    """(all columns, primary-key columns) of a table of the study's schema."""
    info = conn.execute(f"PRAGMA main.table_info({table})").fetchall()
    return [r[1] for r in info], [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]


def _check_overlap(conn: sqlite3.Connection, table: str, shard: Path) -> None:
    """A row whose key the study already holds must hold the same content."""
    columns, key = _columns(conn, table)
    if not key:
        return  # without a key every distinct row is its own fact: the union is a set union
    compared = [c for c in columns if c not in key and (table, c) not in VOLATILE]
    if not compared:
        return
    join = " AND ".join(f"s.{c} = m.{c}" for c in key)
    same = " AND ".join(f"s.{c} IS m.{c}" for c in compared)
    row = conn.execute(f"SELECT {', '.join(f's.{c}' for c in key)}, "
                       f"{', '.join(f's.{c}, m.{c}' for c in compared)} "
                       f"FROM src.{table} s JOIN main.{table} m ON {join} WHERE NOT ({same}) LIMIT 1").fetchone()
    if row is None:
        return
    where = ", ".join(f"{c} {v!r}" for c, v in zip(key, row))
    pairs = list(zip(row[len(key)::2], row[len(key) + 1::2]))
    column, (theirs, mine) = next((c, p) for c, p in zip(compared, pairs) if p[0] != p[1])
    raise BadInput(f"{table} row ({where}) differs from the study's in {column} (the study: "
                   f"{str(mine)[:SHOWN]!r}, the shard: {str(theirs)[:SHOWN]!r}): cells of a study are disjoint "
                   "or identical", file=str(shard))


# -- the union ----------------------------------------------------------------------------------
def _union(conn: sqlite3.Connection) -> dict[str, int]:
    """Insert every row of the attached shard that the study lacks; returns rows added per table."""
    added = {}
    for table in sorted(_tables(conn, "src") - set(CACHE_TABLES)):
        before = conn.total_changes
        columns, key = _columns(conn, table)
        names = ", ".join(columns)
        if key:
            conn.execute(f"INSERT OR IGNORE INTO main.{table} ({names}) SELECT {names} FROM src.{table}")
        else:
            conn.execute(f"INSERT INTO main.{table} ({names}) SELECT {names} FROM src.{table} "
                         f"EXCEPT SELECT {names} FROM main.{table}")
        added[table] = conn.total_changes - before
    before = conn.total_changes
    for sql in CACHE_UNION:
        conn.execute(sql)
    added["call cache"] = conn.total_changes - before
    return {t: n for t, n in added.items() if n}
