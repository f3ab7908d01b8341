"""One writer per run, and no run row without episodes: a second rollout of a busy run is told so
in one line; a rollout that never got an episode written (dead server, kill) pins no settings."""
from __future__ import annotations

import httpx
import pytest

from memaudit.errors import EndpointError
from memaudit.rollout.runner import run_rollout
from memaudit.store import RunBusy, dumps, open_store

pytestmark = pytest.mark.anyio


class Refusing(httpx.AsyncBaseTransport):
    """Every connection fails, like a server that is down."""

    async def handle_async_request(self, request):
        raise httpx.ConnectError("connection refused", request=request)


async def test_a_second_rollout_of_a_busy_run_is_refused_in_one_line(open_rt, bench, settings):
    async with open_store(settings.db) as other, open_rt() as rt:
        with other.runs.lock("nomem"):  # another process is writing run nomem
            with pytest.raises(RunBusy) as info:
                await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
            message = str(info.value)
            assert "run 'nomem' is busy" in message and "\n" not in message
            assert await rt.store.runs.get("nomem") is None
            # another run of the same store is not held up
            assert await run_rollout(rt, bench, ["longctx_full"], tasks=1, max_turns=2, progress=False) == \
                ["longctx_full"]
        assert await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False) == ["nomem"]
        assert len(await rt.store.episodes.load("nomem")) == 2


async def test_a_rollout_against_a_dead_server_leaves_no_run_row(open_rt, bench):
    async with open_rt(transport=Refusing()) as rt:
        with pytest.raises(EndpointError):
            await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
        assert await rt.store.runs.get("nomem") is None
    async with open_rt() as rt:  # other settings than the failed attempt's: nothing pins them
        await run_rollout(rt, bench, ["nomem"], tasks=2, max_turns=3, progress=False)
        assert (await rt.store.runs.get("nomem")).config.max_turns == 3


async def test_an_empty_run_row_left_by_a_kill_pins_nothing(open_rt, bench):
    async with open_rt() as rt:
        await rt.store.write([("INSERT INTO runs(run, system, bench, origin, config, prompt_hashes) "
                               "VALUES (?,?,?,?,?,?)", ("nomem", "nomem", bench.name, "rollout",
                                                        dumps({"tasks": 9}), dumps({})))])
        await run_rollout(rt, bench, ["nomem"], tasks=1, max_turns=2, progress=False)
        assert (await rt.store.runs.get("nomem")).config.tasks == 1


def test_the_second_rollout_command_says_the_run_is_busy(tmp_path, capsys):
    from memaudit.cli import main
    from memaudit.store import Store
    from tests.rollout.test_cli_inprocess import store_tiny_bench

    db = tmp_path / "m.db"
    store_tiny_bench(db)
    with Store(None, db).runs.lock("nomem"):  # the first command, still writing (only the path is used)
        with pytest.raises(SystemExit) as exit_info:
            main(["rollout", "--bench", "tiny", "--systems", "nomem", "--base-url", "http://127.0.0.1:9/v1",
                  "--model", "fake", "--db", str(db), "--quiet"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("memaudit: error:") and "busy" in err and len(err.strip().splitlines()) == 1
