"""Files a user points memaudit at are read whole only when regular, inside their folder and small
(memaudit/userfiles.py): everything else is one BadInput naming the file, before a byte is read."""
from __future__ import annotations

import os

import pytest

from memaudit.errors import BadInput
from memaudit.userfiles import read_regular


def test_a_regular_file_is_read(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    assert read_regular(tmp_path / "f", limit=3, root=tmp_path) == b"abc"


@pytest.mark.parametrize("path, kind", [("/dev/zero", "a device"), ("/", "a directory")])
def test_a_device_or_directory_is_refused(path, kind):
    with pytest.raises(BadInput, match=kind):
        read_regular(path, limit=10)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(BadInput, match="a FIFO"):
        read_regular(tmp_path / "pipe", limit=10)


def test_a_file_reporting_no_size_is_still_bounded():
    """/proc files report size 0 and hold more: the read stops at the limit."""
    with pytest.raises(BadInput, match="larger than 4 bytes"):
        read_regular("/proc/self/status", limit=4)


def test_a_link_out_of_the_root_and_a_missing_file_are_named(tmp_path):
    (tmp_path / "link").symlink_to("/etc/passwd")
    with pytest.raises(BadInput, match="resolves outside") as caught:
        read_regular(tmp_path / "link", limit=10, root=tmp_path, label="prices.toml")
    assert "prices.toml" in str(caught.value)
    with pytest.raises(BadInput, match="not found"):
        read_regular(tmp_path / "missing", limit=10)
