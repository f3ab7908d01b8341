"""The embedded server: its command line matches what llama_cpp.server accepts; a server that
dies is reported at once, naming its exit and its log; the smoke check `make install` ends with."""
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


# A stand-in for llama.cpp's server that dies the way the AMX build did: it answers /v1/models,
# then kills itself with SIGILL on the first completion.
CRASHING_SERVER = """
import os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("content-length", "11")
        self.end_headers()
        self.wfile.write(b'{"data":[]}')

    def do_POST(self):
        print("illegal instruction on the first completion", flush=True)
        os.kill(os.getpid(), signal.SIGILL)

HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_a_server_that_dies_mid_command_is_reported_at_once(tmp_path, monkeypatch):
    import anyio

    from memaudit.config import load_settings
    from memaudit.llm import server
    from memaudit.llm.embed import Embedder
    from memaudit.runtime import open_runtime
    from tests.rollout.conftest import fake_encoder

    monkeypatch.setattr(server, "server_command", lambda port, **_: [sys.executable, "-c", CRASHING_SERVER, str(port)])
    settings = load_settings(db=tmp_path / "m.db", env={})

    async def ask():
        async with open_runtime(settings, embedder=Embedder(None, encoder=fake_encoder)) as rt:
            with pytest.raises(server.ServerExited) as info:
                await rt.llm.call("agent", [{"role": "user", "content": "hello"}])
            return info.value, rt.llm.transport.retries

    error, retries = anyio.run(ask)
    log = tmp_path / "memaudit-server.log"
    assert str(error) == f"the embedded model server exited with signal SIGILL; log: {log}"
    assert retries == 0  # said at once, not after the retry budget
    assert "illegal instruction" in log.read_text()


def test_a_server_that_exits_at_start_up_names_its_exit_and_log(tmp_path, monkeypatch):
    import anyio

    from memaudit.llm import server

    monkeypatch.setattr(server, "server_command", lambda port, **_: [sys.executable, "-c", "raise SystemExit(3)"])

    async def start():
        async with server.embedded_server(log_path=tmp_path / "s.log"):
            pass

    with pytest.raises(server.ServerExited) as info:
        anyio.run(start)
    assert str(info.value) == f"the embedded model server exited with code 3 at start-up; log: {tmp_path / 's.log'}"


def test_the_smoke_check_fails_in_one_line_naming_the_log(tmp_path, monkeypatch, capsys):
    from memaudit.cli import main
    from memaudit.llm import server

    monkeypatch.setattr(server, "server_command", lambda port, **_: [sys.executable, "-c", CRASHING_SERVER, str(port)])
    log = tmp_path / "smoke.log"
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--smoke", "--log", str(log)])
    err = capsys.readouterr().err
    assert exit_info.value.code != 0 and err.count("\n") == 1
    assert f"smoke check of the embedded model failed: the embedded model server exited with signal SIGILL; log: {log}" in err


@pytest.mark.integration
def test_the_smoke_check_on_the_bundled_model(tmp_path, capsys):
    """What `make install` ends with: the real embedded server loads the bundled model and answers."""
    pytest.importorskip("llama_cpp.server")
    from memaudit.cli import main
    main(["serve", "--smoke", "--log", str(tmp_path / "smoke.log")])
    assert "the embedded model loaded and answered" in capsys.readouterr().out
