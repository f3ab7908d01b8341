"""A key passed in the base URL's query (`…/v1?api-key=K`, as some hosts take it): every request
goes to its route below the base path with the query after it (not to `/v1?api-key=K/files`), and
the key reaches no stored URL, error or log line, as `user:key@` does not (issue 33 item 6)."""
from __future__ import annotations

import pytest

from memaudit.errors import redact_url, scrub
from memaudit.llm.tokens import server_root
from memaudit.llm.transport import Address
from memaudit.testing.fake_batches import FakeBatchAPI
from memaudit.testing.http_server import serve
from tests.llm.test_batch import batch_rounds, cli
from tests.scoring.recorded import script

SECRET = "SECRET-in-the-query"


class KeyInQuery(FakeBatchAPI):
    """A host that takes its key only as a query parameter: a request without it is refused."""

    def __init__(self):
        super().__init__()
        self.paths: list[tuple[str, str]] = []

    def reply_http(self, method, path, headers, content):
        self.paths.append((method, path))
        if f"api-key={SECRET}" not in path.partition("?")[2]:
            return self._status(401, {"error": {"message": f"no key in {path}"}})
        return super().reply_http(method, path, headers, content)


def test_routes_are_joined_below_the_base_path_with_the_query_after_them():
    address = Address.of(f"http://user:pw@host:8/v1/?api-key={SECRET}")
    assert str(address.to("/files")) == f"http://host:8/v1/files?api-key={SECRET}"
    assert str(address.to("/batches", {"limit": "100"})) == f"http://host:8/v1/batches?api-key={SECRET}&limit=100"
    assert address.basic.startswith("Basic ") and address.headers({"Authorization": "Bearer k"}) == {
        "Authorization": "Bearer k"}
    assert server_root(f"http://host:8/v1?api-key={SECRET}") == f"http://host:8/?api-key={SECRET}"


@pytest.mark.parametrize("text", [f"http://h/v1?api-key={SECRET}", f"http://u:{SECRET}@h/v1?x=1",
                                  f"POST https://h/v1/files?api-key={SECRET} refused"])
def test_a_query_is_redacted_like_userinfo(text):
    assert SECRET not in redact_url(text) and SECRET not in scrub(text) and "***" in scrub(text)


def test_a_key_in_the_query_reaches_every_route_and_never_the_store(tmp_path, capsys):
    fake = script(KeyInQuery())
    db = tmp_path / "study.db"
    with serve(fake) as url:
        keyed = f"{url}?api-key={SECRET}"
        code, _, err = cli(capsys, db, keyed, "rollout", "--bench", "sample", "--systems", "longctx_full",
                           "--users", "1", "--tasks", "2", "--max-turns", "1")
        assert code == 0, err
        batch_rounds(capsys, db, keyed, ["score", "--mode", "dump_all"])
        code, out, err = cli(capsys, db, keyed, "batch", "status", "--json")
        assert code == 0 and SECRET not in out + err, err
        assert "?***" in out
    routes = {(method, path.partition("?")[0]) for method, path in fake.paths}
    assert {("POST", "/v1/chat/completions"), ("POST", "/v1/files"), ("POST", "/v1/batches")} <= routes
    assert all(f"api-key={SECRET}" in path for _, path in fake.paths) and fake.status_counts[401] == 0
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())  # the store and its side files
    assert stored and SECRET.encode() not in stored


def test_an_unreachable_endpoint_with_a_key_in_its_query_is_named_without_it(tmp_path, capsys):
    code, out, err = cli(capsys, tmp_path / "s.db", f"http://127.0.0.1:9/v1?api-key={SECRET}", "rollout", "--bench",
                         "sample", "--systems", "longctx_full", "--users", "1", "--tasks", "1")
    assert code == 2 and SECRET not in out + err and "127.0.0.1:9" in err
