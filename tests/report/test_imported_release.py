"""The report over an imported published release: runs named after their directories, retrieve
reports from `<run>_retrieve/`, transcripts from `history/`."""
from __future__ import annotations

import pytest

from memaudit.release.importer import import_release
from memaudit.report.view import write_report
from memaudit.store import open_store
from memaudit.testing.release_fixture import write_release
from tests.report.test_view import episode, follow, recons, user_view


@pytest.mark.anyio
async def test_report_of_an_imported_release(tmp_path):
    root = write_release(tmp_path / "release", users=2, runs=("amem_pooled_50", "nomem_pooled_50"), turns=3)
    async with open_store(tmp_path / "audit.db") as store:
        await import_release(store, root)
        index = await write_report(store, tmp_path / "report")
    text = index.read_text()
    assert "amem_pooled_50" in text and "nomem_pooled_50" in text and "import" in text

    pass_page = follow(index, "dump_all", "Table 3")  # the first row: amem_pooled_50
    assert pass_page.parent.name == "amem_pooled_50" and pass_page.name == "dump_all.html"
    user, _ = user_view(pass_page, "user_001", "Per user")
    assert user["bank"][0]["short"] == "user_001 stance on skill_memory 0"  # ground truth
    assert "uuuu" in episode(user, "amem_pooled_50", 1)["turns"][0][3]       # the simulated user's reply
    read = recons(user, "skill_axis_0", "amem_pooled_50", "retrieve")
    assert read["k"] == 5 and read["evidence"]["items"]
