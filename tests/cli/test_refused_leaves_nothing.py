"""A command refused before it could call the model leaves no store behind: a rollout or generate
on a new store, pointed at the embedded model of an install without it (a light install)."""
from __future__ import annotations

import pytest

from memaudit.errors import EndpointError
from memaudit.llm import server
from tests.cli_main import memaudit


def no_server():
    raise EndpointError("llama-cpp-python is not installed; run `make install` or pass --base-url")


@pytest.mark.parametrize("command", [("rollout", "--bench", "sample", "--systems", "nomem", "--users", 1, "--quiet"),
                                     ("generate", "--users", 1, "--out", "gen")])
def test_refused_for_lack_of_the_embedded_model_leaves_no_store(monkeypatch, tmp_path, capsys, command):
    monkeypatch.setattr(server, "require_server", no_server)
    assert memaudit("--db", tmp_path / "x.db", *command) == 2
    assert "llama-cpp-python is not installed" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
