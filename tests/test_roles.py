"""The role registry and the rubric: each fact is stated once and the rest is derived from it."""
from __future__ import annotations

from importlib import resources

from memaudit.config import PROMPTS_DIR, Settings
from memaudit.prompts import load_prompt
from memaudit.provenance import DIALOGUE_ROLES, ROLLOUT_ROLES
from memaudit.report.html import score_class, score_levels
from memaudit.roles import GROUPS, ROLE_SPECS, PHASES, embedded_max_tokens, prompts_of, role_group
from memaudit.types import RUBRIC


def test_every_call_role_names_a_configured_group_and_a_stage():
    for name, spec in ROLE_SPECS.items():
        assert spec.group in GROUPS and spec.phase in PHASES, name
    assert all(group.phase in PHASES for group in GROUPS.values())


def test_fine_roles_fall_under_their_group():
    assert [role_group(r) for r in ("oracle", "disclosure", "elicitation", "critic", "act_scenario", "act_judge",
                                    "memory:mem0_extract", "memt_policy", "agent")] == \
        ["attribution", "attribution", "attribution", "generator", "generator", "recovery_judge",
         "memory", "memt_policy", "agent"]


def test_stages_give_the_rollout_roles_and_prompts():
    assert ROLLOUT_ROLES == ("agent", "simulator", "pref_judge", "memory", "memt_policy")
    assert DIALOGUE_ROLES == ("agent", "simulator", "pref_judge")
    assert prompts_of("dialogue") == ("agent", "simulator", "pref_judge")
    assert prompts_of("utilization") == ("act_judge",)


def test_the_embedded_caps_apply_by_group():
    assert embedded_max_tokens()["recovery_judge"] == 96 and "memt_policy" not in embedded_max_tokens()
    assert Settings().role("act_judge").max_tokens_cap == 96  # an act judgment is a recovery_judge call


def test_the_rubric_grid_threshold_and_colours():
    assert RUBRIC.scores == (0.0, 0.25, 0.5, 0.75, 1.0) and RUBRIC.recovered == 0.75
    assert RUBRIC.is_recovered(0.75) and not RUBRIC.is_recovered(0.5)
    assert ROLE_SPECS["recovery_judge"].check({"score": 0.3}) == "score must be exactly one of [0.0, 0.25, 0.5, 0.75, 1.0]"
    assert ROLE_SPECS["recovery_judge"].check({"score": 1}) is None
    assert score_class(0.6) == "s50" and score_class(1.0) == "s100"


def test_the_judge_prompt_offers_exactly_the_rubric_levels():
    # The prompt is user-replaceable text (--prompts), so it is checked against the rubric, not built from it:
    # its level lines are the rubric's, in its order, meanings included (the audit page shows them).
    system = load_prompt("recovery_judge", PROMPTS_DIR).system
    listed = [line for line in system.splitlines() if line.startswith("- ")]
    assert listed == [f"- {level.score}: {level.meaning}" for level in RUBRIC.levels]


def test_the_rubric_derives_the_step_the_pass_marks_and_the_report_levels():
    assert RUBRIC.top == 1.0 and RUBRIC.step == 0.25 and RUBRIC.below(RUBRIC.recovered) == 0.5
    assert score_levels() == [[1.0, "s100"], [0.75, "s75"], [0.5, "s50"], [0.25, "s25"], [0.0, "s0"]]


def test_the_stylesheet_colours_every_rubric_level():
    css = (resources.files("memaudit.report") / "assets" / "style.css").read_text()
    assert all(f".{cls} {{ background:" in css for _, cls in score_levels())
