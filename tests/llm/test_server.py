"""The embedded server's command line matches what llama_cpp.server accepts (no server started)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from memaudit.llm.server import bundled_gguf, server_command


def test_server_flags_are_accepted_by_llama_cpp_server():
    pytest.importorskip("llama_cpp.server")
    cmd = server_command(8123, threads=2)
    help_text = subprocess.run([sys.executable, "-m", "llama_cpp.server", "--help"], capture_output=True,
                               text=True, check=True).stdout
    accepted = set(re.findall(r"(--[a-z_]+)", help_text))
    flags = [part for part in cmd if part.startswith("--")]
    assert set(flags) <= accepted
    options = dict(zip(cmd[3::2], cmd[4::2]))
    assert options["--host"] == "127.0.0.1" and options["--n_threads"] == "2"
    assert options["--cache"] == "true"          # prompt-prefix reuse across requests
    assert options["--model"] == str(bundled_gguf())
