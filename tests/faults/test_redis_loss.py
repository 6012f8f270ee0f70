"""A Redis store whose keys the server loses (issue #31, item 2), caused for real on a
redis-server of the test's own: FLUSHDB / FLUSHALL from another client mid-use, a DEL of the
store's meta, a restart without persistence on the same port, and an ``allkeys-lru`` eviction.

Each loss must be noticed at the store's next call (``StoreUnavailable``, the failure policy's
business) and never papered over by writing a new store under the old one's name; opening what
is left must say what happened and how to recover; an evicting ``maxmemory-policy`` is refused
at open unless the caller allows it."""

from __future__ import annotations

import logging
import random
import time

import pytest
import redis

from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.base import StoreError, StoreUnavailable, open_store
from nearduppipe.stores.redis.store import RedisStore

from ..support.redis_server import RedisServer

PREFIX = "test:loss"


def _fps(rng: random.Random) -> Fingerprints:
    return Fingerprints(rng.getrandbits(64), rng.getrandbits(512))


def _fill(store: RedisStore, n: int, seed: int = 1, name: str = "page") -> list[Fingerprints]:
    rng = random.Random(seed)
    pages = [_fps(rng) for _ in range(n)]
    for i, fps in enumerate(pages):
        assert store.check(fps, f"{name}/{i}").status == "new"
    return pages


def _store_keys(client: redis.Redis) -> list[bytes]:
    return sorted(client.scan_iter(match="{" + PREFIX + "}:*"))


@pytest.mark.parametrize("how", ["flushdb", "flushall"])
def test_flushed_mid_use_is_unavailable_and_not_recreated(server: RedisServer, how: str) -> None:
    admin = redis.Redis.from_url(server.url)
    store = RedisStore(server.url, prefix=PREFIX)
    try:
        pages = _fill(store, 20)
        admin.execute_command(how.upper())
        with pytest.raises(StoreUnavailable, match=r"meta.*(gone|missing)") as caught:
            store.check(pages[0], "page/0")
        assert "NEARDUP_RESET" in str(caught.value)
        with pytest.raises(StoreUnavailable, match="meta"):  # and every call after it
            store.check(_fps(random.Random(99)), "another")
        with pytest.raises(StoreUnavailable, match="meta"):
            store.add(pages[1], "page/1")
        assert _store_keys(admin) == []  # nothing written under the lost store's name
    finally:
        store.close()
    # an entirely empty prefix is a new store, as before
    with RedisStore(server.url, prefix=PREFIX) as fresh:
        assert fresh.check(pages[0], "page/0").status == "new"
    admin.close()


def test_deleted_meta_mid_use_then_open_says_what_is_left(server: RedisServer) -> None:
    admin = redis.Redis.from_url(server.url)
    store = RedisStore(server.url, prefix=PREFIX)
    try:
        pages = _fill(store, 20)
        admin.delete("{" + PREFIX + "}:meta")
        with pytest.raises(StoreUnavailable, match=r"meta.*(gone|missing)"):
            store.check(pages[0], "page/0x")
        with pytest.raises(StoreUnavailable, match="meta"):
            store.add(pages[1], "page/1x")
        assert not admin.exists("{" + PREFIX + "}:meta")
    finally:
        store.close()
    with pytest.raises(StoreError, match=r"meta.*(gone|missing)") as caught:
        RedisStore(server.url, prefix=PREFIX)
    text = str(caught.value)
    assert "NEARDUP_RESET" in text and "--reset" in text and "AOF" in text, text
    with pytest.raises(StoreError, match="meta"):  # read-only opens (info, report) too
        RedisStore(server.url, prefix=PREFIX, read_only=True)
    with RedisStore(server.url, prefix=PREFIX, reset=True) as fresh:  # the way out it names
        assert fresh.check(pages[0], "page/0").status == "new"
    admin.close()


def test_restart_without_persistence_mid_use(server: RedisServer) -> None:
    store = RedisStore(server.url, prefix=PREFIX)
    try:
        pages = _fill(store, 20)
        server.kill()
        server.start()  # the same port, nothing saved
        with pytest.raises(StoreUnavailable, match=r"meta.*(gone|missing)"):
            store.check(pages[0], "page/0x")
        admin = redis.Redis.from_url(server.url)
        assert _store_keys(admin) == []
        admin.close()
    finally:
        store.close()


def test_allkeys_lru_eviction_mid_use_is_noticed(server: RedisServer) -> None:
    admin = redis.Redis.from_url(server.url)
    store = RedisStore(server.url, prefix=PREFIX)
    try:
        pages = _fill(store, 50)
        used = int(admin.info("memory")["used_memory"])
        admin.config_set("maxmemory-policy", "allkeys-lru")
        admin.config_set("maxmemory", used + 300_000)
        rng = random.Random(7)
        text = "x" * 2000
        kept, evicted_at = 0, None
        with pytest.raises(StoreUnavailable, match="evict") as caught:
            for i in range(100_000):
                if evicted_at is None and int(admin.info("stats")["evicted_keys"]) > 0:
                    evicted_at = time.monotonic()
                if evicted_at is not None:
                    # a near-copy of an early page: kept only if its entry is gone
                    near = Fingerprints(pages[i % 50].fp ^ 1, pages[i % 50].wide)
                    kept += store.check(near, f"copy/{i}").status == "new"
                    assert time.monotonic() - evicted_at < 5, f"{kept} near-copies kept"
                else:
                    store.check(_fps(rng), f"filler/{i}", text=text)
        assert "allkeys-lru" in str(caught.value)  # (evicted keys, or the meta among them)
    finally:
        admin.config_set("maxmemory", 0)
        admin.config_set("maxmemory-policy", "noeviction")
        store.close()
        admin.close()


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random", "allkeys-lfu"])
def test_open_refuses_an_evicting_policy(
    server: RedisServer, policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    admin = redis.Redis.from_url(server.url)
    admin.config_set("maxmemory-policy", policy)
    try:
        with pytest.raises(StoreError, match=f"maxmemory-policy.*{policy}") as caught:
            RedisStore(server.url, prefix=PREFIX)
        assert "allow_eviction" in str(caught.value)
        assert _store_keys(admin) == []  # refused before anything was written
        with (
            caplog.at_level(logging.WARNING, logger="nearduppipe"),
            open_store(f"{server.url}?prefix={PREFIX}&allow_eviction=1") as s,
        ):
            assert s.check(_fps(random.Random(1)), "a").status == "new"
        assert any(policy in r.getMessage() for r in caplog.records)
        with open_store(server.url, prefix=PREFIX, allow_eviction=True) as s:
            assert len(s) == 1
    finally:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()


def test_volatile_policy_is_refused_only_with_a_ttl(server: RedisServer) -> None:
    """``volatile-*`` evicts only keys with an expiry: a store's data keys have one only when
    it has a TTL."""
    admin = redis.Redis.from_url(server.url)
    admin.config_set("maxmemory-policy", "volatile-lru")
    try:
        with RedisStore(server.url, prefix=PREFIX) as s:
            assert s.check(_fps(random.Random(1)), "a").status == "new"
        with pytest.raises(StoreError, match=r"(?i)volatile-lru.*ttl"):
            RedisStore(server.url, prefix=PREFIX, ttl=3600)
    finally:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.close()


@pytest.mark.parametrize("allow", [False, True])
def test_evictions_under_a_policy_set_mid_use_are_watched(
    server: RedisServer, allow: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Evictions the meta survives are seen by the once-a-second look at ``evicted_keys``
    (which cannot tell whose keys went: any eviction under ``allkeys-*`` counts)."""
    admin = redis.Redis.from_url(server.url)
    store = RedisStore(server.url, prefix=PREFIX, allow_eviction=allow)
    try:
        _fill(store, 20)
        for i in range(200):  # older than the store's keys: the ones LRU evicts first
            admin.set(f"other:{i}", "y" * 1000)
        time.sleep(1.5)  # (Redis's LRU clock ticks once a second)
        _fill(store, 5, seed=2, name="more")  # (touches every key of the store)
        admin.config_set("maxmemory-samples", 64)  # (LRU near-exact: the others go first)
        admin.config_set("maxmemory-policy", "allkeys-lru")
        admin.config_set("maxmemory", int(admin.info("memory")["used_memory"]) + 20_000)
        for i in range(60):
            admin.set(f"later:{i}", "z" * 1000)
        assert int(admin.info("stats")["evicted_keys"]) > 0
        assert admin.exists("{" + PREFIX + "}:meta")
        time.sleep(1.1)  # the look is due
        rng = random.Random(3)
        if allow:
            with caplog.at_level(logging.WARNING, logger="nearduppipe"):
                assert store.check(_fps(rng), "after").status == "new"
            assert any("evicted" in r.getMessage() for r in caplog.records)
        else:
            with pytest.raises(StoreUnavailable, match=r"evicted \d+ keys.*allkeys-lru"):
                store.check(_fps(rng), "after")
            with pytest.raises(StoreUnavailable, match="evicted"):  # and from then on
                store.check(_fps(rng), "after2")
    finally:
        admin.config_set("maxmemory", 0)
        admin.config_set("maxmemory-policy", "noeviction")
        store.close()
        admin.close()


@pytest.mark.parametrize("seen", [False, True])
def test_a_store_created_anew_after_a_loss_is_not_joined(server: RedisServer, seen: bool) -> None:
    """The store is flushed, then another client creates a new one under the prefix. A client
    that had the old one open refuses the new one (its identity differs) instead of following
    it as a reset, whether it called in between (``seen``: the loss itself) or only meets the
    new store's log."""
    admin = redis.Redis.from_url(server.url)
    store = RedisStore(server.url, prefix=PREFIX)
    try:
        pages = _fill(store, 20)
        admin.execute_command("FLUSHALL")
        if seen:
            with pytest.raises(StoreUnavailable, match="gone"):
                store.check(pages[0], "page/0")
        with RedisStore(server.url, prefix=PREFIX) as other:  # a new store: another id
            assert other.check(_fps(random.Random(5)), "other/1").status == "new"
        for call in (
            lambda: store.check(pages[0], "page/0"),  # (a near call's path: the log's epoch)
            lambda: store.add(pages[1], "page/1"),  # (an add's: its ids' epoch is stale)
            lambda: store.get("page/2"),
        ):
            with pytest.raises(StoreUnavailable) as caught:
                call()
            if not seen:
                text = str(caught.value)
                assert "created under its prefix" in text and "will not join" in text, text
        with RedisStore(server.url, prefix=PREFIX, read_only=True) as after:
            assert [e.key for e in after.entries()] == ["other/1"]  # nothing of the old client
    finally:
        store.close()
        admin.close()


def test_a_client_that_adds_only_refuses_a_store_created_anew(server: RedisServer) -> None:
    """An add (no search: no log) meets the new store as ids read under another epoch."""
    admin = redis.Redis.from_url(server.url)
    store = RedisStore(server.url, prefix=PREFIX)
    try:
        store.add(_fps(random.Random(1)), "page/0")
        admin.execute_command("FLUSHALL")
        RedisStore(server.url, prefix=PREFIX).close()
        with pytest.raises(StoreUnavailable, match="created under its prefix"):
            store.add(_fps(random.Random(2)), "page/1")
    finally:
        store.close()
        admin.close()


def test_a_reset_keeps_the_identity_and_its_clients_follow(server: RedisServer) -> None:
    """A reset made through nearduppipe is no loss: the other clients follow it."""
    store = RedisStore(server.url, prefix=PREFIX)
    try:
        pages = _fill(store, 5)
        with RedisStore(server.url, prefix=PREFIX, reset=True) as resetter:
            assert len(resetter) == 0
        assert store.check(pages[0], "page/0").status == "new"  # followed: an empty store
        store.add(pages[1], "page/1")
        assert store.get("page/1") is not None
    finally:
        store.close()


def test_a_store_from_before_identities_gets_one_from_its_first_writer(
    server: RedisServer,
) -> None:
    admin = redis.Redis.from_url(server.url)
    meta = "{" + PREFIX + "}:meta"
    with RedisStore(server.url, prefix=PREFIX) as s:
        _fill(s, 3)
    admin.hdel(meta, "id")
    with RedisStore(server.url, prefix=PREFIX, read_only=True) as reader:
        assert len(reader) == 3 and not admin.hexists(meta, "id")  # (readers write nothing)
    store = RedisStore(server.url, prefix=PREFIX)
    try:
        assert admin.hexists(meta, "id")
        admin.execute_command("FLUSHALL")
        RedisStore(server.url, prefix=PREFIX).close()
        with pytest.raises(StoreUnavailable, match="created under its prefix"):
            store.check(_fps(random.Random(9)), "page/9")
    finally:
        store.close()
        admin.close()
