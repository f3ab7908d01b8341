"""The safe-id pattern and the containment check every release path goes through."""
from __future__ import annotations

import pytest

from memaudit.errors import BadInput
from memaudit.ids import MAX_ID_LENGTH, check_id, id_problem, inside, is_safe_id


@pytest.mark.parametrize("value", ["user_001", "memt_memonly_pooled_50", "amem_pooled_50_retrieve", "u1",
                                   "run-2.1", "a" * MAX_ID_LENGTH])
def test_published_ids_are_safe(value):
    assert is_safe_id(value)


@pytest.mark.parametrize("value", ["", ".", "..", "../../../pwned", "a/b", "x/../../../../esc", ".hidden",
                                   "-flag", "with space", "tab\t", "a" * (MAX_ID_LENGTH + 1), "a" * 300,
                                   "naïve", None, 7])
def test_hostile_ids_are_refused(value):
    assert not is_safe_id(value)
    assert "not a safe id" in id_problem(value, "user id")


def test_check_id_names_where_the_id_came_from():
    with pytest.raises(BadInput) as info:
        check_id("a" * 300, "user id", file="banks.json", user="a" * 40)
    message = str(info.value)
    assert message.startswith("file banks.json, user ") and "300 chars" in message and "\n" not in message
    assert len(message) < 400  # a long id is shortened, not printed whole


def test_inside_follows_symlinks(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "secret.json").write_text("{}")
    (root / "link.json").symlink_to(tmp_path / "secret.json")
    (root / "dirlink").symlink_to(tmp_path)
    assert inside(root, root / "sub" / "new.json") == (root / "sub" / "new.json").resolve()
    for escaping in (root / "link.json", root / "dirlink" / "secret.json", root / ".." / "secret.json"):
        with pytest.raises(BadInput, match="resolves outside"):
            inside(root, escaping, label="x")
