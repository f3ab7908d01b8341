"""`memaudit serve --fake`: the scripted fake model on loopback, for trying memaudit without the
embedded build. Started as users start it (a process), stopped with SIGTERM."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys

import httpx

from memaudit.config import REPO_ROOT


def test_serve_fake_answers_every_role_in_shape():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(REPO_ROOT / "memaudit.py"), "serve", "--fake", "--port", str(port)],
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()  # printed once the port is bound
        assert f"http://127.0.0.1:{port}/v1" in line and "--model fake" in line
        body = {"model": "fake", "messages": [{"role": "user", "content": "Plan my week."}]}
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30).json()
        assert reply["choices"][0]["message"]["content"].startswith("Here is a plan")
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    # it has no store, so its last line says nothing of one
    assert server.returncode == 128 + signal.SIGTERM
    assert err.strip() == "memaudit: stopped by SIGTERM; the fake model server stopped"
