"""A stand-in for a checkout of the published code: the same file layout and constant names as
the published runner, with our own text (the published text never enters this repository). The
rollout files (simulation.py, agents/) are in tests/rollout/stand_in_rollout.py.
Python format templates, as the published code has them: `{name}` fills, `{{`/`}}` are braces."""
from __future__ import annotations

from pathlib import Path

from tests.rollout.stand_in_rollout import AGENTS, AMEM, SIMULATION

SCORER = '''"""stand-in scorer"""
import json

_CATEGORY_GUIDE = {
    "skill_memory": (
        "STAND-IN GUIDE skill: what the person can do. "
        "NOT what they know."
    ),
    "knowledge_memory": "STAND-IN GUIDE knowledge: what they know of the world. NOT abilities.",
    "episodic_memory": "STAND-IN GUIDE episodic: dated events with consequences. NOT traits.",
    "self_model": "STAND-IN GUIDE self: beliefs about oneself. NOT real skill.",
    "assistance_preference": "STAND-IN GUIDE preference: how help should be delivered. NOT content.",
}

_SLOT_FILL_PROMPT = """\\
STAND-IN READER. Notes as JSON:
{memories_json}

Kind: {category}
Kind means: {category_guide}
Slot: {dimension}

Reply only with {{"label": "<value or unknown>", "reason": "<evidence>"}}
"""

_SLOT_JUDGE_PROMPT = """\\
STAND-IN JUDGE.
Slot: {dimension}
Meaning: {explanation}
Truth: {ground_truth}
Guess: {predicted}
Reply only with {{"score": <0|0.25|0.5|0.75|1>, "reason": "<sentence>"}}
"""
'''

ATTRIBUTION = '''"""stand-in attribution"""

_DISCLOSURE_PROMPT = """\\
STAND-IN DISCLOSURE.
Slot: {dimension}
Short: {gt_short}
Long: {gt_explanation}
TASK: {task_text}

{transcript}
Reply only with {{"disclosed": true|false, "evidence": "<quote>", "reason": "<sentence>"}}\\
"""

_ORACLE_PROMPT = """\\
STAND-IN ORACLE.
Slot: {dimension}
Short: {gt_short}
Long: {gt_explanation}
Task: {task_text}
Reply only with {{"can_invite": true|false, "reason": "<sentence>"}}\\
"""

_SUBCLASS_PROMPT = """\\
STAND-IN SUBCLASS.
Slot: {dimension}
Short: {gt_short}
Long: {gt_explanation}
TASK: {task_text}

{transcript}
Reply only with {{"category": "A|B", "reason": "<sentence>", "evidence": "<quote>"}}\\
"""
'''


def write_stand_in(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "scorer.py").write_text(SCORER)
    (root / "failure_attribution.py").write_text(ATTRIBUTION)
    (root / "simulation.py").write_text(SIMULATION)
    for path, source in (AGENTS | AMEM).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(source)
    return root


def constants(root: Path) -> dict:
    """The stand-in's constants, read the way the published code would use them."""
    scope: dict = {}
    for name in ("scorer.py", "failure_attribution.py"):
        exec(compile((root / name).read_text(), name, "exec"), scope)  # our own stand-in text
    return scope
