"""Workers for tests/stores/redis/test_redis_cluster_pending.py (spawned processes import only this)."""

from __future__ import annotations

import time
from typing import Any

from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.redis.cluster import RedisClusterStore


def round_worker(
    url: str, prefix: str, items: list[tuple[int, int, str]], barrier: Any, out: Any
) -> None:
    """One check per round, every process's at the same moment (a barrier per round)."""
    store = RedisClusterStore(url, prefix=prefix)
    store.near(Fingerprints(0, 0))  # read the logs before the start
    got = []
    for fp, wide, key in items:
        barrier.wait(timeout=120)
        v = store.check(Fingerprints(fp, wide), key)
        got.append((key, v.status, None if v.match is None else v.match.key))
    store.close()
    out.put(got)


def stalled_worker(url: str, prefix: str, fp: int, wide: int, key: str, ready: Any) -> None:
    """A check that stops after its look, before it settles (its pending entry holds a
    ticket): the parent then kills this process with SIGKILL."""
    store = RedisClusterStore(url, prefix=prefix, pending_timeout=2.0)

    def stall(hits: Any, ticket: int) -> None:
        ready.set()
        time.sleep(3600)

    store._wait = stall  # type: ignore[method-assign]
    store.check(Fingerprints(fp, wide), key)
