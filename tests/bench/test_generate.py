"""`memaudit generate` with scripted role handlers on the fake server: the bank checks and their
feedback, the published task order, hints and single critic -> editor pass, memaudit's earlier
way as options, the blind critic, resume, failures and the written release."""
from __future__ import annotations

import functools
import hashlib
import re

import anyio
import orjson

import pytest

from memaudit.bench.generate import (CATEGORY_HINTS, BankEntry, GenerationOptions, bank_check, generate, sentences,
                                     task_check)
from memaudit.errors import BadInput
from memaudit.bench.instances import load_release_benchmark, read_release
from memaudit.bench.pool import load_pool
from memaudit.cli import main
from memaudit.runtime import open_runtime
from memaudit.types import BANK_COUNTS, CATEGORIES

FISHY = "not very handy"
FIRST_SKILL = load_pool()["skill_memory"][0].name  # the scripted bank always picks it; its task fishes


def user_text(body) -> str:
    """The rendered prompt's user message (not a later repair message)."""
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def field(text: str, label: str) -> str:
    return re.search(rf"{label}: (\S+)", text).group(1)


def persona(body):
    uid = re.search(r"(user_\d+)", user_text(body)).group(1)
    return {"age": 41, "age_group": "35-44", "gender": "female", "location": "Dayton, Ohio",
            "career": f"Dental hygienist ({uid})", "status": "Married, two kids", "values": ["family", "thrift", "honesty"],
            "life_attitude": "Takes things one step at a time.", "coping_style": "Goes for long walks.",
            "personal_stories": ["In 2015 she moved to Dayton for work.", "In 2019 she ran her first 10k."],
            "interests": ["gardening", "board games", "baking"]}


def bank(body):
    schema = body["response_format"]["json_schema"]["schema"]["properties"]["entries"]
    names = schema["items"]["properties"]["dimension"]["enum"]
    return {"entries": [{"dimension": n, "short": f"Handles {n.split('_')[0]} matters steadily at home",
                         "explanation": "It comes from years of daily practice. It shows when plans change."}
                        for n in names[:schema["minItems"]]]}


def task(body):
    text = user_text(body)
    dim = field(text, "dimension")
    h = hashlib.sha256(dim.encode()).hexdigest()[:6]
    scene = body["response_format"]["json_schema"]["schema"]["properties"]["scene"]["enum"][len(dim) % 11]
    if dim == FIRST_SKILL:
        return {"task": f"I'm {FISHY} with tools, so can you help me fix a shelf ({h})?",
                "rationale": "r", "scene": scene}
    return {"task": f"I have a free Saturday coming up with a list of errands ({h}). How should I plan the day?",
            "rationale": "A busy day invites the person to show their habits.", "scene": scene}


def critic(body):
    text = user_text(body)
    return {"guessed_trait": "handiness" if FISHY in text else "none", "reason": "because",
            "verdict": "fishing" if FISHY in text else "neutral"}


def editor(body):
    h = hashlib.sha256(user_text(body).encode()).hexdigest()[:6]
    return {"task": f"A shelf in my hallway is sagging ({h}). How should I go about it?", "rationale": "same scene"}


def scripted(fake):
    return (fake.on("persona_gen", persona).on("bank_gen", bank).on("task_gen", task)
            .on("critic", critic).on("editor", editor))


def run_generate(settings, fake, n, out, **kw):
    async def main_():
        async with open_runtime(settings, transport=fake.transport()) as rt:
            return await generate(rt, n, out, **kw)
    return anyio.run(main_)


def load(out, tasks_dir="tasks"):
    return load_release_benchmark(out, tasks_dir=tasks_dir)


def test_generate_writes_a_valid_release_with_reviews(settings, fake, tmp_path):
    out = tmp_path / "gen"
    report = run_generate(settings, scripted(fake), 2, out)
    assert report.written == ["user_001", "user_002"] and report.generated == report.written
    assert not report.failures and report.problems == []
    assert read_release(out)[1] == []
    bench = load(out)
    for user in bench.users:
        assert {c: len(user.entries(c)) for c in CATEGORIES} == BANK_COUNTS
        tasks = bench.tasks[user.id]
        assert len(tasks) == 31 and [t.index for t in tasks] == list(range(1, 32))
        # category blocks in bank order, as published
        assert [t.target_dimension for t in tasks] == [e.dimension for c in CATEGORIES for e in user.entries(c)]
        assert [t.target_category for t in tasks] == [c for c in CATEGORIES for _ in range(BANK_COUNTS[c])]
        assert {t.target_dimension for t in tasks} == {e.dimension for e in user.bank}
        for t in tasks:
            assert t.review["critic_verdicts"] and t.review["pipeline_note"]
            assert t.review["scene"]
    # the fishing task was edited once, in one critic -> editor pass, and not reviewed again
    (t,) = [t for t in bench.tasks["user_001"] if t.target_dimension == FIRST_SKILL]
    assert FISHY not in t.text and FISHY in t.review["original_task"]
    assert [v["verdict"] for v in t.review["critic_verdicts"]] == ["fishing"]
    assert len(t.review["revisions"]) == 1 and "not reviewed again" in t.review["pipeline_note"]
    assert "tasks blocks, with category hints, at most 1 edit(s)" in bench.source


def test_every_task_prompt_carries_its_categorys_hint(settings, fake, tmp_path):
    run_generate(settings, scripted(fake), 1, tmp_path / "gen")
    prompts = [user_text(b) for b in fake.requests if b["response_format"]["json_schema"]["name"] == "task_gen"]
    assert len(prompts) == 31
    for text in prompts:
        category = field(text, "category")
        assert CATEGORY_HINTS[category] in text
        assert sum(hint in text for hint in CATEGORY_HINTS.values()) == 1


def test_the_earlier_way_is_an_option(settings, fake, tmp_path):
    earlier = GenerationOptions("interleaved", hints=False, edits=3, recheck=True)
    run_generate(settings, scripted(fake), 1, tmp_path / "gen", options=earlier)
    bench = load(tmp_path / "gen")
    tasks = bench.tasks["user_001"]
    assert [t.target_category for t in tasks[:5]] == list(CATEGORIES)
    prompts = [user_text(b) for b in fake.requests if b["response_format"]["json_schema"]["name"] == "task_gen"]
    assert not any(hint in text for text in prompts for hint in CATEGORY_HINTS.values())
    (t,) = [t for t in tasks if t.target_dimension == FIRST_SKILL]
    assert [v["verdict"] for v in t.review["critic_verdicts"]] == ["fishing", "neutral"]
    assert t.review["pipeline_note"] == "neutral after 1 edit(s)"


def test_a_fishing_critic_forces_an_edit(settings, fake, tmp_path):
    fake = scripted(fake)
    fake.on("task_gen", lambda body: {**task(body), "task": f"I'm {FISHY} with tools; what shelf brackets "
                                                            f"should I buy ({len(user_text(body))})?"})
    report = run_generate(settings, fake, 1, tmp_path / "gen")
    assert report.edits == 31 and report.still_fishing == 0
    t = load(tmp_path / "gen").tasks["user_001"][0]
    assert FISHY not in t.text and t.review["revisions"][0]["task"] == t.text


def test_budget_spent_keeps_every_verdict(settings, fake, tmp_path):
    fake = scripted(fake)
    fake.on("critic", lambda body: {"guessed_trait": "x", "verdict": "fishing", "reason": "names it"})
    report = run_generate(settings, fake, 1, tmp_path / "gen", options=GenerationOptions(edits=3, recheck=True))
    assert report.still_fishing == 31 and report.edits == 31 * 3
    t = load(tmp_path / "gen").tasks["user_001"][4]
    assert len(t.review["critic_verdicts"]) == 3 + 1 and len(t.review["revisions"]) == 3
    assert t.review["pipeline_note"].startswith("budget spent")


def test_more_than_one_edit_needs_a_recheck():
    with pytest.raises(BadInput, match="--recheck"):
        GenerationOptions(edits=2)
    with pytest.raises(BadInput, match="order"):
        GenerationOptions("shuffled")


def test_the_critic_is_blind(settings, fake, tmp_path):
    run_generate(settings, scripted(fake), 1, tmp_path / "gen")
    bench = load(tmp_path / "gen")
    user = bench.users[0]
    critic_bodies = [b for b in fake.requests if b["response_format"]["json_schema"]["name"] == "critic"]
    assert len(critic_bodies) >= 31
    for body in critic_bodies:
        text = orjson.dumps(body["messages"]).decode()
        assert "Dental hygienist" not in text
        assert not any(e.short in text or e.dimension in text for e in user.bank)


def test_bank_check_failures_are_fed_back(settings, fake, tmp_path):
    fake = scripted(fake)
    calls = []

    def duplicating(body):
        calls.append(body)
        good = bank(body)
        if len(calls) == 1:
            good["entries"][1]["dimension"] = good["entries"][0]["dimension"]
        return good
    fake.on("bank_gen", duplicating)
    report = run_generate(settings, fake, 1, tmp_path / "gen")
    assert report.written == ["user_001"]
    assert "used twice" in calls[1]["messages"][-1]["content"]
    assert calls[1]["messages"][-2]["role"] == "assistant"


def test_a_user_whose_bank_never_passes_fails_and_is_counted(settings, fake, tmp_path):
    fake = scripted(fake)
    fake.on("bank_gen", lambda body: {"entries": [{**e, "short": "word " * 20} for e in bank(body)["entries"]]})
    report = run_generate(settings, fake, 1, tmp_path / "gen")
    assert report.written == [] and "user_001" in report.failures
    assert report.failures["user_001"].startswith("bank:") and "at most 15" in report.failures["user_001"]
    assert not (tmp_path / "gen" / "generation" / "user_001.json").exists()


def test_resume_skips_finished_users(settings, fake, tmp_path):
    out = tmp_path / "gen"
    run_generate(settings, scripted(fake), 2, out)
    before = (out / "benchmark_data" / "tasks" / "user_001.json").read_bytes()
    fake.requests.clear()
    report = run_generate(settings, fake, 3, out, tasks_dir="pooled_tasks")
    assert report.resumed == ["user_001", "user_002"] and report.generated == ["user_003"]
    persona_calls = [b for b in fake.requests if b["response_format"]["json_schema"]["name"] == "persona_gen"]
    assert len(persona_calls) == 1 and "user_003" in user_text(persona_calls[0])
    assert (out / "benchmark_data" / "pooled_tasks" / "user_001.json").read_bytes() == before
    assert not (out / "benchmark_data" / "tasks").exists()
    assert len(load(out, "pooled_tasks").users) == 3


def test_users_get_spread_out_starting_facts(settings, fake, tmp_path):
    run_generate(settings, scripted(fake), 4, tmp_path / "gen")
    hints = [user_text(b) for b in fake.requests if b["response_format"]["json_schema"]["name"] == "persona_gen"]
    ages = {field(h, "age group") for h in hints}
    assert len(hints) == 4 and len(ages) == 4


def test_generate_command(settings, fake, tmp_path, monkeypatch, capsys):
    import memaudit.runtime
    monkeypatch.setattr(memaudit.runtime, "open_runtime",
                        functools.partial(open_runtime, transport=scripted(fake).transport()))
    out = tmp_path / "cli-gen"
    argv = ["generate", "--users", "1", "--out", str(out), "--seed", "3", "--db", str(settings.db),
            "--base-url", "http://fake.test/v1", "--model", "fake-model"]
    main(argv)
    assert "1 users written" in capsys.readouterr().out
    assert read_release(out)[1] == []


def test_checks_in_code():
    names = {"mathematics_skill", "cooking_skill"}
    check = bank_check("skill_memory", 2, names, {"cooking_skill"})
    entry = lambda d, s="Good with numbers.", e="One. Two.": {"dimension": d, "short": s, "explanation": e}  # noqa
    assert "not in the list" in check({"entries": [entry("math"), entry("mathematics_skill")]})
    assert "used twice" in check({"entries": [entry("mathematics_skill"), entry("cooking_skill")]})
    assert "exactly 2" in check({"entries": [entry("mathematics_skill")]})
    check = bank_check("skill_memory", 1, names, set())
    assert "at most 15" in check({"entries": [entry("mathematics_skill", s="a " * 16)]})
    assert "2 to 4 sentences" in check({"entries": [entry("mathematics_skill", e="Only one.")]})
    assert "2 to 4 sentences" in check({"entries": [entry("mathematics_skill", e="A. B. C. D. E.")]})
    assert check({"entries": [entry("mathematics_skill")]}) is None
    assert sentences("He said \"go.\" Then he left! Why?") == 3

    target = BankEntry("skill_memory", "mathematics_skill", "Quick with fractions, shaky on compound interest",
                       "x")
    tcheck = task_check(target)
    assert tcheck({"task": "How do I split a bill among four friends?"}) is None
    assert "hidden dimension" in tcheck({"task": "My mathematics skill is rusty; can you help with a budget?"})
    assert "hidden answer" in tcheck({"task": "I'm shaky on compound interest. Should I take this loan?"})
    assert "directly" in tcheck({"task": "Tell me about a time you planned a trip. Then help me plan one."})
    assert "1 to 3" in tcheck({"task": "A. B. C. D."})


def test_generate_command_takes_the_earlier_way_as_options(settings, fake, tmp_path, monkeypatch, capsys):
    import memaudit.runtime
    monkeypatch.setattr(memaudit.runtime, "open_runtime",
                        functools.partial(open_runtime, transport=scripted(fake).transport()))
    argv = ["generate", "--users", "1", "--out", str(tmp_path / "g"), "--db", str(settings.db),
            "--base-url", "http://fake.test/v1", "--model", "fake-model"]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--edits", "3"])
    assert exit_info.value.code == 2 and "--recheck" in capsys.readouterr().err
    main([*argv, "--order", "interleaved", "--no-hints", "--edits", "3", "--recheck"])
    assert "tasks interleaved, no category hints, at most 3 edit(s)" in load(tmp_path / "g").source


def change(body):
    dim = field(user_text(body), "Dimension")
    return {"op": "update", "short": f"Lately switched approach on {dim} after a course",
            "explanation": "A short course changed the habit. It shows in how plans are made now."}


def test_evolving_entries_are_written_reviewed_and_spread_over_categories(settings, fake, tmp_path):
    rejected = []

    def change_critic(body):  # the first change of all is sent back once, with the review
        if not rejected:
            rejected.append(user_text(body))
            return {"verdict": "reject", "reason": "too generic"}
        return {"verdict": "accept", "reason": "a real change"}
    out = tmp_path / "gen"
    fake = scripted(fake).on("bank_gen_change", change).on("critic_change", change_critic)
    report = run_generate(settings, fake, 2, out, options=GenerationOptions(evolving=6))
    assert report.problems == [] and not report.failures
    bench = load(out)
    for user in bench.users:
        evolving = [e for e in user.bank if e.history]
        assert len(evolving) == 6 and len({e.category for e in evolving}) == 5
        task_of = {t.target_dimension: t.index for t in bench.tasks[user.id]}
        assert len({e.history[1].valid_from_task for e in evolving}) == 6  # one change per episode
        for e in evolving:
            first, new = e.history
            assert (first.op, first.valid_from_task) == ("add", 1) and new.op == "update"
            assert new.valid_from_task > task_of[e.dimension] and e.short == new.short
    records = [orjson.loads((out / "generation" / f"{uid}.json").read_bytes()) for uid in ("user_001", "user_002")]
    verdicts = [r["verdict"] for record in records for reviews in record["change_reviews"].values() for r in reviews]
    assert sorted(verdicts) == ["accept"] * 12 + ["reject"]
    assert "6 evolving entries per user" in bench.source


def test_evolving_count_is_checked():
    with pytest.raises(BadInput, match="--evolving"):
        GenerationOptions(evolving=32)
