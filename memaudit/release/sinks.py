"""Where an export writes the release layout: a directory, or one compressed archive; and an
archive unpacked again for `import-release`.

The archive is a gzip-compressed tar (stdlib only) holding the same relative paths and the same
bytes as a directory export. It is written to a temporary sibling and renamed into place at the
end, and its bytes are deterministic (fixed times, owners and modes), like the directory's files."""
from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
import zlib
from contextlib import contextmanager
from pathlib import Path

from memaudit.bench.export import FolderWriter
from memaudit.canonical import canonical_pretty
from memaudit.errors import BadInput
from memaudit.scratch import owned_prefix, remove_stale

# gzip's fastest level: an export is mostly transcripts and memories, written at tens of MB/s and
# kept to about a third; the default level saved a fifth more for several times the time.
ARCHIVE_LEVEL = 1
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


def release_bytes(data) -> bytes:
    """A release file's bytes, as write_json writes them."""
    return canonical_pretty(data) + b"\n"


class DirectorySink(FolderWriter):
    """Files under a directory; every path is checked to stay under it (symlinks followed)."""

    def close(self) -> None:
        """Nothing to finish: each file is complete when written."""

    def abort(self) -> None:
        """Files already written stay (a directory export is not atomic)."""


class ArchiveSink:
    """Members of a .tar.gz, written to a hidden sibling owned by this process and renamed to `file`
by close()."""

    def __init__(self, file: Path):
        self.file = Path(file)
        prefix = f".{self.file.name}.partial-"
        remove_stale(self.file.parent, prefix)
        self.partial = self.file.with_name(owned_prefix(prefix) + "0")
        self._raw = open(self.partial, "wb")
        self._gzip = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, compresslevel=ARCHIVE_LEVEL, mtime=0)
        self._tar = tarfile.open(fileobj=self._gzip, mode="w", format=tarfile.PAX_FORMAT)
        self._folders: set[str] = set()

    def write(self, relative: str, data) -> None:
        self._add_folders(relative)
        payload = release_bytes(data)
        info = self._info(relative, tarfile.REGTYPE, 0o644)
        info.size = len(payload)
        self._tar.addfile(info, io.BytesIO(payload))

    def _add_folders(self, relative: str) -> None:
        parts = relative.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folder = "/".join(parts[:i])
            if folder not in self._folders:
                self._folders.add(folder)
                self._tar.addfile(self._info(folder, tarfile.DIRTYPE, 0o755))

    @staticmethod
    def _info(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = kind, mode, 0, 0, 0, "", ""
        return info

    def close(self) -> None:
        self._tar.close()
        self._gzip.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        os.replace(self.partial, self.file)

    def abort(self) -> None:
        for handle in (self._tar, self._gzip, self._raw):
            try:
                handle.close()
            except (OSError, ValueError):
                pass
        self.partial.unlink(missing_ok=True)


def is_archive(path: Path) -> bool:
    return Path(path).name.endswith(ARCHIVE_SUFFIXES)


def archive_stem(path: Path) -> str:
    name = Path(path).name
    return next(name[:-len(suffix)] for suffix in ARCHIVE_SUFFIXES if name.endswith(suffix))


@contextmanager
def unpacked(archive: Path):
    """The archive's release layout, unpacked into a temporary directory named after the archive
    (the benchmark's default name), removed afterwards. Only regular files and folders inside the
    destination are unpacked: links, devices, pipes and paths leaving it are refused."""
    with tempfile.TemporaryDirectory(prefix="memaudit-release-") as tmp:
        root = Path(tmp) / archive_stem(archive)
        root.mkdir()
        try:
            with tarfile.open(archive, mode="r:gz") as tar:
                for member in tar:
                    if not (member.isfile() or member.isdir()):
                        raise BadInput(f"archive member {member.name[:80]!r} is not a file or folder; refused",
                                       file=str(archive))
                    tar.extract(member, root, filter="data")
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise BadInput(f"not a readable release archive ({exc})", file=str(archive)) from None
        yield root
