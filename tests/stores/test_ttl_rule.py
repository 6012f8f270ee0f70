"""One TTL per store (issue 42, item 5; nearduppipe/stores/ttl_rule.py), on real sqlite files, a
real redis-server and a local Redis Cluster: the store records its TTL; a writer asking for
another one is refused with one line naming both and the way to change it; changing it on
purpose works; readers are exempt; a store from before the rule takes the first writer's.

Why it matters: a writer's TTL deletes the others' entries (sqlite prunes at open, Redis
sweeps on every write), so before, a 5-second writer emptied a one-hour store."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from scrapy.settings import Settings

from nearduppipe.settings import NearDupConfig
from nearduppipe.stores.base import Store, StoreError, open_store
from nearduppipe.stores.redis.keys import split_uri

from ..support.redis_cluster import LocalCluster
from ..support.redis_server import RedisServer

HOUR = 3600.0


def _writer(uri: str, **options: object) -> Store:
    return open_store(uri, **options)  # type: ignore[arg-type]


def _forget_recorded_ttl(uri: str) -> None:
    """Make the store look as one written before the rule: no TTL recorded."""
    if uri.startswith("redis"):
        base, ours = split_uri(uri)
        client = redis.Redis.from_url(base)
        assert client.hdel("{" + ours["prefix"] + "}:meta", "ttl") == 1
        client.close()
    else:
        conn = sqlite3.connect(uri)
        assert conn.execute("DELETE FROM neardup WHERE key = 'm:ttl'").rowcount == 1
        conn.commit()
        conn.close()


def _one_old_entry(uri: str, ttl: float | None) -> None:
    """A store with TTL ``ttl`` holding one entry stored a minute ago."""
    with _writer(uri, ttl=ttl) as s:
        s.add(0x1234, "https://a/old", stored_at=time.time() - 60)


def test_a_writer_with_another_ttl_is_refused(store_uri: str) -> None:
    _one_old_entry(store_uri, HOUR)
    with pytest.raises(StoreError) as caught:
        _writer(store_uri, ttl=5)
    text = str(caught.value)
    assert "\n" not in text
    assert "TTL is 3600 s" in text and "asks for 5 s" in text, text
    assert "NEARDUP_TTL_CHANGE = True" in text and "change_ttl=True" in text, text
    with pytest.raises(StoreError, match="TTL is 3600 s but this writer asks for none"):
        _writer(store_uri)  # no TTL is a TTL too: it would make the entries last
    # the refused writers deleted nothing: the minute-old entry is there for the hour's writer
    with _writer(store_uri, ttl=HOUR) as s:
        assert s.get("https://a/old") is not None


def test_a_store_without_a_ttl_refuses_a_writer_with_one(store_uri: str) -> None:
    _one_old_entry(store_uri, None)
    with pytest.raises(StoreError, match="TTL is none but this writer asks for 5 s"):
        _writer(store_uri, ttl=5)
    with _writer(store_uri) as s:
        assert s.get("https://a/old") is not None


def test_the_ttl_changed_on_purpose(store_uri: str) -> None:
    _one_old_entry(store_uri, HOUR)
    with _writer(store_uri, ttl=30, change_ttl=True) as s:
        assert s.ttl == 30
        s.prune()  # (the new TTL at work: the minute-old entry goes)
        assert s.get("https://a/old") is None
    with pytest.raises(StoreError, match="TTL is 30 s but this writer asks for 3600 s"):
        _writer(store_uri, ttl=HOUR)  # the new one is recorded
    with _writer(store_uri, ttl=30.0) as s:
        assert s.ttl == 30


def test_readers_are_exempt(store_uri: str) -> None:
    _one_old_entry(store_uri, HOUR)
    for ttl in (5, None):
        with _writer(store_uri, ttl=ttl, read_only=True) as s:
            assert len(s) == 1
    with pytest.raises(StoreError, match="TTL is 3600 s"):  # (they recorded nothing)
        _writer(store_uri, ttl=5)


def test_a_store_from_before_the_rule_adopts_the_first_writers_ttl(store_uri: str) -> None:
    _one_old_entry(store_uri, HOUR)
    _forget_recorded_ttl(store_uri)
    with _writer(store_uri, ttl=120) as s:  # no refusal: nothing was recorded
        assert s.get("https://a/old") is not None
    with pytest.raises(StoreError, match="TTL is 120 s but this writer asks for 3600 s"):
        _writer(store_uri, ttl=HOUR)


def test_the_uris_ttl_is_the_one_checked(redis_server: RedisServer) -> None:
    """``?ttl=`` in a Redis URI wins over the ``ttl`` option (keys.uri_ttl): it is the
    writer's TTL, checked against the store's."""
    join = "&" if "?" in redis_server.url else "?"
    uri = f"{redis_server.url}{join}prefix=test:ttl:uri:{uuid.uuid4().hex[:8]}"
    _one_old_entry(uri, HOUR)
    with pytest.raises(StoreError, match="TTL is 3600 s but this writer asks for 5 s"):
        _writer(uri + "&ttl=5", ttl=HOUR)
    with _writer(uri + "&ttl=3600", ttl=5) as s:
        assert s.ttl == HOUR


def test_the_crawl_setting_changes_the_ttl(tmp_path: Path) -> None:
    from nearduppipe.runtime.lifecycle import StoreLifecycle

    uri = str(tmp_path / "crawl.sqlite")
    _one_old_entry(uri, HOUR)
    settings = {"NEARDUP_STORE": uri, "NEARDUP_TTL": 30}
    with pytest.raises(StoreError, match="NEARDUP_TTL_CHANGE"):
        StoreLifecycle(NearDupConfig.from_settings(Settings(settings)), "spider")
    config = NearDupConfig.from_settings(Settings({**settings, "NEARDUP_TTL_CHANGE": True}))
    assert config.ttl_change
    life = StoreLifecycle(config, "spider")
    assert life.store.ttl == 30
    life.store.close()
    with _writer(uri, ttl=30) as s:
        assert s.ttl == 30


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster").start()
    yield c
    c.stop()


def test_the_rule_on_a_cluster(cluster: LocalCluster) -> None:
    uri = cluster.url + "?prefix=test:ttl"
    _one_old_entry(uri, HOUR)
    with pytest.raises(StoreError, match="TTL is 3600 s but this writer asks for 5 s"):
        _writer(uri, ttl=5)
    with _writer(uri, ttl=5, read_only=True) as s:
        assert len(s) == 1
    with _writer(uri, ttl=120, change_ttl=True) as s:
        assert s.get("https://a/old") is not None
    with pytest.raises(StoreError, match="TTL is 120 s but this writer asks for none"):
        _writer(uri)
    rc = redis.RedisCluster.from_url(cluster.url.replace("redis+cluster", "redis"))
    assert rc.hdel("{test:ttl}:meta", "ttl") == 1  # a store from before the rule
    rc.close()
    with _writer(uri) as s:  # adopts: none
        assert s.ttl is None
    with pytest.raises(StoreError, match="TTL is none but this writer asks for 120 s"):
        _writer(uri, ttl=120)


def test_commands_that_write_keep_the_stores_ttl(store_uri: str) -> None:
    """``nearduppipe forget`` (and dedup --add, copy's destination) state no TTL: they write
    with the one the store records, neither refused nor changing it."""
    from ..support.cli import run

    _one_old_entry(store_uri, HOUR)
    done = run("forget", store_uri, "https://a/old")
    assert done.returncode == 0, done.stderr
    with _writer(store_uri, ttl=HOUR) as s:  # still the hour's store
        assert s.get("https://a/old") is None
