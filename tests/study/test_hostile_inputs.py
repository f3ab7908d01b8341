"""Issue 42, finding 6: price files and scheduler variables that are not what they should be are
one-line errors naming the file or variable, never a traceback, an `$inf` or raw escapes."""
from __future__ import annotations

import pytest

from memaudit.errors import BadInput
from memaudit.shards import Shard, from_scheduler
from memaudit.study.cost import load_prices

PRICE = ("input_per_mtok = {v}\ncached_input_per_mtok = 1.0\noutput_per_mtok = 1.0\n"
         "batch_input_per_mtok = 1.0\nbatch_output_per_mtok = 1.0\n")


@pytest.mark.parametrize("text, says", [
    ("x = " + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("[models.m]\n" + PRICE.format(v="1e308"), "from 0 to"),
    ('date = "2026\\u001b[2J"\n', "date must be a line of printable text"),
    ('source = "a\\nb"\n', "source must be a line of printable text"),
    ('[models."m\\u001b[31m"]\n' + PRICE.format(v="1.0"), "printable"),
])
def test_a_hostile_price_file_is_one_line(tmp_path, text, says):
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(BadInput) as refused:
        load_prices(path)
    message = str(refused.value)
    assert says in message and str(path) in message and "\n" not in message and "\x1b" not in message


@pytest.mark.parametrize("env, says", [
    ({"RANK": "1_0", "WORLD_SIZE": "16"}, "RANK must be a whole number, got '1_0'"),
    ({"RANK": "9" * 5000, "WORLD_SIZE": "16"}, "(5000 characters)"),
    ({"RANK": " 1", "WORLD_SIZE": "2"}, "whole number"),
    ({"SLURM_ARRAY_TASK_ID": "", "RANK": "0", "WORLD_SIZE": "2"}, "SLURM_ARRAY_TASK_ID is set but"),
])
def test_scheduler_variables_are_read_strictly(env, says):
    with pytest.raises(BadInput) as refused:
        from_scheduler(env)
    assert says in str(refused.value) and len(str(refused.value)) < 300


def test_plain_scheduler_variables_still_read():
    assert from_scheduler({"RANK": "3", "WORLD_SIZE": "4"}) == Shard(4, 4)
