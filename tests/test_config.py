"""Settings resolution: precedence, per-role sections, and bad config files."""
from __future__ import annotations

import pytest

from memaudit.config import EMBEDDED_MODEL, load_settings
from memaudit.errors import BadInput


def write(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_use_the_embedded_model():
    s = load_settings(env={})
    assert s.base_url is None and s.model == EMBEDDED_MODEL and s.backend == "llamacpp"
    assert s.cache == "rw" and s.concurrency == 32 and s.seed == 0 and s.embedded


def test_precedence_flag_over_env_over_config_over_default(tmp_path):
    config = write(tmp_path, 'base_url = "http://file/v1"\nmodel = "file-model"\nconcurrency = 3\nseed = 5\n'
                             'cache = "off"\n')
    env = {"MEMAUDIT_BASE_URL": "http://env/v1", "MEMAUDIT_CONCURRENCY": "4"}
    s = load_settings(config=config, env=env)
    assert s.base_url == "http://env/v1"          # env beats file
    assert s.concurrency == 4
    assert s.model == "file-model" and s.seed == 5 and s.cache == "off"   # file beats default
    s = load_settings(config=config, env=env, base_url="http://flag/v1", concurrency=9, cache="replay")
    assert s.base_url == "http://flag/v1" and s.concurrency == 9 and s.cache == "replay"  # flag beats all
    assert load_settings(env={"MEMAUDIT_CONFIG": str(config)}).model == "file-model"
    assert load_settings(env={"OPENAI_BASE_URL": "http://o/v1", "MEMAUDIT_MODEL": "m"}).base_url == "http://o/v1"


def test_remote_endpoint_needs_a_model_and_defaults_to_openai():
    with pytest.raises(BadInput, match="model"):
        load_settings(base_url="http://x/v1", env={})
    s = load_settings(base_url="http://x/v1/", model="m", env={})
    assert s.base_url == "http://x/v1" and s.backend == "openai"


def test_per_role_sections(tmp_path, monkeypatch):
    config = write(tmp_path, '[default]\nbase_url = "http://main/v1"\nmodel = "main"\n\n'
                             '[roles.memt_policy]\nbase_url = ["http://a/v1", "http://b/v1"]\nmodel = "Mem-T"\n'
                             'backend = "vllm"\ntemperature = 0.0\nmax_tokens = 512\ncontext_window = 32768\n'
                             'api_key_env = "MEMT_KEY"\n\n[roles.generator]\ntemperature = 1.1\n')
    monkeypatch.setenv("MEMT_KEY", "k-memt")
    s = load_settings(config=config, env={})
    policy = s.role("memt_policy")
    assert policy.base_urls == ("http://a/v1", "http://b/v1") and policy.model == "Mem-T"
    assert policy.backend == "vllm" and policy.max_tokens == 512 and policy.context_window == 32768
    assert policy.api_key == "k-memt"
    agent = s.role("agent")
    assert agent.base_urls == ("http://main/v1",) and agent.model == "main" and agent.backend == "openai"
    assert s.role("critic").temperature == 1.1      # fine-grained roles fall under their group
    assert s.role("memory:mem0_extract").model == "main"


def test_api_key_comes_from_the_environment_only():
    s = load_settings(base_url="http://x/v1", model="m", env={"OPENAI_API_KEY": "sk-1"})
    assert s.api_key == "sk-1" and "sk-1" not in repr(s)


@pytest.mark.parametrize("text, field", [
    ("[roles.agent\nmodel = 1", None),
    ('[roles.wizard]\nmodel = "m"\n', "roles.wizard"),
    ('[roles.agent]\ncolour = "blue"\n', "roles.agent"),
    ('[roles.agent]\nbackend = "tgi"\n', "roles.agent.backend"),
])
def test_bad_config_names_file_and_field(tmp_path, text, field):
    config = write(tmp_path, text)
    with pytest.raises(BadInput) as info:
        load_settings(config=config, env={})
    assert str(config) in str(info.value)
    if field:
        assert f"field {field}" in str(info.value)


def test_bad_values_are_refused(tmp_path):
    with pytest.raises(BadInput, match="missing.toml: not found"):
        load_settings(config=tmp_path / "missing.toml", env={})
    with pytest.raises(BadInput, match="cache"):
        load_settings(cache="sometimes", env={})
    with pytest.raises(BadInput, match="backend"):
        load_settings(base_url="http://x/v1", model="m", backend="tgi", env={})
    with pytest.raises(BadInput, match="concurrency"):
        load_settings(concurrency=0, env={})
    with pytest.raises(BadInput, match="integer"):
        load_settings(env={"MEMAUDIT_SEED": "abc"})
