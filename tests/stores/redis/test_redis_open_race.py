"""Writers opening a new store at once (crawlers started together on a new prefix), on one
Redis server and on a Redis Cluster (``store.py``/``base.py`` ``_lost_keys``,
``cluster_open.open_meta``).

A writer that read no meta and then found the store's other keys took them for the remains of
a lost store, while they were another writer's, which had created the store in between: 1 of 4
crawlers of a shared Cluster crawl refused to start (``the store's meta key … is missing but
its other keys remain``), and the other three, waiting for it, lost the crawl.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from nearduppipe import open_store
from nearduppipe.fingerprint.rule import Fingerprints

from ...support.forked import exit_code, fork
from ...support.redis_cluster import LocalCluster
from ...support.redis_server import RedisServer


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("open-race-cluster")).start()
    yield c
    c.stop()


def _url(kind: str, request: pytest.FixtureRequest) -> str:
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return server.url
    lc: LocalCluster = request.getfixturevalue("cluster")
    return lc.url


def _created_in_between(
    monkeypatch: pytest.MonkeyPatch, client_class: type, url: str, prefix: str
) -> Callable[[], int]:
    """After the first read of the store's meta comes back empty, another writer creates the
    store and checks a page (as a crawler started a moment earlier), before the first writer
    goes on with what it read: the interleaving of two crawlers opening a new prefix."""
    real = client_class.hgetall
    fired = [0]

    def hgetall(self: Any, name: Any, *args: Any, **kwargs: Any) -> Any:
        out = real(self, name, *args, **kwargs)
        meta = name.decode() if isinstance(name, bytes) else str(name)
        if not fired[0] and not out and meta == "{" + prefix + "}:meta":
            fired[0] = 1
            with open_store(url, prefix=prefix) as other:  # (its own reads see the meta)
                other.check(Fingerprints(0x0F0F_0F0F_0F0F_0F0F, 1 << 300), "https://a.test/1")
        return out

    monkeypatch.setattr(client_class, "hgetall", hgetall)
    return lambda: fired[0]


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_a_writer_that_read_no_meta_opens_the_store_another_created_meanwhile(
    kind: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, prefix = _url(kind, request), f"test:open-race:{uuid.uuid4().hex[:8]}"
    client_class = redis.Redis if kind == "redis" else RedisCluster
    fired = _created_in_between(monkeypatch, client_class, url, prefix)
    with open_store(url, prefix=prefix) as store:  # (failed: "its other keys remain")
        assert fired() == 1
        page = Fingerprints(0x0F0F_0F0F_0F0F_0F0F, 1 << 300)
        assert store.check(page, "https://a.test/2").status == "duplicate"
        assert len(store) == 1


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_a_lost_store_is_still_refused(kind: str, request: pytest.FixtureRequest) -> None:
    """The same refusal as before for a store whose meta is gone while its keys remain (the
    second read of the meta finds none either)."""
    url, prefix = _url(kind, request), f"test:open-lost:{uuid.uuid4().hex[:8]}"
    with open_store(url, prefix=prefix) as store:
        store.check(Fingerprints(0x0F0F_0F0F_0F0F_0F0F, 1 << 300), "https://a.test/1")
    client = (redis.Redis if kind == "redis" else RedisCluster).from_url(
        url.replace("redis+cluster", "redis")
    )
    client.delete("{" + prefix + "}:meta")
    client.close()
    with pytest.raises(Exception, match="is missing but its other keys remain"):
        open_store(url, prefix=prefix)


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_processes_opening_a_new_store_at_once_all_open_it(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Real processes, released together, each opening a new prefix and checking a page of
    its own: 6 processes, 8 prefixes; every process opens every store, and each store holds
    the 6 pages."""
    url, procs, rounds = _url(kind, request), 6, 8
    prefixes = [f"test:open-at-once:{uuid.uuid4().hex[:8]}" for _ in range(rounds)]
    r, w = os.pipe()
    pids = []
    for k in range(procs):
        pid = fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(w)
            code = 0
            try:
                for prefix in prefixes:
                    os.read(r, 1)  # (released one byte per process per round)
                    with open_store(url, prefix=prefix) as s:
                        rng = random.Random(k)  # (pages far apart: each is kept)
                        fps = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
                        s.check(fps, f"https://a.test/{k}")
            except BaseException:
                code = 3
            os._exit(code)
        pids.append(pid)
    os.close(r)
    for _ in range(rounds):
        time.sleep(0.3)  # (every child waiting on the pipe)
        os.write(w, b"x" * procs)
    os.close(w)
    codes = [exit_code(pid, 120) for pid in pids]
    assert codes == [0] * procs
    for prefix in prefixes:
        with open_store(url, prefix=prefix, read_only=True) as s:
            assert len(s) == procs
