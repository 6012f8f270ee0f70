"""The rule a store records (stores/scope.py recorded_rule, sqlite rule_of) on sqlite and Redis:
a damaged record is one line naming the store, never a traceback."""

from __future__ import annotations

import sqlite3
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest

from nearduppipe import open_store
from nearduppipe.stores import StoreError


def write_rule(store: str, raw: str) -> None:
    """Overwrite the store's recorded rule with ``raw``, as a damaged disk or a hand edit."""
    if store.startswith("redis"):
        import redis

        parts = urlsplit(store)
        query = parse_qs(parts.query)
        prefix = query.pop("prefix")[0]
        url = urlunsplit(parts._replace(query=urlencode(query, doseq=True)))
        redis.Redis.from_url(url).hset("{" + prefix + "}:meta", "rule", raw)
        return
    with sqlite3.connect(store) as db:
        db.execute("UPDATE neardup SET value = ? WHERE key = 'm:rule'", (raw,))


@pytest.mark.parametrize(
    "raw",
    [
        '{"radius": "eight"}',
        "[1, 2]",
        '{"similarity": 0.9}',
        "{not json",
        '{"radius": 99}',
    ],
)
def test_a_damaged_recorded_rule_is_one_line(store_uri: str, raw: str) -> None:
    with open_store(store_uri):
        pass
    write_rule(store_uri, raw)
    with pytest.raises(StoreError, match="rule") as e:
        open_store(store_uri).close()
    message = str(e.value)
    assert "\n" not in message and ("damaged" in message or "not valid JSON" in message)
    assert message.startswith((store_uri, "redis://")), message  # names the store
