"""The Redis store against a real redis-server: concurrency across processes, TTL, isolation,
connection forms and failures."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import numpy as np
import pytest
import redis

from nearduppipe import Match, StoreError, open_store
from nearduppipe.stores.redis import StoreUnavailable

from .support.redis_server import RedisServer, free_port

A = 0xFEDC_BA98_7654_3210


def _worker(
    url: str, prefix: str, fps: list[int], keys: list[str], barrier: object, out: object
) -> None:
    with open_store(url, prefix=prefix) as store:
        barrier.wait()  # type: ignore[attr-defined]
        kept = [
            key for fp, key in zip(fps, keys, strict=True) if store.check_and_add(fp, key) is None
        ]
    out.put(kept)  # type: ignore[attr-defined]


def test_eight_processes_keep_exactly_one_per_group(redis_server: RedisServer) -> None:
    rng = np.random.default_rng(8)
    n_groups, members, n_distinct, n_proc = 4000, 4, 24000, 8
    fps = rng.integers(
        0, np.iinfo(np.uint64).max, n_groups + n_distinct, dtype=np.uint64, endpoint=True
    )
    # pages far apart (> 3 bits between any two bases), so the expected answer is exact
    assert len(set(fps.tolist())) == len(fps)
    bases = fps[:n_groups].tolist()
    distinct = fps[n_groups:].tolist()
    per_proc: list[list[tuple[int, str]]] = [[] for _ in range(n_proc)]
    for g, base in enumerate(bases):
        bits = rng.choice(64, size=members, replace=False).tolist()
        for j in range(members):  # members pairwise 2 bits apart, each 1 bit from the base
            per_proc[(g + j) % n_proc].append((base ^ (1 << bits[j]), f"group{g}/m{j}"))
    for i, fp in enumerate(distinct):
        per_proc[i % n_proc].append((fp, f"distinct{i}"))
    # group g's members sit at the same position in their processes' queues: sent at once
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(n_proc), ctx.Queue()
    prefix = "test:eight-processes"
    with open_store(redis_server.url, prefix=prefix, reset=True):
        pass
    procs = [
        ctx.Process(
            target=_worker,
            args=(
                redis_server.url,
                prefix,
                [f for f, _ in items],
                [k for _, k in items],
                barrier,
                out,
            ),
        )
        for items in per_proc
    ]
    for p in procs:
        p.start()
    kept = [key for _ in procs for key in out.get(timeout=300)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    groups_kept = [k.split("/")[0] for k in kept if k.startswith("group")]
    assert sorted(groups_kept) == sorted(f"group{g}" for g in range(n_groups))  # one per group
    assert sum(k.startswith("distinct") for k in kept) == n_distinct  # every distinct page
    with open_store(redis_server.url, prefix=prefix) as store:
        assert len(store) == n_groups + n_distinct
        assert store.decision_count() == n_groups * (members - 1)


def test_ttl_forgets_after_one_to_two_periods(redis_server: RedisServer) -> None:
    with open_store(redis_server.url, prefix="test:ttl", reset=True, ttl=1) as store:
        assert store.check_and_add(A, "old") is None
        assert store.check_and_add(A ^ 1, "again") == Match("old", A, 1)
        time.sleep(2.1)  # two generations later
        assert store.check_and_add(A ^ 1, "recrawl") is None  # kept again
        assert len(store) == 1
    with pytest.raises(StoreError, match="ttl is supported by the redis store only"):
        open_store("memory:", ttl=5)


def test_reset_clears_only_its_prefix_and_layout_is_kept(redis_server: RedisServer) -> None:
    with (
        open_store(redis_server.url, prefix="test:a", reset=True) as a,
        open_store(redis_server.url, prefix="test:b", reset=True) as b,
    ):
        a.add(A, "a")
        b.add(A, "b")
    with open_store(redis_server.url, prefix="test:a", reset=True) as a:
        assert len(a) == 0
    with open_store(redis_server.url, prefix="test:b") as b:
        assert b.near(A) == [Match("b", A, 0)]
    with pytest.raises(StoreError, match="built for distance 3 with 5 blocks"):
        open_store(redis_server.url, prefix="test:b", distance=4)
    with open_store(
        redis_server.url + "&prefix=test:b"
        if "?" in redis_server.url
        else redis_server.url + "?prefix=test:b"
    ) as b:
        assert len(b) == 1  # prefix from the URI


def test_password_unix_socket_and_redaction(tmp_path: Path) -> None:
    secured = RedisServer(tmp_path / "pw", password="s3cret").start()
    try:
        with open_store(secured.url, prefix="test:pw") as s:
            s.add(A, "k")
            assert "s3cret" not in s.uri and ":***@" in s.uri
        wrong = secured.url.replace("s3cret", "nope")
        with pytest.raises(StoreError, match=r"(?i)password|auth"):
            open_store(wrong, prefix="test:pw")
    finally:
        secured.stop()
    unix = RedisServer(tmp_path / "unix", unix=True).start()
    try:
        with open_store(unix.url, prefix="test:unix") as s:
            assert s.check_and_add(A, "k") is None and len(s) == 1
    finally:
        unix.stop()


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1.*open failed"):
        open_store(f"redis://127.0.0.1:{free_port()}/0", timeout=1)


def test_server_killed_and_restarted(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "restart").start()
    try:
        store = open_store(server.url, prefix="test:restart", timeout=1)
        store.add(A, "k")
        server.kill()
        with pytest.raises(StoreUnavailable):
            store.check_and_add(A, "k2")
        server.start()  # same port; an empty server (no persistence in this test)
        assert store.check_and_add(A, "k3") is None  # reconnected by itself
        store.close()
    finally:
        server.stop()


def test_records_are_json_not_pickle(redis_server: RedisServer) -> None:
    with open_store(redis_server.url, prefix="test:plain", reset=True) as s:
        s.check_and_add(A, "https://例子.cn/1")
        s.check_and_add(A ^ 3, "https://例子.cn/2")
        decisions = list(s.decisions())
    assert decisions[0].matched_key == "https://例子.cn/1" and decisions[0].distance == 2
    client = redis.Redis.from_url(redis_server.url)
    for key in client.scan_iter(match="{test:plain}:*"):
        kind = client.type(key)
        if kind == b"hash" and key.endswith(b":e"):
            for value in client.hvals(key):
                assert value.startswith(b'["fedcba9876543210"')
        elif kind == b"list":
            for value in client.lrange(key, 0, -1):
                assert value.startswith(b"{")
    client.close()
