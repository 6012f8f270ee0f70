"""Issue #31, items 3 and 4, caused for real on a redis-server of the test's own.

3. *TTL by one client's clock*: a crawler on a machine whose clock is 3 days ahead shares a
   store with a TTL. It must not expire (in its searches) nor delete (in its sweeps and
   prunes) the other crawlers' fresh entries, and its own entries must not be stamped in the
   future. The skewed machine is a child process whose ``time.time`` runs 3 days ahead from
   before nearduppipe is imported, as on such a machine (a ``clock=`` given to the store is
   a stand-in that the store trusts: tests and replays).
4. *Restore of an older snapshot*: the server is stopped and started again from an RDB file
   saved earlier while a client keeps its store object, and another client writes before it
   calls again (so its log position is within the restored log, under the same epoch). It
   must see the restored pages and the ones written since, not the lost ones' positions."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import redis

from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.redis.format3 import decode_record
from nearduppipe.stores.redis.store import RedisStore

from ..support.redis_server import RedisServer

DAY = 86400.0


def _fps(rng: random.Random) -> Fingerprints:
    return Fingerprints(rng.getrandbits(64), rng.getrandbits(512))


def _copy(f: Fingerprints) -> Fingerprints:
    """A near-copy: 2 of 64 and 6 of 512 bits off."""
    assert f.wide is not None
    return Fingerprints(f.fp ^ 0b101, f.wide ^ 0b111111)


SKEWED = """
import random, sys, time
_real = time.time
time.time = lambda: _real() + 3 * 86400  # this machine's clock: 3 days ahead
from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.redis.store import RedisStore

url, prefix = sys.argv[1], sys.argv[2]
rng = random.Random(99)
store = RedisStore(url, prefix=prefix, ttl=86400)
for i in range(100):  # its own pages: each write sweeps 16 records
    store.check(Fingerprints(rng.getrandbits(64), rng.getrandbits(512)), f"skewed{i}")
for i in range(10):  # an add without stored_at is stamped as a check's entry
    store.add(Fingerprints(rng.getrandbits(64), rng.getrandbits(512)), f"skewed-add{i}")
print(store.prune())
store.close()
"""


def test_a_client_with_its_clock_ahead_expires_nothing_of_the_others(
    server: RedisServer, tmp_path: Path
) -> None:
    prefix, rng = "test:clock", random.Random(3)
    b = RedisStore(server.url, prefix=prefix, reset=True, ttl=DAY)
    c = RedisStore(server.url, prefix=prefix, ttl=DAY)
    pages = {f"b{i}": _fps(rng) for i in range(300)} | {f"c{i}": _fps(rng) for i in range(300)}
    for key, f in pages.items():
        assert (b if key[0] == "b" else c).check(f, key).status == "new"
    script = tmp_path / "skewed.py"
    script.write_text(textwrap.dedent(SKEWED))
    done = subprocess.run(
        [sys.executable, str(script), server.url, prefix],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pruned = int(done.stdout.split()[-1])
    client = redis.Redis.from_url(server.url)
    try:
        server_now = float(client.time()[0])
        kept = [k for k in pages if b.get(k) is not None]
        # every entry of the others is still there (the old code: 600 of 600 deleted, 0 kept)
        assert pruned == 0 and len(kept) == len(pages), (pruned, len(kept))
        assert len(b) == len(pages) + 110
        # and still matches, for both of the others
        found = sum(
            (b if i % 2 else c).check(_copy(f), f"copy-{k}").status == "duplicate"
            for i, (k, f) in enumerate(pages.items())
        )
        assert found == len(pages)
        decided = [d.decided_at for d in b.decisions()]  # (the server's time too)
        assert len(decided) == len(pages) and all(abs(t - server_now) < 120 for t in decided)
        # the skewed client's own entries carry the server's time, not its 3 days ahead
        for key in [f"skewed{i}" for i in range(100)] + [f"skewed-add{i}" for i in range(10)]:
            entry = b.get(key)
            assert entry is not None and abs(entry.stored_at - server_now) < 120
        raw = [r for k in client.keys("{test:clock}:b*") for r in client.hvals(k)]
        assert raw and max(decode_record(r).stored_at for r in raw) < server_now + 120
    finally:
        client.close()
        b.close()
        c.close()


def test_an_explicit_clock_still_drives_the_ttl(server: RedisServer) -> None:
    """A ``clock=`` given to the store is trusted (tests, replays): stamps and cutoffs."""
    now = [1_000_000.0]
    with RedisStore(
        server.url, prefix="test:given", reset=True, ttl=100, clock=lambda: now[0]
    ) as s:
        s.check(Fingerprints(1, None), "old")
        entry = s.get("old")
        assert entry is not None and entry.stored_at == 1_000_000.0
        now[0] += 150
        assert s.check(Fingerprints(1, None), "copy").status == "new"  # "old" expired
        assert s.get("old") is not None  # (held until 2 * ttl)
        assert s.prune() == 1 and s.get("old") is None


def test_a_restore_of_an_older_snapshot_is_noticed(server: RedisServer) -> None:
    prefix, rng = "test:restore", random.Random(4)
    a = RedisStore(server.url, prefix=prefix, reset=True)
    b = RedisStore(server.url, prefix=prefix)
    saved = {f"saved{i}": _fps(rng) for i in range(50)}
    lost = {f"lost{i}": _fps(rng) for i in range(50)}
    for key, f in saved.items():
        assert a.check(f, key).status == "new"
    admin = redis.Redis.from_url(server.url)
    admin.save()  # the snapshot: 50 pages
    for key, f in lost.items():
        assert b.check(f, key).status == "new"
    # a's index reads b's pages (its log position now past the snapshot's log)
    assert a.check(_copy(lost["lost0"]), "copy-lost0").status == "duplicate"
    b.close()
    admin.close()
    server.kill()  # (SIGKILL: no save at shutdown; the start loads the saved snapshot)
    server.start()
    admin = redis.Redis.from_url(server.url)
    try:
        assert admin.hget("{test:restore}:meta", "live") == b"50"  # 50 of 100 kept
        # another crawler writes first: the log grows past a's position again
        c = RedisStore(server.url, prefix=prefix)
        after = {f"after{i}": _fps(rng) for i in range(80)}
        for key, f in after.items():
            assert c.check(f, key).status == "new"
        c.close()
        assert admin.llen("{test:restore}:n") > a._log.pos
        missed = [
            k for k, f in after.items() if a.check(_copy(f), f"copy-{k}").status != "duplicate"
        ]
        # the old code: 50 of 80 missed (those logged below a's old position, 100)
        assert missed == []
        missed = [
            k for k, f in saved.items() if a.check(_copy(f), f"copy-{k}").status != "duplicate"
        ]
        assert missed == []
        # the lost pages are gone for a too: a near-copy is new
        assert a.check(_copy(lost["lost1"]), "copy-lost1").status == "new"
    finally:
        admin.close()
        a.close()


def test_a_restore_found_at_once_when_the_log_is_shorter(server: RedisServer) -> None:
    """The restored log shorter than a's position (nothing written since): a reload too."""
    prefix, rng = "test:restore2", random.Random(5)
    a = RedisStore(server.url, prefix=prefix, reset=True)
    first = [_fps(rng) for _ in range(20)]
    for i, f in enumerate(first):
        a.check(f, f"p{i}")
    redis.Redis.from_url(server.url).save()
    for i in range(20):
        a.check(_fps(rng), f"q{i}")
    server.kill()
    server.start()
    try:
        time.sleep(0.1)
        assert all(a.check(_copy(f), f"copy{i}").status == "duplicate" for i, f in enumerate(first))
        assert a._log.pos == 20  # (reloaded: the copies were duplicates, not stored)
    finally:
        a.close()


def test_a_cluster_master_restored_from_an_older_snapshot_is_noticed(tmp_path: Path) -> None:
    """As above on a Redis Cluster: one master (a third of the shards) restarted from the RDB
    file it saved earlier, and another client writes before the first one looks again."""
    from nearduppipe.stores.base import open_store

    from ..support.redis_cluster import LocalCluster

    cluster = LocalCluster(tmp_path / "cluster").start()
    rng = random.Random(6)
    prefix = "test:restore-cluster"
    try:
        a = open_store(cluster.url, prefix=prefix, reset=True)
        b = open_store(cluster.url, prefix=prefix)
        saved = {f"saved{i}": _fps(rng) for i in range(60)}
        for key, f in saved.items():
            assert a.check(f, key).status == "new"
        master = redis.Redis.from_url(cluster.node_urls()[1])
        master.save()
        master.close()
        lost = {f"lost{i}": _fps(rng) for i in range(60)}
        for key, f in lost.items():
            assert b.check(f, key).status == "new"
        assert a.check(_copy(lost["lost0"]), "copy-lost0").status == "duplicate"
        b.close()
        cluster.restart_node(1)  # (its nodes.conf keeps its slots; it loads the snapshot)
        c = open_store(cluster.url, prefix=prefix)
        after = {f"after{i}": _fps(rng) for i in range(90)}
        for key, f in after.items():
            assert c.check(f, key).status == "new"
        c.close()
        missed = [
            k for k, f in after.items() if a.check(_copy(f), f"copy-{k}").status != "duplicate"
        ]
        assert missed == []
        missed = [
            k for k, f in saved.items() if a.check(_copy(f), f"copy-{k}").status != "duplicate"
        ]
        assert missed == []
        decided = [d.decided_at for d in a.decisions()]  # stamped by the servers' time
        assert decided and all(abs(t - time.time()) < 120 for t in decided)
        a.close()
    finally:
        cluster.stop()
