"""`export --archive FILE`: the release layout in one .tar.gz with the bytes a directory export
writes, deterministic, and read back by `import-release`; a hostile archive is refused."""
from __future__ import annotations

import io
import sqlite3
import tarfile

from memaudit.testing.release_fixture import write_release
from tests.release.test_hostile_release import memaudit, one_line_error


def files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_archive_holds_the_directory_export_and_imports_back(tmp_path, capsys):
    root = write_release(tmp_path / "release", users=2, runs=("amem_pooled_50", "nomem_pooled_50"))
    db = tmp_path / "s.db"
    assert memaudit("import-release", root, "--db", db) == 0
    assert memaudit("export", "--db", db, "--out", tmp_path / "dir") == 0
    assert memaudit("export", "--db", db, "--archive", tmp_path / "study.tar.gz") == 0
    first = (tmp_path / "study.tar.gz").read_bytes()
    assert memaudit("export", "--db", db, "--archive", tmp_path / "study.tar.gz") == 0
    assert (tmp_path / "study.tar.gz").read_bytes() == first  # deterministic bytes
    with tarfile.open(tmp_path / "study.tar.gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    assert members == files(tmp_path / "dir")
    assert not list(tmp_path.glob(".study.tar.gz.partial-*"))

    again = tmp_path / "again.db"
    assert memaudit("import-release", tmp_path / "study.tar.gz", "--db", again) == 0
    with sqlite3.connect(again) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM benchmarks")] == ["study"]
        assert conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == \
            sqlite3.connect(db).execute("SELECT COUNT(*) FROM turns").fetchone()[0]
    capsys.readouterr()
    assert memaudit("export", "--db", db, "--archive", tmp_path / "study.zip") == 2
    assert memaudit("export", "--db", db) == 2


def test_an_archive_with_a_link_or_a_climbing_path_is_refused(tmp_path, capsys):
    for name, member in (("link.tar.gz", _link()), ("climb.tar.gz", _file("../outside.json"))):
        with tarfile.open(tmp_path / name, "w:gz") as tar:
            tar.addfile(*member)
        capsys.readouterr()
        assert memaudit("import-release", tmp_path / name, "--db", tmp_path / "s.db") == 2
        assert name in one_line_error(capsys)
        assert not (tmp_path / "s.db").exists() and not (tmp_path / "outside.json").exists()
    (tmp_path / "broken.tar.gz").write_bytes(b"not gzip at all")
    assert memaudit("import-release", tmp_path / "broken.tar.gz", "--db", tmp_path / "s.db") == 2
    assert "not a readable release archive" in one_line_error(capsys)


def _link():
    info = tarfile.TarInfo("history")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc"
    return (info,)


def _file(name: str):
    info = tarfile.TarInfo(name)
    info.size = 2
    return info, io.BytesIO(b"{}")
