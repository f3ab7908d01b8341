"""`memaudit serve --fake` answers the generator's roles so that their own checks pass: `generate`
(with evolving entries), `generate-act` and judge-check's control answers run offline on it, over
real loopback HTTP, and every role of the generation stage is asked and answers without a failure."""
from __future__ import annotations

import orjson

from memaudit.bench.evolve import CHANGE_SPEC, CRITIC_SPEC
from memaudit.roles import ROLE_SPECS
from memaudit.testing.http_server import scripted_fake, serve
from tests.cli_main import memaudit

# The generator's roles outside the registry (memaudit/bench/evolve.py), by the role they are asked under.
CHANGE_ROLES = {"bank_gen:change": CHANGE_SPEC, "critic:change": CRITIC_SPEC}


def test_generate_evolving_act_and_judge_check_run_on_the_fake(tmp_path, capsys):
    db, out = tmp_path / "fake.db", tmp_path / "gen"
    with serve(scripted_fake()) as url:
        common = ("--db", db, "--base-url", url, "--model", "fake")
        assert memaudit(*common, "generate", "--users", 1, "--evolving", 2, "--out", out) == 0
        assert memaudit("bench", "validate", out) == 0
        assert memaudit(*common, "bench", "import", out, "--name", "gen") == 0
        assert memaudit(*common, "generate-act", "--bench", "gen") == 0
        assert memaudit(*common, "judge-check", "--bench", "gen") == 0
    printed = capsys.readouterr().out
    assert "1 users written" in printed and "0 failed" in printed
    assert memaudit("--db", db, "calls", "--json", "--limit", 100_000) == 0
    failed: dict[str, int] = {}
    for line in capsys.readouterr().out.splitlines():
        call = orjson.loads(line)
        failed[call["role"]] = failed.get(call["role"], 0) + (not call["ok"])
    generation = {name for name, spec in ROLE_SPECS.items() if spec.phase == "generation"} | set(CHANGE_ROLES)
    assert generation <= set(failed), f"never asked: {sorted(generation - set(failed))}"
    assert {role: failed[role] for role in generation if failed[role]} == {}
