"""`--shard I/N`: the spec, the cell hash, and the shard filter in each stage."""
from __future__ import annotations

import pytest

from memaudit.cli import main
from memaudit.errors import BadInput
from memaudit.shards import WHOLE, Shard, cell_shard, parse_shard

EXPECTED = [1, 3, 3, 3]


def test_the_spec_is_one_based_and_bad_specs_are_refused():
    assert parse_shard("3/16") == Shard(3, 16) and parse_shard(" 1 / 1 ") == Shard(1, 1)
    assert parse_shard(None) == WHOLE
    for bad in ("0/3", "4/3", "1/0", "a/3", "3", "1/2/3", "-1/3", ""):
        with pytest.raises(BadInput, match="--shard"):
            parse_shard(bad)


def test_every_cell_is_in_exactly_one_shard_and_the_hash_is_stable():
    cells = [(s, f"user_{u:03d}") for s in ("nomem", "amem", "mem0") for u in range(1, 51)]
    shards = [Shard(i, 4) for i in range(1, 5)]
    assert all(sum(shard.holds(*cell) for shard in shards) == 1 for cell in cells)
    assert all(WHOLE.holds(*cell) for cell in cells)
    assert len({cell_shard(*cell, 4) for cell in cells}) == 4  # every shard gets work
    # the first 8 bytes of sha256("nomem\0user_001"), big-endian, modulo N, plus one: the same everywhere
    assert [cell_shard("nomem", "user_001", n) for n in (2, 3, 7, 16)] == EXPECTED


@pytest.mark.parametrize("command", [["rollout", "--bench", "sample", "--systems", "nomem"],
                                     ["score", "--mode", "dump_all"], ["attribute", "--mode", "dump_all"],
                                     ["utilization"]])
def test_a_bad_shard_is_one_line_naming_the_option(command, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--shard", "5/4", "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.count("\n") == 0 and "--shard 5/4" in err
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened
