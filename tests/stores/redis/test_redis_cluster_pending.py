"""The Redis Cluster store's pending entries (format 3: kept apart from the buckets and the
log, scanned by every look, moved to their key's address when kept) under real processes on
a real local cluster: near-duplicates whose keys live on different shards, checked at the
same moment round after round, are kept exactly once per round; a process killed (SIGKILL)
between its look and its settle leaves a pending entry that is gone after its deadline."""

from __future__ import annotations

import multiprocessing
import random
import uuid
import zlib
from collections.abc import Iterator

import pytest

from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.redis.cluster import RedisClusterStore

from ...support.cluster_pending import round_worker, stalled_worker
from ...support.redis_cluster import LocalCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("cluster")).start()
    yield c
    c.stop()


def _flip(x: int, n: int, bits: int, rng: random.Random) -> int:
    for b in rng.sample(range(bits), n):
        x ^= 1 << b
    return x


def _keys_on_distinct_shards(r: int, procs: int, shards: int) -> list[str]:
    """One key per process for round ``r``, each in another shard."""
    keys: list[str] = []
    used: set[int] = set()
    i = 0
    while len(keys) < procs:
        key = f"https://r{r}.example/page-{i}"
        s = zlib.crc32(key.encode()) % shards
        if s not in used:
            used.add(s)
            keys.append(key)
        i += 1
    return keys


def test_near_duplicates_on_different_shards_checked_at_once_are_kept_once(
    cluster: LocalCluster,
) -> None:
    procs, rounds = 3, 60
    prefix = f"test:pending:{uuid.uuid4().hex[:8]}"
    RedisClusterStore(cluster.url, prefix=prefix, reset=True).close()
    rng = random.Random(33)
    queues: list[list[tuple[int, int, str]]] = [[] for _ in range(procs)]
    for r in range(rounds):
        base, wide = rng.getrandbits(64), rng.getrandbits(512)
        for q, key in enumerate(_keys_on_distinct_shards(r, procs, 12)):
            queues[q].append(
                (_flip(base, rng.randint(0, 3), 64, rng), _flip(wide, 8, 512, rng), key)
            )
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    ps = [
        ctx.Process(target=round_worker, args=(cluster.url, prefix, q, barrier, out))
        for q in queues
    ]
    for p in ps:
        p.start()
    results = [x for _ in ps for x in out.get(timeout=600)]
    for p in ps:
        p.join(timeout=60)
    assert [p.exitcode for p in ps] == [0] * procs
    by_round: dict[str, list[tuple[str, str, str | None]]] = {}
    for key, status, match in results:
        by_round.setdefault(key.split(".")[0], []).append((key, status, match))
    assert len(by_round) == rounds
    for group in by_round.values():
        kept = [key for key, status, _ in group if status == "new"]
        assert len(kept) == 1, group  # exactly one of the group, whichever won
        assert all(m == kept[0] for _, status, m in group if status == "duplicate"), group
        assert sorted(status for _, status, _ in group) == ["duplicate"] * (procs - 1) + ["new"]
    with RedisClusterStore(cluster.url, prefix=prefix, read_only=True) as s:
        stored = sorted(e.key for e in s.entries())
        assert stored == sorted(k for k, status, _ in results if status == "new")
        assert s.decision_count() == rounds * (procs - 1)
        # every pending entry was settled: none left on any shard
        assert sum(s._client.hlen(sh.key("p")) for sh in s._shards) == 0


def test_a_process_killed_between_look_and_settle_is_waited_out(cluster: LocalCluster) -> None:
    prefix = f"test:pending-kill:{uuid.uuid4().hex[:8]}"
    RedisClusterStore(cluster.url, prefix=prefix, reset=True).close()
    rng = random.Random(34)
    base, wide = rng.getrandbits(64), rng.getrandbits(512)
    dead_key, live_key = _keys_on_distinct_shards(0, 2, 12)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=stalled_worker, args=(cluster.url, prefix, base, wide, dead_key, ready))
    p.start()
    assert ready.wait(timeout=120)
    p.kill()
    p.join(timeout=30)
    assert p.exitcode == -9
    with RedisClusterStore(cluster.url, prefix=prefix) as live:
        pending = live._shards[live.shard(dead_key)].key("p")
        assert live._client.hlen(pending) == 1  # the dead check's entry, with its ticket
        near = Fingerprints(_flip(base, 2, 64, rng), _flip(wide, 8, 512, rng))
        assert live.check(near, live_key).status == "new"  # waited out its deadline
        assert live._client.hlen(pending) == 0  # and removed it
        assert [e.key for e in live.entries()] == [live_key]
        assert live.check(Fingerprints(base, wide), dead_key).status == "duplicate"
        assert (
            live.check(
                Fingerprints(base ^ (0xFFFF << 40), wide ^ ((1 << 200) - 1)), dead_key
            ).status
            == "new"
        )
