"""A run's page shows how the run was made as tables (issue 44): its config, its provenance, what
each role was sent, and a deployed library's configuration card (issue 41: `provenance
["configuration"]`), each setting beside the library's default — not one JSON blob."""
from __future__ import annotations

import anyio

from memaudit.report.view import CARD, write_report
from memaudit.store import open_store
from tests.report import synthetic

CARD_ROWS = [{"setting": "llm.temperature", "library_default": "0.1", "used": "0.0", "why": "deterministic replay"},
             {"setting": "vector_store", "library_default": "qdrant (server)", "used": "qdrant (in process)",
              "why": "no network"}]


async def _report(tmp_path):
    async with open_store(tmp_path / "audit.db") as store:
        await synthetic.fill(store)
        await store.runs.record_in_provenance("mem0", "roles", {"agent": {"model": "gpt-5.4-mini", "temperature": 0.7}})
        await store.runs.record_in_provenance("mem0", CARD, CARD_ROWS)
        return await write_report(store, tmp_path / "report")


def test_the_run_page_shows_config_roles_and_the_library_card_as_tables(tmp_path):
    index = anyio.run(_report, tmp_path)
    page = (index.parent / "runs" / "mem0.html").read_text()
    config = page.split("<h2>Configuration</h2>", 1)[1].split("<h2>Per user</h2>", 1)[0]
    assert "<dt>max_turns</dt>" in config and '{"' not in config.split("<h3>", 1)[0]  # no JSON blob of the config
    roles = config.split("<h3>Roles: what each was sent</h3>", 1)[1]
    assert "<th>model</th>" in roles and "<td>gpt-5.4-mini</td>" in roles
    card = config.split("<h3>The library's configuration card</h3>", 1)[1]
    assert "<th>setting</th><th>library_<wbr>default</th><th>used</th><th>why</th>" in card
    assert "<td>qdrant (in process)</td>" in card and "<td>deterministic replay</td>" in card
