"""The worked TOML (docs/models.md) for the published setup parses and means what it says."""
from __future__ import annotations

import re

from memaudit.config import REPO_ROOT, load_settings


def test_the_readme_config_of_the_published_setup(tmp_path):
    page = (REPO_ROOT / "docs" / "models.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", page, re.S) if "gpt-5.4-mini" in b)
    config = tmp_path / "published.toml"
    config.write_text(block)
    settings = load_settings(config=str(config), env={"OPENAI_API_KEY": "sk-test"})
    judge, policy = settings.role("recovery_judge"), settings.role("memt_policy")
    assert (judge.model, judge.backend, judge.reasoning_effort) == ("gpt-5.4-mini", "openai", "low")
    assert (policy.model, policy.backend, policy.api_key) == ("Mem-T-4B", "vllm", None)
    assert settings.role("agent").model == "gpt-5.4-mini" and settings.role("agent").reasoning_effort is None
    assert settings.role("agent").api_key == "sk-test"
