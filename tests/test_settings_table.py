"""The settings table (memaudit/config.py OPTIONS) is the one declaration of a global setting: every
row resolves flag > environment > config file > default, its flag is a global option with the
row's type and help, and a bad value names where it came from. Enumerated: a new row is tested
without a line here."""
from __future__ import annotations

from pathlib import Path

import click
import pytest

from memaudit.cli import cli
from memaudit.cli.common import global_options
from memaudit.config import OPTION, OPTIONS, Choice, FilePath, Folder, Number, Settings, load_settings
from memaudit.errors import BadInput

RESOLVED = [o for o in OPTIONS if o.name != "config"]  # the config file is where the others are read from


def samples(option, tmp_path: Path) -> list:
    """Three distinct valid values of the row's kind: for the flag, the environment, the file."""
    kind = option.kind
    if isinstance(kind, Choice):
        return list(kind.choices[:3])
    if isinstance(kind, Number):
        step = 1 if kind.whole else 0.5
        return [kind.low + step, kind.low + 2 * step, kind.low + 3 * step]
    if isinstance(kind, Folder):
        folders = [tmp_path / name for name in ("flag", "env", "file")]
        for folder in folders:
            folder.mkdir(exist_ok=True)
        return folders
    if isinstance(kind, FilePath):
        return [tmp_path / name for name in ("flag.db", "env.db", "file.db")]
    if option.name.endswith("url"):
        return ["http://flag.test/v1", "http://env.test/v1", "http://file.test/v1"]
    return ["from-flag", "from-env", "from-file"]


def toml(key: str, value) -> str:
    text = f'"{value}"' if isinstance(value, (str, Path)) else repr(value)
    return f"[default]\n{key} = {text}\n"


@pytest.mark.parametrize("option", RESOLVED, ids=lambda o: o.name)
def test_every_setting_resolves_flag_then_environment_then_file_then_default(option, tmp_path):
    flag, env_value, file_value = samples(option, tmp_path)
    config = tmp_path / "c.toml"
    config.write_text(toml(option.key, file_value) if option.key else "")
    env = {option.env[0]: str(env_value)} if option.env else {}
    # a configured endpoint needs a model (and the model row is tested on the embedded model)
    base = {"model": "m"} if option.name == "base_url" else {} if option.name == "model" else \
        {"base_url": "http://x.test/v1", "model": "m"}

    def got(**given):
        return getattr(load_settings(config=config, **base, **given), option.name)

    assert got(env={}) == (file_value if option.key else option.default), "file, else the default"
    if option.env:
        assert got(env=env) == env_value, "the environment over the file"
    if option.flag:
        assert got(env=env, **{option.name: flag}) == flag, "the flag over everything"


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.flag], ids=lambda o: o.name)
def test_every_flagged_setting_is_a_global_option_and_rollout_takes_it(option):
    params = {p.name: p for p in cli.params}
    assert params[option.name].opts == [option.flag] and params[option.name].help == option.help_text
    command = cli.get_command(click.Context(cli), "rollout")
    assert option.name in {p.name for p in command.params}


def test_a_command_takes_the_settings_it_uses():
    @click.command()
    @global_options(uses=("db", "seed"))
    def tables():
        """Reads the store, and the seed of its bootstrap."""

    assert [p.name for p in tables.params] == ["db", "seed"]


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.env and isinstance(o.kind, (Number, Choice))],
                         ids=lambda o: o.name)
def test_a_bad_value_names_the_variable_it_came_from(option):
    with pytest.raises(BadInput) as refused:
        load_settings(base_url="http://x.test/v1", model="m", env={option.env[0]: "not-a-value"})
    assert f"field {option.env[0]}: expected" in str(refused.value)


def test_defaults_are_the_settings_fields():
    assert OPTION["timeout"].default == Settings.timeout == 600.0 and OPTION["config"].default is None
    assert "(default 600)" in OPTION["timeout"].help_text


def test_an_unknown_setting_is_a_programming_error():
    with pytest.raises(TypeError, match="colour"):
        load_settings(colour="blue", env={})
