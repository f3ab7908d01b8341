"""Adding a deployed library is one adapter file plus its extra: a scratch library, registered in a
copy of pyproject.toml (its entry point and its extra) and nothing else, is covered by `systems`,
`check-adapter`, the contract tests, the replay test, `plan` and the docs' table of libraries."""
from __future__ import annotations

import textwrap

import orjson
import pytest

from memaudit.adapters import registry
from memaudit.adapters.deployed import library_table, registered_libraries
from memaudit.cli import main
from memaudit.study.plan import default_rates
from tests.adapters import test_all_adapters, test_replay_adapters
from tests.adapters.conftest import deployed_libraries, system_params

NAME = "scratchlib"
# The whole adapter of a library whose "library" is openai's client, asked for one note a message.
ADAPTER = textwrap.dedent('''
    import re

    from memaudit.adapters.deployed import DeployedLibrary, RefilledStore, upstream_imports
    from memaudit.types import MemoryItem

    with upstream_imports("scratchlib"):
        import openai


    class ScratchLibrary(RefilledStore, DeployedLibrary):
        name = "scratchlib"
        library = "openai"
        CALLS_PER_MESSAGE = 1.0

        async def open(self, endpoint):
            return endpoint.model, openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.key,
                                                      timeout=endpoint.timeout, max_retries=endpoint.max_retries)

        async def add(self, event):
            model, client = await self.opened()
            answer = await self.guarded(lambda: client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": f"Note this: {event.text}"}]))
            if answer is not None:
                self.stored.append({"id": self.new_id(event.text), "content": answer.choices[0].message.content,
                                    "said": event.text})

        async def search(self, query, k):
            words = set(re.findall(r"\\w+", query.lower()))
            shared = [(len(words & set(re.findall(r"\\w+", item["said"].lower()))), n, item)
                      for n, item in enumerate(self.stored)]
            return [MemoryItem(item["id"], item["content"], float(score), {"said": item["said"]})
                    for score, _, item in sorted(shared, key=lambda s: (-s[0], s[1]))[:k]]

        async def _refill(self, items):
            self.stored = [dict(item) for item in items]

        @staticmethod
        def fake_text(body):
            said = str(body["messages"][-1].get("content"))
            return f"The user said: {said.removeprefix('Note this: ')}" if said.startswith("Note this: ") else None
''')


@pytest.fixture
def scratch_library(tmp_path, monkeypatch):
    """The scratch adapter module on the path and registered, as a built-in, in a pyproject.toml
    that differs from the checkout's by its entry point and its extra."""
    (tmp_path / f"{NAME}.py").write_text(ADAPTER)
    monkeypatch.syspath_prepend(str(tmp_path))
    pyproject = registry.CHECKOUT_PYPROJECT.read_text()
    table = '[project.entry-points."memaudit.adapters"]\n'
    pyproject = pyproject.replace(table, f'{table}{NAME} = "{NAME}:ScratchLibrary"\n')
    pyproject = pyproject.replace("[project.optional-dependencies]\n",
                                  f'[project.optional-dependencies]\n{NAME} = ["openai>=2"]\n')
    (tmp_path / "pyproject.toml").write_text(pyproject)
    monkeypatch.setattr(registry, "CHECKOUT_PYPROJECT", tmp_path / "pyproject.toml")
    for cached in (registry.registrations, registry.extras):
        cached.cache_clear()
    yield
    for cached in (registry.registrations, registry.extras):
        cached.cache_clear()


def test_a_new_library_is_covered_everywhere(scratch_library, tmp_path, capsys, settings, fake):
    main(["systems", "--json"])
    row = next(r for r in orjson.loads(capsys.readouterr().out) if r["name"] == NAME)
    assert row["origin"] == "built-in" and row["loads"] and row["version"].startswith("openai==")

    main(["--db", str(tmp_path / "check.db"), "check-adapter", NAME])
    assert f"{NAME}: the adapter contract holds" in capsys.readouterr().out

    # The parametrized tests of the contract and of replay (tests/adapters/test_all_adapters.py,
    # test_replay_adapters.py, test_libraries_cli.py) take their systems from these.
    assert NAME in deployed_libraries() and NAME in registry.builtin_names()
    assert [p.values for p in system_params([NAME])] == [(NAME,)]
    assert test_all_adapters.counts_a_failed_first_write(NAME) and NAME in test_replay_adapters.writing_systems()
    test_replay_adapters.replay_is_identical(settings, fake, (NAME,))

    rollout = default_rates(NAME)["rollout"]
    assert rollout["memory"].calls == 1.0 * (1 + rollout["agent"].calls)
    main(["--db", str(tmp_path / "plan.db"), "plan", "--bench", "sample", "--systems", NAME, "--users", "50",
          "--stages", "rollout"])
    assert f"| {NAME} | defaults |" in capsys.readouterr().out

    assert f"| `{NAME}` | openai==" in library_table(registered_libraries())
