"""Each command takes the global settings it reads and only those, and its help groups its options
(study, model, output). Enumerated: the commands are found by walking the CLI, so a new command
fails here until the tour runs it, and a new option until its help group is declared
(memaudit/cli/common.py HELP_GROUPS).

The tour runs every command in process against the loopback fake, counting the settings each one
reads (tests/cli/settings_reads.py). A command must take every setting it read (so a command that
needs --base-url accepts it) and no other (so its help lists only what it uses). Every setting is
also given before the command's name, where each command accepts all of them: a setting read but
not taken would still be found."""
from __future__ import annotations

from pathlib import Path

import click
import orjson
import pytest

import memaudit.cli.common as common
from memaudit.cli import cli, main
from memaudit.cli.common import HELP_GROUPS, help_group
from memaudit.config import OPTION, OPTIONS
from memaudit.testing.http_server import scripted_fake, serve
from memaudit.testing.release_fixture import write_release
from tests.cli.settings_reads import Reads
from tests.scoring.stand_in import write_stand_in

FLAGGED = {o.name for o in OPTIONS if o.flag}
# The settings a config file can give: a command that reads one reads the config file too.
FROM_FILE = {o.name for o in OPTIONS if o.key} | {"role_sections", "judge_sections"}


def commands(group: click.Group = cli, path: tuple[str, ...] = ()) -> dict[str, click.Command]:
    """Every command that runs, by its path (`bench import`)."""
    found = {}
    for name in group.list_commands(click.Context(group)):
        command = group.get_command(click.Context(group), name)
        if isinstance(command, click.Group):
            found |= commands(command, (*path, name))
        else:
            found[" ".join((*path, name))] = command
    return found


COMMANDS = commands()


def taken(command: click.Command) -> set[str]:
    return {p.name for p in command.params if p.name in FLAGGED}


def command_of(args: list) -> str:
    words = [str(a) for a in args[:2]]
    return " ".join(words) if " ".join(words) in COMMANDS else words[0]


def audit_grades(report: Path) -> bytes:
    """Grades of every target on the audit page, as the page exports them."""
    html = (report / "audit.html").read_text()
    marker = '<script type="application/json" id="audit-targets">'
    start = html.index(marker) + len(marker)
    targets = orjson.loads(html[start:html.index("</script>", start)])
    return orjson.dumps({"grader": "tour", "grades": [{"id": t["id"], "score": 0.5} for t in targets]})


def tour(work: Path, fake):
    """(store, args, exit code) in order; an args callable prepares what the steps after it need."""
    study, demo = work / "study.db", work / "demo.db"

    def inputs():
        (work / "mem.json").write_bytes(orjson.dumps([{"id": "f1", "content": "Prefers short answers.",
                                                      "category": "facts"}]))
        (work / "q.jsonl").write_text('{"id": "q1", "query": "short answers"}\n')
        write_release(work / "release", users=1, runs=("nomem_pooled_1",), turns=1)
        write_stand_in(work / "checkout")

    yield study, inputs, None
    yield study, ["bench", "validate", "sample"], 0
    yield study, ["generate", "--users", "1", "--out", work / "gen", "--evolving", "1"], 0
    yield study, ["bench", "import", work / "gen", "--name", "imported"], 0
    yield study, ["bench", "list"], 0
    yield study, ["bench", "validate", "imported"], 0
    yield study, ["rollout", "--bench", "sample", "--systems", "bm25,longctx_full,memt", "--users", "1",
                  "--tasks", "2", "--max-turns", "2", "--quiet"], 0
    yield study, ["score", "--mode", "both"], 0
    yield study, ["attribute", "--mode", "both"], 0
    yield study, ["rescore", "--variant", "v2", "--judge-model", "other-judge"], 0
    yield study, ["judge-check", "--per-category", "1"], 0
    yield study, ["generate-act", "--bench", "imported"], 0
    yield study, ["utilization"], 0
    yield study, ["replay"], 0
    # after replay: a variant whose batch is still out replays beyond what was recorded
    yield study, lambda: setattr(fake, "outcomes", ["failed"]), None  # the first batch fails: sent again
    yield study, ["rescore", "--variant", "v3", "--judge-model", "third-judge", "--batch"], 0
    yield study, ["batch", "status"], 0
    yield study, ["batch", "status"], 0
    yield study, ["batch", "collect"], 0
    yield study, ["batch", "resubmit"], 0
    yield study, ["tables", "--out", work / "tables", "--bootstrap", "10"], 0
    yield study, ["view", "--out", work / "report", "--audit", "2"], 0
    yield study, lambda: (work / "grades.json").write_bytes(audit_grades(work / "report")), None
    yield study, ["human", "import", work / "grades.json"], 0
    yield study, ["cost"], 0
    yield study, ["plan", "--bench", "sample", "--systems", "bm25", "--users", "1", "--shards", "2", "--emit",
                  "slurm", "--out", work / "jobs"], 0
    yield study, ["calls", "--limit", "1"], 0
    yield study, ["calls", "--embeddings"], 0
    yield study, ["cache", "stats"], 0
    yield study, ["export", "--out", work / "export"], 0
    yield study, ["import-release", work / "release"], 0
    yield study, ["memory", "search", "--system", "memt", "--store", work / "mem.json", "--queries",
                  work / "q.jsonl"], 0
    yield study, ["prompts", "import-published", work / "checkout", "--out", work / "pack"], 0
    yield study, ["prompts", "list"], 0
    yield study, ["check-adapter", "bm25"], 0
    yield study, ["systems"], 0
    for i in (1, 2):
        yield work / f"shard{i}.db", ["rollout", "--bench", "sample", "--systems", "nomem", "--users", "2",
                                      "--tasks", "1", "--max-turns", "1", "--quiet", "--shard", f"{i}/2"], 0
    yield study, ["merge", work / "shard1.db", work / "shard2.db", "--into", work / "merged.db"], 0
    yield study, ["cache", "merge", work / "shard1.db"], 0
    yield demo, ["demo", "--users", "1", "--tasks", "1", "--max-turns", "1", "--report", work / "demo-report"], 0
    yield study, ["serve", "--smoke"], 0
    yield study, ["serve", "--engine", "vllm", "--model", "a-model"], 2  # vLLM is not installed here


@pytest.fixture(scope="module")
def read(tmp_path_factory) -> dict[str, set[str]]:
    """Command path -> the settings it read over the tour (a setting a config file can give counts
    the config file as read too)."""
    work = tmp_path_factory.mktemp("tour")
    reads = Reads()
    found: dict[str, set[str]] = {}
    fake = scripted_fake()
    with pytest.MonkeyPatch.context() as patch, serve(fake) as url:
        settings_from = common.settings_from
        patch.setattr(common, "settings_from", lambda given, **extra: reads.traced(settings_from(given, **extra)))
        patch.setattr(common.Given, "__getitem__",  # a setting read as given (serve's --model, plan's --config)
                      lambda given, name: reads.names.add(name) or dict.__getitem__(given, name))
        patch.setattr("memaudit.llm.smoke.smoke_check", _smoke_answer)
        patch.setattr("memaudit.llm.dialects.vllm.shutil.which", lambda name: None)
        patch.setenv("MEMAUDIT_EMBED_BASE_URL", url)  # memory systems embed through the fake
        patch.chdir(work)
        everything = ["--base-url", url, "--model", "fake", "--embed-model", "fake-embed"]
        for store, args, expected in tour(work, fake):
            if expected is None:
                args()
                continue
            reads.names = set()
            code = run(["--db", store, *everything, *args])
            assert code == expected, f"memaudit {' '.join(map(str, args))} exited {code}"
            names = reads.names & FLAGGED | ({"config"} if reads.names & FROM_FILE else set())
            found.setdefault(command_of(args), set()).update(names)
    return found


async def _smoke_answer(log_path, threads=2):
    return "ok"  # the embedded model is not started here: what serve --smoke reads is what is counted


def run(args) -> int:
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        return exc.code or 0
    return 0


def test_the_tour_runs_every_command(read):
    assert sorted(set(COMMANDS) - set(read)) == [], "add a step that runs it to the tour"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_a_command_takes_exactly_the_settings_it_reads(path, read):
    took = taken(COMMANDS[path])
    flags = lambda names: sorted(OPTION[n].flag for n in names)  # noqa: E731
    assert flags(read.get(path, set()) - took) == [], f"`memaudit {path}` reads these but does not take them"
    assert flags(took - read.get(path, set())) == [], f"`memaudit {path}` takes these but never reads them"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_option_is_in_a_help_group(path):
    command = COMMANDS[path]
    ungrouped = [p.opts[0] for p in command.params if isinstance(p, click.Option) and help_group(command, p) is None]
    assert ungrouped == [], f"declare the help group of `memaudit {path}`'s options in HELP_GROUPS"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_lists_the_options_a_command_takes_under_their_groups(path, capsys):
    command = COMMANDS[path]
    assert run([*path.split(), "--help"]) == 0
    sections = help_sections(capsys.readouterr().out)
    expected = {f"{group.capitalize()} options": [p.opts[0] for p in command.params
                                                    if isinstance(p, click.Option) and help_group(command, p) == group]
                for group in HELP_GROUPS}
    assert {title: flags for title, flags in sections.items() if title != "Other options"} == \
        {title: flags for title, flags in expected.items() if flags}
    assert sections["Other options"] == ["-h"]


def help_sections(text: str) -> dict[str, list[str]]:
    """Section title -> the first flag of each option listed under it."""
    sections: dict[str, list[str]] = {}
    title = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            title = line[:-1]
            sections[title] = []
        elif title and line.startswith("  -"):
            sections[title].append(line.split()[0].rstrip(","))
    return sections



def test_a_setting_a_command_does_not_read_is_accepted_and_ignored_on_its_line_and_before_its_name(tmp_path, capsys):
    db = tmp_path / "s.db"
    assert run(["bench", "validate", "sample", "--db", db, "--base-url", "http://x.test/v1", "--model=m"]) == 0
    assert capsys.readouterr() == ("sample: ok\n", "")
    assert run(["--db", db, "--base-url", "http://x.test/v1", "--model", "m", "bench", "validate", "sample"]) == 0
    assert capsys.readouterr() == ("sample: ok\n", "")
    assert "--base-url" not in cli.get_command(click.Context(cli), "tables").get_help(click.Context(cli))
