"""The scripted fake model's answers to the generator's roles (`memaudit serve --fake`): what a
model that follows the generator's prompts would write, so that `generate` (with `--evolving`) and
`generate-act` run offline and pass their own checks and `bench validate`. Each answer is read off
the request alone (its schema's name and shape, the prompt's text as a seed), like any model's:
the fake knows the prompts' written rules (2-4 sentences, at most 15 words, names copied from
the list, a situation rather than a trait), nothing of how a benchmark is scored. The words are
fixed and carry no meaning; a reader of the benchmark sees at once that a fake wrote it."""
from __future__ import annotations

import hashlib
import random

import orjson

from memaudit.roles import ACT_SCENARIO, BANK_GEN, CRITIC, EDITOR, TASK_GEN
from memaudit.testing.fake_openai import schema_of

# Situations the fake's opening messages describe: none names a trait, and none shares four words
# in a row with a `short` the fake writes (task generation rejects a task that quotes its target).
SITUATIONS = ("a free Saturday with a long list of errands", "a visit from relatives next month",
              "a small budget for the next few weeks", "a trip across the state in the spring",
              "a broken appliance in the kitchen", "a neighbourhood event that needs a plan")


def _rng(body: dict) -> random.Random:
    """Deterministic in the prompt, as the fake's other answers are."""
    return random.Random(hashlib.sha256(orjson.dumps(body["messages"])).digest())


def _words(name: str) -> str:
    return name.replace("_", " ")


def bank(body: dict) -> dict:
    """`count` different dimensions copied from the schema's list, a short of a few words and a
    two-sentence explanation each."""
    entries = schema_of(body)["properties"]["entries"]
    names = entries["items"]["properties"]["dimension"]["enum"]
    picked = _rng(body).sample(names, min(entries["minItems"], len(names)))
    return {"entries": [{"dimension": name, "short": f"holds a settled personal stance on {_words(name)}",
                         "explanation": "It grew out of years of everyday practice. It shows whenever the "
                                        "subject comes up at home or at work."}
                        for name in picked]}


def task(body: dict) -> dict:
    """An opening message about a neutral situation (task_gen, act_scenario: with a scene; editor)."""
    rng = _rng(body)
    answer = {"task": f"I have {rng.choice(SITUATIONS)} coming up (note {rng.randrange(1000):03d}). "
                      "Could you help me work out a sensible plan?",
              "rationale": "An ordinary request leaves room for the person's replies to show the rest."}
    scene = schema_of(body)["properties"].get("scene")
    return answer if scene is None else {**answer, "scene": rng.choice(scene["enum"])}


def critic(body: dict) -> dict:
    """Neutral or fishing, seeded by the task: the editor's path runs too."""
    fishing = _rng(body).random() < 0.3
    return {"guessed_trait": "a preference for planning" if fishing else "nothing in particular",
            "verdict": "fishing" if fishing else "neutral",
            "reason": "The request hints at how the person plans." if fishing else "It describes a situation only."}


def change(body: dict) -> dict:
    """A change of one bank entry: a new short (never the old one: the fake's bank shorts read
    otherwise) and two sentences on what brought it."""
    return {"op": "update", "short": "has recently changed their mind about this after a few weeks",
            "explanation": "A run of new experiences over the last weeks shifted it. The person now acts on "
                           "the new view."}


def change_review(body: dict) -> dict:
    return {"verdict": "accept", "reason": "A plausible change stated directly."}


# Schema name (the role, `:` sent as `_`) -> its answer. persona_gen and control_writer need none:
# any instance of their schema passes their checks.
HANDLERS = {BANK_GEN: bank, TASK_GEN: task, ACT_SCENARIO: task, EDITOR: task, CRITIC: critic,
            "bank_gen_change": change, "critic_change": change_review}
