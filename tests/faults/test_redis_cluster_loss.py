"""A Redis Cluster store whose keys the cluster loses (issue #31, item 2), on a real local
cluster of 3 masters: FLUSHALL on every master mid-use, a DEL of one shard's meta, one master
restarted without persistence (its slots kept, its keys gone), and an evicting policy on one
master at open. As on one node (test_redis_loss.py): noticed at the next call, never
re-created under the store's name, and an open of what is left says what happened."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.base import Store, StoreError, StoreUnavailable, open_store
from nearduppipe.stores.redis.cluster_open import shard_tags

from ..support.redis_cluster import LocalCluster

PREFIX = "test:closs"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster").start()
    yield c
    c.stop()


def _fps(rng: random.Random) -> Fingerprints:
    return Fingerprints(rng.getrandbits(64), rng.getrandbits(512))


def _fill(store: Store, n: int) -> list[Fingerprints]:
    rng = random.Random(1)
    pages = [_fps(rng) for _ in range(n)]
    for i, fps in enumerate(pages):
        assert store.check(fps, f"page/{i}").status == "new"
    return pages


def _keys(cluster: LocalCluster) -> int:
    total = 0
    for url in cluster.node_urls():
        c = redis.Redis.from_url(url)
        total += sum(1 for _ in c.scan_iter(match="{" + PREFIX + "*"))
        c.close()
    return total


def _each(cluster: LocalCluster, *command: object) -> None:
    for url in cluster.node_urls():
        c = redis.Redis.from_url(url)
        c.execute_command(*command)
        c.close()


def test_flushed_cluster_mid_use(cluster: LocalCluster) -> None:
    store = open_store(cluster.url, prefix=PREFIX)
    try:
        pages = _fill(store, 30)
        _each(cluster, "FLUSHALL")
        with pytest.raises(StoreUnavailable, match=r"gone.*meta.*missing"):
            store.check(pages[0], "page/0x")
        with pytest.raises(StoreUnavailable, match="meta"):
            store.check(_fps(random.Random(5)), "other")
        assert _keys(cluster) == 0  # nothing written under the lost store's name
    finally:
        store.close()
    with open_store(cluster.url, prefix=PREFIX) as fresh:  # an empty prefix: a new store
        assert fresh.check(pages[0], "page/0").status == "new"


def test_deleted_shard_meta(cluster: LocalCluster) -> None:
    store = open_store(cluster.url, prefix=PREFIX)
    try:
        pages = _fill(store, 30)
        rc = redis.RedisCluster.from_url(cluster.url.replace("redis+cluster", "redis"))
        rc.delete("{" + shard_tags(PREFIX, 12)[5] + "}:meta")
        rc.close()
        with pytest.raises(StoreUnavailable, match="gone"):  # (every check looks at every shard)
            store.check(pages[0], "page/0x")
    finally:
        store.close()
    with pytest.raises(StoreError, match="missing") as caught:
        open_store(cluster.url, prefix=PREFIX)
    assert "NEARDUP_RESET" in str(caught.value)
    with open_store(cluster.url, prefix=PREFIX, reset=True) as fresh:
        assert fresh.check(pages[0], "page/0").status == "new"


def test_master_restarted_without_persistence(cluster: LocalCluster) -> None:
    store = open_store(cluster.url, prefix=PREFIX)
    try:
        pages = _fill(store, 30)
        cluster.restart_node(1)  # a third of the shards, and their metas, are gone
        for _ in range(50):  # (the client may first see the node down: unavailable too)
            try:
                store.check(pages[0], "page/0x")
            except StoreUnavailable as e:
                if "gone" in str(e):
                    break
        else:
            pytest.fail("the lost shards were not noticed")
    finally:
        store.close()
    with pytest.raises(StoreError, match="missing although the store has all its shards"):
        open_store(cluster.url, prefix=PREFIX)


def test_open_refuses_an_evicting_master(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    c = redis.Redis.from_url(cluster.node_urls()[2])
    c.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with pytest.raises(StoreError, match=r"maxmemory-policy is allkeys-lru.*allow_eviction"):
            open_store(cluster.url, prefix=PREFIX)
        assert _keys(cluster) == 0
        with (
            caplog.at_level(logging.WARNING, logger="nearduppipe"),
            open_store(f"{cluster.url}?prefix={PREFIX}&allow_eviction=1") as s,
        ):
            assert s.check(_fps(random.Random(1)), "a").status == "new"
        assert any("allkeys-lru" in r.getMessage() for r in caplog.records)
    finally:
        c.config_set("maxmemory-policy", "noeviction")
        c.close()


def test_a_cluster_store_created_anew_after_a_loss_is_not_joined(cluster: LocalCluster) -> None:
    """As on one node (test_redis_loss.py): every master flushed, then another client creates
    a new store under the prefix; the client that had the old one refuses it (another
    identity), while a reset made through nearduppipe keeps the identity and is followed."""
    store = open_store(cluster.url, prefix=PREFIX)
    try:
        pages = _fill(store, 10)
        with open_store(cluster.url, prefix=PREFIX, reset=True) as resetter:
            assert len(resetter) == 0
        assert store.check(pages[0], "page/0").status == "new"  # a reset: followed
        _each(cluster, "FLUSHALL")
        with open_store(cluster.url, prefix=PREFIX) as other:
            assert other.check(_fps(random.Random(5)), "other/1").status == "new"
        with pytest.raises(StoreUnavailable, match="created under its prefix") as caught:
            store.check(pages[1], "page/1")
        assert "will not join" in str(caught.value)
        with pytest.raises(StoreUnavailable, match="created under its prefix"):
            store.add(pages[2], "page/2")
        with open_store(cluster.url, prefix=PREFIX, read_only=True) as after:
            assert [e.key for e in after.entries()] == ["other/1"]
    finally:
        store.close()


def test_a_cluster_client_that_adds_only_refuses_a_store_created_anew(
    cluster: LocalCluster,
) -> None:
    store = open_store(cluster.url, prefix=PREFIX)
    try:
        store.add(_fps(random.Random(1)), "page/0")
        _each(cluster, "FLUSHALL")
        open_store(cluster.url, prefix=PREFIX).close()
        with pytest.raises(StoreUnavailable, match="created under its prefix"):
            store.add(_fps(random.Random(2)), "page/1")
    finally:
        store.close()
