"""Racing processes on a Redis Cluster store (tests/stores/redis/test_redis_cluster.py and
benchmarks/cluster_bench.py): groups of near-duplicates, one member of each group at the same
position in every process's queue, and distinct pages between them. A module of its own so
the spawned workers import only what they need."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
from typing import Any

from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.stores.redis.cluster import RedisClusterStore
from nearduppipe.stores.redis.format3 import decode_record


def _flip(x: int, n: int, bits: int, rng: random.Random) -> int:
    for b in rng.sample(range(bits), n):
        x ^= 1 << b
    return x


def race_queues(
    groups: int, distinct: int, procs: int, seed: int, shared: bool = False
) -> list[list[tuple[int, int, str]]]:
    """Per process: one near-duplicate of every group (its own key, at the same position in
    every queue) and its share of the distinct pages, interleaved; with ``shared``, also the
    group's page under one key that every process checks at once (a revisit race)."""
    rng = random.Random(seed)
    queues: list[list[tuple[int, int, str]]] = [[] for _ in range(procs)]
    per = distinct // procs
    for g in range(groups):
        base, wide = rng.getrandbits(64), rng.getrandbits(512)
        for q in range(procs):
            fp = _flip(base, rng.randint(1, 3), 64, rng)
            if shared:
                queues[q].append((base, wide, f"g{g}/shared"))
            queues[q].append((fp, _flip(wide, 10, 512, rng), f"g{g}/p{q}"))
            for i in range(per * g // groups, per * (g + 1) // groups):
                queues[q].append((rng.getrandbits(64), rng.getrandbits(512), f"d{q}/{i}"))
    return queues


def race_worker(
    url: str,
    prefix: str,
    items: list[tuple[int, int, str]],
    barrier: Any,
    out: Any,
    pending_timeout: float = 30.0,
    die_after: int = 0,
) -> None:
    """Check ``items`` once every process is ready; with ``die_after``, SIGKILL itself a few
    milliseconds after that many checks (so mid-check, at a moment no clock decides)."""
    store = RedisClusterStore(url, prefix=prefix, pending_timeout=pending_timeout)
    store.near(Fingerprints(0, 0))  # read the logs before the start
    barrier.wait()
    statuses = []
    for n, (fp, wide, key) in enumerate(items):
        if die_after and n == die_after:
            threading.Timer(0.003, os.kill, (os.getpid(), signal.SIGKILL)).start()
        statuses.append((key, store.check(Fingerprints(fp, wide), key).status))
    store.close()
    out.put(statuses)


def run_race(
    url: str,
    prefix: str,
    groups: int,
    distinct: int,
    procs: int = 8,
    shared: bool = False,
    rule: Rule | None = None,
) -> dict[str, Any]:
    """Race ``procs`` processes; returns the kept counts, the statuses and the time taken."""
    queues = race_queues(groups, distinct, procs, seed=groups, shared=shared)
    ps, out = _started(race_worker, url, prefix, queues, rule)
    t0 = time.perf_counter()
    results = [s for _ in ps for s in out.get(timeout=600)]
    took = time.perf_counter() - t0
    for p in ps:
        p.join(timeout=60)
    kept: dict[str, int] = {}
    for key, status in results:
        if status in ("new", "changed"):
            name = key.split("/")[0] if key.startswith("g") else key
            kept[name] = kept.get(name, 0) + 1
    with RedisClusterStore(url, prefix=prefix, read_only=True) as s:
        stored, decisions = len(s), s.decision_count()
        keys = [e.key for e in s.entries()]
        self_matches = sum(d.key == d.matched_key for d in s.decisions())
    return {
        "checks": len(results),
        "seconds": took,
        "groups_kept_once": sum(kept.get(f"g{g}") == 1 for g in range(groups)),
        "distinct_kept": sum(
            kept.get(k) == 1 for _, _, k in (x for q in queues for x in q) if k.startswith("d")
        ),
        "stored": stored,
        "unique_keys": len(set(keys)) == len(keys),
        "decisions": decisions,
        "duplicates": sum(status == "duplicate" for _, status in results),
        "self_matches": self_matches,
        "statuses": sorted({status for _, status in results}),
        "exitcodes": [p.exitcode for p in ps],
    }


def _started(
    target: Any, url: str, prefix: str, queues: list[list[tuple[int, int, str]]], rule: Rule | None
) -> tuple[list[Any], Any]:
    """A new store of ``rule`` at ``prefix``, and one spawned process per queue running
    ``target``, all past the start barrier; returns them and their output queue."""
    RedisClusterStore(url, rule, prefix=prefix, reset=True).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(len(queues) + 1), ctx.Queue()
    ps = [ctx.Process(target=target, args=(url, prefix, q, barrier, out)) for q in queues]
    for p in ps:
        p.start()
    barrier.wait(timeout=120)
    return ps, out


def race_with_a_kill(
    url: str, prefix: str, groups: int, distinct: int, procs: int
) -> dict[str, Any]:
    """Race ``procs`` processes, the first SIGKILLed by itself a third of the way through its
    checks, while the others still check near pages (pending entries live 2 s); returns what
    the store holds per group and what the others answered."""
    queues = race_queues(groups, distinct, procs, seed=groups + 1)
    RedisClusterStore(url, prefix=prefix, reset=True).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(procs + 1), ctx.Queue()
    ps = [
        ctx.Process(
            target=race_worker,
            args=(url, prefix, q, barrier, out, 2.0, len(q) // 3 if i == 0 else 0),
        )
        for i, q in enumerate(queues)
    ]
    for p in ps:
        p.start()
    barrier.wait(timeout=120)
    t0 = time.perf_counter()
    results = [s for _ in ps[1:] for s in out.get(timeout=300)]
    took = time.perf_counter() - t0
    for p in ps:
        p.join(timeout=60)
    with RedisClusterStore(url, prefix=prefix, read_only=True) as s:
        keys = [e.key for e in s.entries()]
    per_group = [sum(k.startswith(f"g{g}/") for k in keys) for g in range(groups)]
    survivors = {k for k, _ in results}
    return {
        "per_group": sorted(set(per_group)),
        "survivors_distinct_kept": all(k in keys for k in survivors if k.startswith("d")),
        "survivor_statuses": sorted({status for _, status in results}),
        "killed_exitcode": ps[0].exitcode,
        "seconds": took,
        "stored_unique": len(set(keys)) == len(keys),
    }


def replay_worker(
    url: str, prefix: str, items: list[tuple[int, int, str]], barrier: Any, out: Any
) -> None:
    store = RedisClusterStore(url, prefix=prefix)
    store.near(Fingerprints(0, 0))  # read the logs before the start
    barrier.wait()
    verdicts: list[tuple[str, str, str | None]] = []
    try:
        for fp, wide, key in items:
            v = store.check(Fingerprints(fp, wide), key)
            verdicts.append((key, v.status, v.match.key if v.match else None))
    except Exception as e:  # (said at once, not after the parent's wait runs out)
        verdicts = [("", "error", repr(e))]
    store.close()
    out.put(verdicts)


def race_in_order(
    url: str, prefix: str, pages: list[tuple[str, Fingerprints]], procs: int, rule: Rule
) -> tuple[dict[str, tuple[str, str | None]], list[str]]:
    """``pages`` dealt round-robin to ``procs`` racing processes on a store of ``rule``
    (aliases on: every page, kept or dropped, then holds a record carrying its check's
    ticket). Returns each key's (status, matched key) and the keys in ticket order: the
    order whose replay the verdicts must equal."""
    queues: list[list[tuple[int, int, str]]] = [[] for _ in range(procs)]
    for i, (key, f) in enumerate(pages):
        queues[i % procs].append((f.fp, f.wide or 0, key))
    ps, out = _started(replay_worker, url, prefix, queues, rule)
    got = [v for _ in ps for v in out.get(timeout=600)]
    errors = [m for _, st, m in got if st == "error"]
    assert not errors, errors
    verdicts = {k: (st, m) for k, st, m in got}
    for p in ps:
        p.join(timeout=60)
    tickets: list[tuple[int, str]] = []
    with RedisClusterStore(url, prefix=prefix, read_only=True) as s:
        for shard in range(s.shards):
            for _, raw in s._records(shard):
                r = decode_record(raw)
                tickets.append((r.seq, r.suffix))  # (keys without a URL prefix)
    return verdicts, [k for _, k in sorted(tickets)]
