"""The Redis store (format 3) against a real redis-server: races across processes, the layout
kept in the store, key safety, TTL, bounded decisions, format-1 stores, connections and
failures. The model check against MemoryStore is tests/stores/redis/test_redis_model.py."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.index.search import Layout, table_key
from nearduppipe.stores import backend_for
from nearduppipe.stores.base import (
    BadKey,
    Decision,
    Entry,
    Match,
    StoreError,
    StoreUnavailable,
    Verdict,
)
from nearduppipe.stores.redis import RedisBackend
from nearduppipe.stores.redis.keys import key as store_key
from nearduppipe.stores.redis.keys import redact
from nearduppipe.stores.redis.store import RedisStore, open_single

from ...support.forked import exit_code, fork
from ...support.redis_server import RedisServer, free_port, redis_major, skip_unless_redis

A = 0xFEDC_BA98_7654_3210
WA = (1 << 511) | 0x1234_5678_9ABC
B = A ^ 0xFFFF_FFFF_0000_0000
WB = ((1 << 512) - 1) ^ WA


def _client(server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(server.url)


def _flip(x: int, bits: list[int]) -> int:
    for b in bits:
        x ^= 1 << b
    return x


# -- races ------------------------------------------------------------------------------------
def _worker(
    url: str, prefix: str, items: list[tuple[int, int, str]], barrier: Any, out: Any
) -> None:
    store = RedisStore(url, prefix=prefix)
    barrier.wait()
    statuses = [(key, store.check(Fingerprints(fp, wide), key).status) for fp, wide, key in items]
    store.close()
    out.put(statuses)


@pytest.mark.slow
def test_eight_processes_keep_one_entry_per_key_and_one_page_per_group(
    redis_server: RedisServer,
) -> None:
    rng = random.Random(8)
    n_proc, n_groups = 8, 100
    per_proc: list[list[tuple[int, int, str]]] = [[] for _ in range(n_proc)]
    for g in range(n_groups):
        base, wide = rng.getrandbits(64), rng.getrandbits(512)
        for q in range(n_proc):
            # at the same position in every queue: a near-duplicate of the group (its own key,
            # 1-3 bits and a few wide bits away) and a revisit of one shared key
            fp = _flip(base, rng.sample(range(64), rng.randint(1, 3)))
            per_proc[q].append((fp, _flip(wide, rng.sample(range(512), 10)), f"g{g}/p{q}"))
            per_proc[q].append((base, wide, f"g{g}/revisit"))
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(n_proc), ctx.Queue()
    prefix = "test:race"
    RedisStore(redis_server.url, prefix=prefix, reset=True).close()
    procs = [
        ctx.Process(target=_worker, args=(redis_server.url, prefix, items, barrier, out))
        for items in per_proc
    ]
    for p in procs:
        p.start()
    results = [s for _ in procs for s in out.get(timeout=120)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    kept: dict[str, list[str]] = {}
    for key, status in results:
        if status in ("new", "changed"):
            kept.setdefault(key.split("/")[0], []).append(key)
    # every page of a group is a near-duplicate of every other: exactly one survivor
    assert sorted(kept) == sorted(f"g{g}" for g in range(n_groups))
    assert all(len(v) == 1 for v in kept.values()), [v for v in kept.values() if len(v) > 1][:3]
    # a revisit of the shared key finds its own entry (unchanged) or the group's survivor
    assert {s for k, s in results if k.endswith("/revisit")} <= {"new", "unchanged", "duplicate"}
    assert "changed" not in {s for _, s in results}
    with RedisStore(redis_server.url, prefix=prefix) as store:
        entries = list(store.entries())
        assert len(entries) == len({e.key for e in entries}) == len(store) == n_groups
        assert store.decision_count() == sum(s == "duplicate" for _, s in results)


# -- the layout lives in the store -------------------------------------------------------------
def test_rule_and_layout_are_read_from_the_store(redis_server: RedisServer) -> None:
    url, prefix = redis_server.url, "test:layout"
    with RedisStore(url, Rule(similarity=0.95, radius=8), prefix=prefix, reset=True) as s:
        s.add(Fingerprints(A, WA), "a")
    with RedisStore(url, prefix=prefix) as s:
        assert s.rule == Rule(similarity=0.95, radius=8) and s.layout.n_blocks == 3
        assert s.layout.blocks is None  # created without blocks: each run picks its table set
    with RedisStore(url, prefix=prefix + ":3", reset=True, blocks=3) as s:
        assert s.layout.blocks == 3
    with RedisStore(url, prefix=prefix + ":3") as s:
        assert s.layout.blocks == 3  # an explicit count stays, the default's included
    redis.Redis.from_url(url).hdel(store_key(prefix, "meta"), "blocks_auto")  # as older stores
    with RedisStore(url, prefix=prefix) as s:
        assert s.layout.blocks == 3 and len(s) == 1
    with RedisStore(url, name="news", params={"client_name": "nd-test"}) as s:
        assert s.prefix == "neardup:news" and s._client.client_getname() == "nd-test"
    # the user's client options (NEARDUP_REDIS_PARAMS) win over the store's defaults
    params = {"socket_timeout": 7, "socket_connect_timeout": 3, "health_check_interval": 5}
    with RedisStore(url, prefix=prefix, timeout=1, params=params) as s:
        kw = s._client.connection_pool.connection_kwargs
        assert {k: kw[k] for k in params} == params and len(s) == 1
    with pytest.raises(StoreError, match=r"NEARDUP_REDIS_PARAMS .*option redis-py.*'no_such'"):
        RedisStore(url, prefix=prefix, params={"no_such": 1})
    with pytest.raises(StoreError, match=r"\?ttl= must be a number of seconds, got 'abc'"):
        RedisStore(url + "?ttl=abc", prefix=prefix)
    with RedisStore(url + "?prefix=" + prefix, name="other") as s:
        assert s.prefix == prefix and len(s) == 1  # the URI's prefix wins
        assert s.near(Fingerprints(A, WA)) == [Match("a", A, 0, 0)]
    with pytest.raises(StoreError, match=r"radius 8 with 3 blocks.*radius 6.*rule=None"):
        RedisStore(url, Rule(radius=6), prefix=prefix)
    with pytest.raises(StoreError, match=r"radius 8 with 3 blocks.*with 10 blocks"):
        RedisStore(url, Rule(radius=8), prefix=prefix, blocks=10)
    with pytest.raises(StoreError, match=r"radius 8 with 3 blocks.*with 4 blocks"):
        RedisStore(url, prefix=prefix, blocks=4)
    client = _client(redis_server)
    before = client.hgetall(f"{{{prefix}}}:meta")
    with RedisStore(url, Rule(similarity=0.9), prefix=prefix, read_only=True) as s:
        assert s.rule.similarity == 0.9  # used for this run only: read-only writes nothing
    assert client.hgetall(f"{{{prefix}}}:meta") == before
    with RedisStore(url, Rule(similarity=0.9), prefix=prefix):
        pass  # a threshold, not layout: the store's new default
    with RedisStore(url, prefix=prefix) as s:
        assert s.rule == Rule(similarity=0.9, radius=8)  # (the store's radius: none was asked)
    client.close()


def test_read_only_never_writes(redis_server: RedisServer) -> None:
    client = _client(redis_server)
    keys_before = sorted(client.keys("*"))
    with RedisStore(redis_server.url, prefix="test:ro-fresh", read_only=True) as s:
        assert len(s) == 0 and s.near(A) == [] and s.get("k") is None
        assert list(s.entries()) == [] and list(s.decisions()) == []
        for write in (
            lambda: s.check(A, "k"),
            lambda: s.add(A, "k"),
            lambda: s.remove("k"),
            lambda: s.import_records([Entry("k", A, 1.0)], []),
        ):
            with pytest.raises(StoreError, match="read-only"):
                write()
    assert sorted(client.keys("*")) == keys_before
    with pytest.raises(StoreError, match="contradict"):
        RedisStore(redis_server.url, prefix="test:ro-fresh", read_only=True, reset=True)
    client.close()


# -- key safety ---------------------------------------------------------------------------------
HOSTILE = [
    "a",
    "a}:t0",
    "a}:g1",
    "a*",
    "a?",
    "[a]",
    "a\\",
    "{x}",
    "a:b",
    "a b",
    "例子 ü",
    "a-z",
    "^a",
    "a}",
    "a}:g1:e",
]


def _dump_all(client: redis.Redis) -> dict[bytes, bytes]:
    keys: list[bytes] = client.keys("*")  # type: ignore[assignment]
    return {k: client.dump(k) for k in keys}  # type: ignore[misc]


def test_reset_deletes_only_its_own_prefix(redis_server: RedisServer) -> None:
    client = _client(redis_server)
    client.flushdb()
    for i, p in enumerate(HOSTILE):
        with RedisStore(redis_server.url, prefix=p, reset=True) as s:
            s.check(Fingerprints(A ^ i, WA), "k1", text="x")
            s.check(Fingerprints(A ^ i ^ 1, WA ^ 1), "k2")  # a decision
            s.add(Fingerprints(~A & (2**64 - 1), None), "k3", job="j")
    # a format-1 store among them (generation keys found by SCAN must stay exact)
    _write_format1(client, "a}:g1", [("old", A, 1.0)])
    for p in HOSTILE:
        own = re.compile(
            re.escape(("{" + p + "}:").encode())
            + rb"(meta|k|e|d|r|n|u|v|j|w|b[0-9a-f]{4}|t\d+|seq|g\d+:(e|t\d+:[0-9a-f]+))\Z"
        )
        before = _dump_all(client)
        with RedisStore(redis_server.url, prefix=p, reset=True) as s:
            assert len(s) == 0 and s.decision_count() == 0
        after = _dump_all(client)
        touched = {k for k in before if after.get(k) != before[k]} | (set(after) - set(before))
        assert touched and all(own.match(k) for k in touched), (p, touched)
        assert [k for k in after if own.match(k)] == [("{" + p + "}:meta").encode()]
    client.close()


def test_bad_keys_are_refused_before_anything_is_sent(redis_server: RedisServer) -> None:
    client = _client(redis_server)
    with RedisStore(redis_server.url, prefix="test:badkey", reset=True) as s:
        calls = client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        for bad in ("bad \ud800 key", "", "x" * 70_000):
            for op in (lambda k: s.check(A, k), lambda k: s.add(A, k), s.get, s.remove):
                with pytest.raises(BadKey):
                    op(bad)
        assert client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0) == calls
        assert len(s) == 0
    client.close()


# -- TTL and bounded decisions -------------------------------------------------------------------
def test_ttl_with_an_injected_clock(redis_server: RedisServer) -> None:
    now = [1_000_000.0]
    client = _client(redis_server)
    with RedisStore(
        redis_server.url, prefix="test:ttl", reset=True, ttl=100, clock=lambda: now[0]
    ) as s:
        assert s.check(Fingerprints(A, WA), "old").status == "new"
        now[0] += 99.9
        assert s.check(Fingerprints(A ^ 1, WA), "near").status == "duplicate"
        assert s.check(Fingerprints(A, WA), "old").status == "unchanged"  # refreshed
        now[0] += 100.5
        assert s.check(Fingerprints(A ^ 1, WA), "near").status == "new"  # "old" expired
        assert s.get("old") is not None  # expired, held until 2 * ttl
        now[0] += 100.5
        assert s.check(Fingerprints(A ^ 3, WA ^ 3), "near").status == "new"  # own one expired
        assert s.get("old") is None  # 201 s old: deleted by the sweep of that write
        buckets = [k for k in client.keys("{test:ttl}:b*")]
        assert buckets and all(0 < client.pttl(k) <= 200_000 for k in buckets)  # data leaves
        assert 0 < client.pttl("{test:ttl}:n") <= 200_000  # Redis if left alone
        assert client.pttl("{test:ttl}:meta") == -1
        now[0] += 150
        for i in range(20):
            s.add(Fingerprints(A ^ (1 << 40) ^ i, None), f"filler{i}")
        assert s.get("near") is not None  # 150 s old
        now[0] += 150
        assert s.prune() == 20 + 1
        assert list(s.entries()) == [] and len(s) == 0
    client.close()


def test_decisions_stay_bounded(redis_server: RedisServer) -> None:
    client = _client(redis_server)
    with RedisStore(
        redis_server.url, Rule.paper(3), prefix="test:bounded", reset=True, max_decisions=1000
    ) as s:
        s.add(A, "original")
        for i in range(3000):  # real drops trim in the same script call
            assert s.check(A ^ (1 << (i % 64)), f"copy{i}").status == "duplicate"
        assert s.decision_count() == 1000
        drops = (
            Decision(f"imported{i}", A, "original", A, 1, 5.0 + i, "some text " * 5)
            for i in range(100_000)
        )
        s.import_records([], drops)
        assert s.decision_count() == 1000
        assert s.counters()["decisions_total"] == 103_000
        assert s.counters()["decisions_trimmed"] == 102_000
        assert [d.key for d in s.decisions()][-1] == "imported99999"
        used = client.memory_usage("{test:bounded}:d")
        assert used is not None and used < 1000 * 200, used
    client.close()


# -- retries are applied once ----------------------------------------------------------------------
def test_a_retried_check_is_not_applied_twice(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RedisStore(redis_server.url, prefix="test:retry", reset=True) as s:
        s.add(Fingerprints(A, WA), "a")
        monkeypatch.setattr("os.urandom", lambda n: b"T" * n)
        first = s.check(Fingerprints(A ^ 1, WA), "b")
        again = s.check(Fingerprints(A ^ 1, WA), "b")  # the same call token: a retry
        assert first == again and first.status == "duplicate"
        assert s.decision_count() == 1 and s.counters()["decisions_total"] == 1
        monkeypatch.undo()
        assert s.check(Fingerprints(A ^ 1, WA), "b").status == "duplicate"
        assert s.decision_count() == 2


def test_calls_are_packed_byte_for_byte_as_redis_py_packs_them() -> None:
    """The hot calls skip redis-py's packer (`stores/redis/wire.py`'s `bulk`, and what does not change
    within a thread packed once): the bytes on the wire are what redis-py would send."""
    from redis.connection import Connection

    from nearduppipe.stores.redis.wire import Packed, _bytes, bulk

    args: list[Any] = ["check", 1.7e9 + 0.1, "", 100_000, 8, -1, 3, "ab:1", b"\x00\xff" * 4]
    args += [0, "", "https://例え.jp/ü?q=1&x=\U0001f600", b"", 2**64 - 1, b"x" * 7000, 0.1]
    ours = b"*%d\r\n" % len(args) + bulk(map(_bytes, args))
    assert ours == b"".join(Connection().pack_command(*args))
    fixed = bulk(map(_bytes, args[:8]))  # packed in two parts, as a check's call is
    joined = Packed(len(args), fixed + bulk(map(_bytes, args[8:])))
    assert b"*%d\r\n" % joined.size + joined.body == ours


# -- format-1 stores ---------------------------------------------------------------------------------
def _write_format1(client: redis.Redis, prefix: str, entries: list[tuple[str, int, float]]) -> None:
    """A store as format 1 wrote it (k = 3, 5 blocks, 128 buckets per hash, JSON records)."""

    def k(*parts: str) -> str:
        return "{" + prefix + "}:" + ":".join(parts)

    client.hset(k("meta"), mapping={"format": "1", "bits": "64", "distance": "3", "blocks": "5"})
    for seq, (key, fp, t) in enumerate(entries, 1):
        client.incr(k("seq"))
        member = fp.to_bytes(8, "big") + seq.to_bytes(8, "big")
        for i, parts in enumerate(Layout(distance=3, blocks=5).tables()):
            value = table_key(fp, parts)
            client.hset(k("g0", f"t{i}", f"{value >> 7:x}"), str(value & 127), member)
        client.hset(k("g0", "e"), str(seq), json.dumps([f"{fp:016x}", t, key, f"text {key}"]))
    client.rpush(
        k("d"),
        json.dumps(
            {
                "key": "gone",
                "fp": f"{A ^ 1:016x}",
                "match": entries[0][0],
                "match_fp": f"{entries[0][1]:016x}",
                "distance": 1,
                "t": 3.5,
            }
        ),
    )


@pytest.mark.parametrize("asked", [None, "default", "aliases"])
def test_format1_store_read_only_then_migrated(
    redis_server: RedisServer, asked: str | None
) -> None:
    """Migrated with the opener's rule; aliases only when asked, not by their default (which
    is for new stores): then format 4, which earlier releases refuse."""
    rule = {
        None: None,
        "default": Rule(aliases=True, aliases_given=False),
        "aliases": Rule(aliases=True),
    }[asked]
    client = _client(redis_server)
    prefix = "test:f1"
    RedisStore(redis_server.url, prefix=prefix, reset=True).close()
    client.delete("{test:f1}:meta")
    B = A ^ 0xFF00FF00  # 16 bits from A
    _write_format1(client, prefix, [("a", A, 1.0), ("b", B, 2.0), ("a", A ^ 0xF, 3.0)])
    before = _dump_all(client)
    with RedisStore(redis_server.url, prefix=prefix, read_only=True) as s:
        assert s.format_version == 1 and len(s) == 2 and s.rule.extraction == 1
        assert [(e.key, e.fingerprint, e.stored_at, e.text, e.wide) for e in s.entries()] == [
            ("b", B, 2.0, "text b", None),
            ("a", A ^ 0xF, 3.0, "text a", None),
        ]
        assert s.near(A ^ 0xF ^ 0x7) == [Match("a", A ^ 0xF, 3, None)]  # legacy rule: <= 3
        assert s.near(A ^ 0xF ^ 0xF0) == []  # 4 bits: not without a wide fingerprint
        assert [d.matched_key for d in s.decisions()] == ["a"]
        with pytest.raises(StoreError, match="read-only"):
            s.check(A, "c")
    assert _dump_all(client) == before  # nothing written
    want = 4 if asked == "aliases" else 3
    with RedisStore(redis_server.url, rule, prefix=prefix) as s:
        assert s.format_version == want and len(s) == 2 and s.rule.aliases is (asked == "aliases")
        assert s.rule.extraction == 1  # (not the opener's newest: its pages are version 1's)
        assert client.hget("{test:f1}:meta", "format") == str(want).encode()
        assert not [k for k in client.keys("{test:f1}:g*")] and not client.exists("{test:f1}:seq")
        assert s.get("a") == Entry("a", A ^ 0xF, 3.0, "text a", None, None)
        assert s.check(A ^ 0xF ^ 0x7, "c").status == "duplicate"
        assert s.check(Fingerprints(B ^ 0xF, WA), "d").status == "new"  # 4 bits, legacy rule
        assert [d.key for d in s.decisions()] == ["gone", "c"]
        assert s.counters()["decisions_total"] == 2
    with RedisStore(redis_server.url, prefix=prefix, read_only=True) as s:
        assert s.rule.extraction == 1


# -- connections ----------------------------------------------------------------------------------
def test_redaction_of_every_password_form() -> None:
    for uri in (
        "redis://:s3cret@h:1/0",
        "redis://user:s3cret@h:1/0",
        "rediss://h:1/0?password=s3cret&prefix=x",
        "unix:///tmp/r.sock?db=0&password=s3cret",
    ):
        out = redact(f"failed on {uri}: s3cret", uri)
        assert "s3cret" not in out and "***" in out, out


def test_password_unix_socket_and_messages(tmp_path: Path) -> None:
    secured = RedisServer(tmp_path / "pw", password="s3cret").start()
    try:
        with RedisStore(secured.url, prefix="test:pw") as s:
            s.add(A, "k")
            assert "s3cret" not in s.uri and ":***@" in s.uri
        with pytest.raises(StoreError, match=r"(?i)password|auth") as e:
            RedisStore(secured.url.replace("s3cret", "n0pe-s3cret"), prefix="test:pw")
        assert "s3cret" not in str(e.value)
    finally:
        secured.stop()
    unix = RedisServer(tmp_path / "unix", unix=True).start()
    try:
        with RedisStore(unix.url, prefix="test:unix") as s:
            assert s.check(A, "k").status == "new" and len(s) == 1
    finally:
        unix.stop()


def test_unreachable_server_and_options() -> None:
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1.*open failed"):
        RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=1)
    with pytest.raises(StoreError, match=r"unknown options.*'distance'"):
        open_single("redis://127.0.0.1:1/0", distance=3)
    # open_store("redis://…") reaches open_single through the scheme's backend object
    for scheme in ("redis", "rediss", "unix"):
        backend = backend_for(f"{scheme}://h")
        assert isinstance(backend, RedisBackend) and backend.factory is open_single


def test_each_thread_keeps_a_connection_and_survives_losing_it(redis_server: RedisServer) -> None:
    """A check's call keeps its thread's connection (no pool checkout per call): threads do
    not share one, a connection the server dropped is reconnected and the call retried, the
    connections of threads that ended go back to the pool, and a forked child uses its own."""
    admin = _client(redis_server)
    with RedisStore(redis_server.url, prefix="test:held", reset=True) as s:
        wire, seen, errors = s._shard.wire, [], []
        s.add(Fingerprints(A, WA), "a")
        # no thread ends before all hold theirs: an ended thread's connection goes back to the
        # pool and a thread that starts late takes it (ids equal, CI saw it once)
        together = threading.Barrier(4)

        def work(t: int) -> None:
            rng = random.Random(t)
            try:
                for i in range(50):
                    fps = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
                    assert s.check(fps, f"t{t}/{i}").status == "new"
                seen.append(id(wire._kept.get(wire._pool)))
                together.wait(timeout=60)
            except BaseException as e:  # (reported below)
                errors.append(e)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(set(seen)) == 4 and len(wire._kept) == 4
        # the server drops every client but the admin one: the next call reconnects
        assert admin.client_kill_filter(_type="normal", skipme=True) >= 4
        assert s.check(Fingerprints(A ^ 3, WA), "after-kill").status == "duplicate"
        assert len(wire._kept) == 1  # the four ended threads' connections were given back
        released = s._client.connection_pool._available_connections
        assert len(released) >= 3  # four given back, one taken again by this thread
        pid = fork()
        if pid == 0:  # the child: its own connection, the parent's left alone
            try:
                far = Fingerprints(0x0F0F_0F0F_0F0F_0F0F, WA)
                ok = s.check(far, "child").status == "new"
                os._exit(0 if ok and len(wire._kept) == 1 else 1)
            except BaseException:
                os._exit(2)
        code = exit_code(pid)
        if code is None:
            pytest.fail("the forked child did not finish its check in 60 s")
        assert code == 0
        assert s.check(Fingerprints(A ^ 7, WA), "parent").status == "duplicate"
        assert s.get("child") is not None and len(s) == 1 + 4 * 50 + 1
    admin.close()


def test_server_killed_and_restarted(tmp_path: Path) -> None:
    # (with persistence: restarted without it, the store is gone, tests/faults/test_redis_loss.py)
    aof = ("--appendonly", "yes", "--appendfsync", "always")
    server = RedisServer(tmp_path / "restart", extra=aof).start()
    try:
        store = RedisStore(
            server.url, prefix="test:restart", timeout=1, params={"client_name": "nd"}
        )
        store.add(A, "k")
        server.kill()
        with pytest.raises(StoreUnavailable):
            store.check(A, "k2")
        server.start()  # same port, the same store (read back from its AOF)
        assert store.check(A, "k3").status == "duplicate"  # reconnected by itself
        store.close()
        with pytest.raises(StoreError, match="closed"):
            len(store)
    finally:
        server.stop()


def test_a_check_sees_what_other_clients_did_since_its_index_read_the_log(
    redis_server: RedisServer,
) -> None:
    """Each client's index holds the log up to a position; the script adds what was logged
    since, drops what was removed, sends a client far behind to read the log first, and a
    client whose log was compacted or reset meanwhile reloads it."""
    url, prefix = redis_server.url, "test:log"
    with RedisStore(url, prefix=prefix, reset=True) as a, RedisStore(url, prefix=prefix) as b:
        b.add(Fingerprints(A ^ 1, WA), "raced")  # logged after a read the log
        assert a._log.pos == 0
        assert a.check(Fingerprints(A, WA), "mine") == Verdict(
            "duplicate", Match("raced", A ^ 1, 1, 0)
        )
        assert a._log.pos == 1  # the reply carried the member
        b.remove("raced")  # a's index still has it: the script skips it
        assert a.check(Fingerprints(A ^ 2, WA), "mine").status == "new"
        # far behind: 5,000 entries logged by b, one of them near the query
        rng = random.Random(5)
        far = [
            Entry(f"far{i}", rng.getrandbits(64), 1.0, None, rng.getrandbits(512))
            for i in range(5000)
        ]
        far[4321] = Entry("near-far", B, 1.0, None, WB ^ 7)
        b.import_records(far, [])
        assert a.check(Fingerprints(B ^ 1, WB), "q1") == Verdict(
            "duplicate", Match("near-far", B, 1, 3)
        )
        assert a._log.pos == 5002 and b._log.pos == 0  # a read the log, then called
        # compaction by b (dead members: "raced" and the 4,999 removed now)
        for e in far:
            if e.key != "near-far":
                b.remove(e.key)
        epoch = a._log.epoch
        assert b.compact()
        assert b._log.pos == 2  # the live entries: mine and near-far (q1 was a duplicate)
        assert a.near(Fingerprints(B ^ 3, WB)) == [Match("near-far", B, 2, 3)]
        assert a._log.epoch != epoch and a._log.pos == 2
        # reset and rebuilt under the same prefix by another client: a reloads
        with RedisStore(url, prefix=prefix, reset=True) as c:
            c.add(Fingerprints(A ^ 4, WA), "after-reset")
        assert a.check(Fingerprints(A ^ 6, WA), "q2") == Verdict(
            "duplicate", Match("after-reset", A ^ 4, 1, 0)
        )


# -- the function library ---------------------------------------------------------------------
def _calls(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_checks_call_the_function_library_and_load_it_again_when_it_is_gone(
    tmp_path: Path,
) -> None:
    """On Redis 7 the hot calls are FCALLs of the store's library, loaded by the first call;
    a server that lost it (FUNCTION FLUSH: as after a restart without persistence) gets it
    again; a server whose FUNCTION command is renamed away (as an ACL that denies it) gets
    the same Lua as a script, with the same verdicts."""
    skip_unless_redis(7, "function libraries")  # (first: 6.2 refuses to rename FUNCTION)
    server = RedisServer(tmp_path / "f")
    bare = RedisServer(tmp_path / "nf", extra=("--rename-command", "FUNCTION", ""))
    try:
        server.start()
        bare.start()
        client = _client(server)
        verdicts = {}
        for where in (server, bare):
            c = _client(where)
            store = RedisStore(where.url, prefix="test:fn", reset=True)
            fcalls, evalshas = _calls(c, "fcall"), _calls(c, "evalsha")  # (opening: a script)
            got = [store.check(Fingerprints(A, WA), "a").status]
            if where is server:  # the library is gone: the next check loads it again
                assert c.function_list(library=store._shard.wire._program.function)
                c.function_flush()
            got.append(store.check(Fingerprints(A ^ 0b101, WA ^ 0b11), "b").status)
            got.append(store.check(Fingerprints(B, WB), "c").status)
            got.append(store.check(Fingerprints(A, WA), "a").status)
            got.append(store.check(Fingerprints(B ^ 1, WB), "c").status)
            assert [m.key for m in store.near(Fingerprints(A ^ 1, WA))] == ["a"]
            verdicts[where.port] = got
            assert store._shard.wire.functions is (where is server)
            # 6 calls: as FCALLs, plus the two refused (the first, the one after the flush);
            # on the bare server one FCALL refused, then EVALSHAs (one refused: NOSCRIPT)
            assert _calls(c, "fcall") - fcalls == (8 if where is server else 1)
            assert _calls(c, "evalsha") - evalshas == (0 if where is server else 7)
            store.close()
            c.close()
        assert verdicts[server.port] == verdicts[bare.port]
        assert verdicts[server.port] == ["new", "duplicate", "new", "unchanged", "unchanged"]
        client.close()
    finally:
        server.stop()
        bare.stop()


@pytest.mark.parametrize("denied", ["-fcall -fcall_ro", "-function"])
def test_an_account_denied_functions_calls_the_script(
    redis_server: RedisServer, denied: str
) -> None:
    """An ACL that denies FCALL, or FUNCTION LOAD, leaves the account the same Lua as a
    script (redis-py strips NOPERM from the message: the fallback must not depend on it)."""
    skip_unless_redis(7, "function libraries, and ACLs that deny them", redis_server.binary)
    admin = _client(redis_server)
    user = "nd-" + denied.replace(" ", "").replace("-", "no-")
    url = f"redis://{user}:pw@127.0.0.1:{redis_server.port}/0"
    store = None
    try:
        admin.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "&*", "+@all")
        admin.execute_command("ACL", "SETUSER", user, *denied.split())
        admin.function_flush()  # (else an account denied FUNCTION LOAD calls the library loaded)
        store = RedisStore(url, prefix=f"test:acl:{user}", reset=True)
        assert store.check(Fingerprints(A, WA), "a").status == "new"
        assert store.check(Fingerprints(A ^ 1, WA), "b").status == "duplicate"
        assert [m.key for m in store.near(Fingerprints(A, WA))] == ["a"]
        assert store._shard.wire.functions is False
    finally:
        if store is not None:
            store.close()
        admin.execute_command("ACL", "DELUSER", user)
        admin.close()


@pytest.mark.parametrize("server", ["redis_server", "redis6_server"])
def test_out_of_memory_checks_are_unavailable_and_reads_and_removals_work(
    request: pytest.FixtureRequest, server: str
) -> None:
    """A server over maxmemory refuses writes: a check is StoreUnavailable (the failure
    policy's business, not a crash); searching, reading and forgetting pages still work.
    Redis 7 (the function library) and 6.2 (the script, whose error wraps the OOM reply)."""
    redis_server: RedisServer = request.getfixturevalue(server)
    admin = _client(redis_server)
    store = RedisStore(redis_server.url, prefix="test:oom", reset=True)
    try:
        assert store.check(Fingerprints(A, WA), "a").status == "new"
        assert store.check(Fingerprints(B, WB), "b").status == "new"
        admin.config_set("maxmemory", 1)
        with pytest.raises(StoreUnavailable, match="maxmemory"):
            store.check(Fingerprints(B ^ 0xF0F0_0000, WB), "c")
        assert [m.key for m in store.near(Fingerprints(A ^ 1, WA))] == ["a"]
        assert store.get("a") is not None
        assert store.remove("a") is True
        assert store.get("a") is None
        functions = redis_major(redis_server.url) >= 7
        if functions:  # the library lost while memory is full: not now, but not "no functions"
            admin.function_flush()
            with pytest.raises(StoreUnavailable, match="maxmemory"):
                store.near(Fingerprints(A ^ 1, WA))
        admin.config_set("maxmemory", 0)
        assert store.check(Fingerprints(A ^ 1, WA), "d").status == "new"  # "a" was forgotten
        assert store._shard.wire.functions is functions
    finally:
        admin.config_set("maxmemory", 0)
        store.close()
        admin.close()


# -- format 3: the server's listpack limits -------------------------------------------------------
def test_an_open_for_writing_warns_when_buckets_would_not_stay_compact(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis's default hash-max-listpack-value (64) turns every bucket of 130-byte records
    into a hash table: an open for writing says which setting to raise (and works anyway), a
    read-only open says nothing; under the advised limit a bucket really is a listpack."""
    client = _client(redis_server)
    prefix, url = "test:listpack", "https://news.example.com/2026/11/26/an-article-about-it-"
    try:
        for value, warned, encoding in ((64, True, b"hashtable"), (256, False, b"listpack")):
            client.config_set("hash-max-listpack-value", value)
            caplog.clear()
            with RedisStore(redis_server.url, prefix=prefix, reset=True) as s:
                for i in range(5):
                    s.add(Fingerprints(A ^ i, WA), f"{url}{i:04d}")
                assert s.get(f"{url}0003") is not None
            said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
            assert bool(said) == warned and all("hash-max-listpack-value 256" in m for m in said)
            bucket = client.keys("{test:listpack}:b*")[0]
            client.hset(bucket, "x" * 6, b"r" * 120)  # (a record's size: the encoding it gets)
            assert client.object("encoding", bucket) == encoding
            caplog.clear()
            RedisStore(redis_server.url, prefix=prefix, read_only=True).close()
            assert not [r for r in caplog.records if r.levelname == "WARNING"]
    finally:
        client.config_set("hash-max-listpack-value", 256)


def test_an_open_for_writing_of_a_large_store_advises_more_entries_per_bucket(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Past ~12 M entries (room to double: ~25 M) the fullest of the 65,536 buckets may pass
    512 records, Redis's limit here, and become a hash table for good: an open for writing
    names the value to set, from the store's own count; a read-only open says nothing."""
    client = _client(redis_server)
    prefix = "test:listpack-size"
    with RedisStore(redis_server.url, prefix=prefix, reset=True) as s:
        s.add(Fingerprints(A, WA), "https://a.example/1")
    for live, advised in ((10_000_000, None), (20_000_000, 768), (50_000_000, 1792)):
        client.hset(f"{{{prefix}}}:meta", "live", live)  # (as if the store held that many)
        caplog.clear()
        RedisStore(redis_server.url, prefix=prefix).close()
        said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        if advised is None:
            assert not said
        else:
            assert len(said) == 1 and f"'hash-max-listpack-entries {advised}'" in said[0]
            caplog.clear()
            RedisStore(redis_server.url, prefix=prefix, read_only=True).close()
            assert not [r for r in caplog.records if r.levelname == "WARNING"]
    client.close()


def test_a_key_whose_address_another_key_holds_takes_its_second(redis_server: RedisServer) -> None:
    """Two page keys with one xxh3 digest (~3e-6 in a 10 M store) cannot be made on purpose:
    the other key's record is put at the first address by hand. The key then lives at its
    second address (check, get, revisit, remove); with both taken it is refused, nothing
    written."""
    client = _client(redis_server)
    prefix = "test:collide"

    def place(address: bytes, record: bytes) -> None:
        client.hset("{" + prefix + "}:b" + address[:2].hex(), address[2:], record)

    with RedisStore(redis_server.url, prefix=prefix, reset=True) as s:
        s.add(Fingerprints(B, WB), "other")
        other = s._names.address("other")
        assert other is not None
        stolen = client.hget("{" + prefix + "}:b" + other[:2].hex(), other[2:8])
        assert stolen is not None
        mine = s._names.address("mine")
        assert mine is not None
        place(mine[:8], stolen)  # "other"'s record at "mine"'s first address
        assert s.check(Fingerprints(A, WA), "mine").status == "new"
        entry = s.get("mine")
        assert entry is not None and entry.fingerprint == A
        assert client.hget("{" + prefix + "}:b" + mine[8:10].hex(), mine[10:16]) is not None
        assert s.check(Fingerprints(A, WA), "mine").status == "unchanged"
        assert s.check(Fingerprints(A ^ 1, WA), "near mine").status == "duplicate"
        assert s.remove("mine") and s.get("mine") is None
        place(mine[8:16], stolen)  # both addresses held by another key
        before = _dump_all(client)
        with pytest.raises(StoreError, match="COLLISION"):
            s.check(Fingerprints(A ^ 0xFFFF_0000_FFFF, None), "mine")
        assert _dump_all(client) == before


def test_a_client_of_a_store_reset_under_it_encodes_its_hosts_anew(
    redis_server: RedisServer,
) -> None:
    """Host prefixes are stored once, by id, and each client caches the ids: after another
    client resets the store (ids assigned again from 1), a check from the first client must
    not write its host under the id the new store gave another host."""
    prefix = "test:reset-ids"
    with RedisStore(redis_server.url, prefix=prefix, reset=True) as a:
        assert a.check(Fingerprints(A, WA), "https://a.example/1").status == "new"
        with RedisStore(redis_server.url, prefix=prefix, reset=True) as b:
            assert b.check(Fingerprints(B, WB), "https://b.example/1").status == "new"
            assert a.check(Fingerprints(~A & (2**64 - 1), None), "https://a.example/2").status == (
                "new"
            )
            assert a.near(Fingerprints(B, WB), exclude="https://b.example/1") == []
            keys = sorted(e.key for e in b.entries())
            assert keys == ["https://a.example/2", "https://b.example/1"]


def test_a_crawls_lease_is_a_field_of_the_meta_and_run_out_ones_are_cleared(
    redis_server: RedisServer,
) -> None:
    """Store.lease on Redis (docs/verdicts.md): ``lease:<job part in hex>`` in the meta until
    its end; released at 0; the lease of a crawl killed without releasing it goes at the next
    lease call after it ran out, so killed crawls leave nothing behind."""
    now = [1_000_000.0]
    store = open_single(redis_server.url, prefix="test:lease", reset=True, clock=lambda: now[0])
    client = redis.Redis.from_url(redis_server.url)
    meta = store_key("test:lease", "meta")

    def leases() -> dict[bytes, float]:
        fields = client.hgetall(meta)
        return {k: float(v) for k, v in fields.items() if k.startswith(b"lease:")}

    try:
        store.lease("killed-crawl", 60)
        store.lease("running-crawl", 60)
        assert sorted(leases().values()) == [now[0] + 60] * 2
        store.lease("running-crawl", 0)  # released at close
        assert len(leases()) == 1
        now[0] += 61  # the killed crawl's lease ran out
        store.lease("next-crawl", 60)
        assert list(leases().values()) == [now[0] + 60]
    finally:
        store.close()
        client.close()
