"""What a client of a Redis store (one node, or a Cluster) sees when the store changes under it.

A reset by another client: the host and job ids the client cached name other hosts, or none,
in the new store, so the calls that send page keys encoded with them (``add``, ``get``,
``remove``, ``import_records``) must not use them there (a record written with them decodes
to another page). The check's own re-encoding is tested in test_redis_store.py. A compaction
by another client changes the epoch too, and costs a retry. Under a TTL, buckets expire whole,
and the store's size must not count what left with them."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.stores.base import Entry
from nearduppipe.stores.redis.cluster import RedisClusterStore
from nearduppipe.stores.redis.store import RedisStore

from ...support.redis_cluster import LocalCluster
from ...support.redis_server import RedisServer


def far(i: int) -> Fingerprints:
    """Fingerprints of page ``i``, random: ~32 of 64 bits from any other's (no verdict here
    depends on them but that each page is new)."""
    rng = random.Random(i)
    return Fingerprints(rng.getrandbits(64), rng.getrandbits(512))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(Path(tmp_path_factory.mktemp("cluster"))).start()
    yield c
    c.stop()


Open = Callable[[str], RedisStore | RedisClusterStore]  # prefix -> a store reset there


@pytest.fixture(params=["redis", "cluster"])
def open_reset(request: pytest.FixtureRequest) -> Open:
    if request.param == "redis":
        url = request.getfixturevalue("redis_server").url
        return lambda prefix: RedisStore(url, prefix=prefix, reset=True)
    url = request.getfixturevalue("cluster").url
    return lambda prefix: RedisClusterStore(url, prefix=prefix, reset=True)


@pytest.mark.parametrize("call", ["add", "check", "get", "remove", "import"])
def test_a_client_of_a_store_reset_under_it_encodes_page_keys_anew(
    open_reset: Open, call: str
) -> None:
    prefix = f"test:reset-ids-{call}"
    with open_reset(prefix) as a:
        a.add(far(0), "https://a.example/1", job="crawl-a")  # a caches a.example's id and the job's
        assert a.get("https://a.example/1") is not None
        with open_reset(prefix) as b:
            # the new store gives its first host and job the ids a.example and crawl-a had,
            # and a.example another one
            b.add(far(1), "https://b.example/1", job="crawl-b")
            b.add(far(2), "https://b.example/a", job="crawl-b")
            b.add(far(4), "https://a.example/x", job="crawl-b")
            if call == "add":
                a.add(far(3), "https://a.example/2", job="crawl-a")
            elif call == "check":  # (a's first search: it loads the log of the new store)
                assert a.check(far(3), "https://a.example/2", job="crawl-a").kept
            elif call == "import":
                e = Entry("https://a.example/2", far(3).fp, 5.0, None, far(3).wide, "crawl-a")
                a.import_records([e], [])
            elif call == "get":
                found = a.get("https://a.example/x")
                assert found is not None and found.key == "https://a.example/x"
                assert a.get("https://a.example/a") is None  # (b.example/a: another page)
            else:
                assert not a.remove("https://a.example/a")
                assert a.remove("https://a.example/x")
            got = {e.key: e.job for e in b.entries()}
            if call in ("add", "check", "import"):
                assert got == {
                    "https://a.example/2": "crawl-a",
                    "https://a.example/x": "crawl-b",
                    "https://b.example/1": "crawl-b",
                    "https://b.example/a": "crawl-b",
                }
                assert b.get("https://a.example/2") is not None
            elif call == "get":
                assert len(got) == 3
            else:
                assert got == {"https://b.example/1": "crawl-b", "https://b.example/a": "crawl-b"}


def test_a_compaction_by_another_client_costs_a_retry_not_an_error(open_reset: Open) -> None:
    """A compaction gives the log a new epoch too; the ids are still good, and the calls
    that carry the old epoch are encoded again and go through."""
    prefix = "test:reset-ids-compacted"
    with open_reset(prefix) as a:
        a.add(far(0), "https://a.example/1")
        a.add(far(1), "https://a.example/2")
        with type(a)(a.uri, prefix=prefix) as b:
            assert b.remove("https://a.example/2")
            assert b.compact()
        a.add(far(2), "https://a.example/3")
        a.import_records([Entry("https://a.example/4", far(3).fp, 5.0, None, far(3).wide)], [])
        got = a.get("https://a.example/1")
        assert got is not None and got.key == "https://a.example/1"
        assert sorted(e.key for e in a.entries()) == [
            "https://a.example/1",
            "https://a.example/3",
            "https://a.example/4",
        ]


def test_the_size_of_a_store_whose_buckets_expired_counts_what_is_left(open_reset: Open) -> None:
    """A bucket no write touched for 2 * ttl leaves Redis whole (so an abandoned store leaves
    by itself); its records must leave the store's size too. Before, ``len()`` read only the
    meta's counter, which nothing decrements then: 45 here instead of 5. A client counts the
    buckets at most every 5 minutes (and after a reset) and adds what the counter moved
    since; a writer without a TTL that makes the keys last again sets the counter right."""
    prefix = "test:ttl-count"
    with open_reset(prefix) as s:
        uri = s.uri
    kind = type(s)
    # (each open changes the store's TTL: on purpose, change_ttl; ttl_rule.py)
    with kind(uri, prefix=prefix, ttl=1, change_ttl=True) as s:  # (buckets expire 2 s after)
        for i in range(40):
            s.add(far(i), f"https://a.example/{i}")
        assert len(s) == 40
        time.sleep(2.5)
    with kind(uri, prefix=prefix, ttl=3600, change_ttl=True) as s:  # (these last: not timed)
        for i in range(5):
            s.add(far(100 + i), f"https://b.example/{i}")
        held = sum(s.get(f"https://{h}.example/{i}") is not None for h in "ab" for i in range(40))
        assert held == len(list(s.entries())) == 5
        assert len(s) == 5
        s.add(far(200), "https://c.example/1")
        assert s.remove("https://b.example/0")
        assert len(s) == 5  # (the count of a moment ago, and the counter's +1 -1 since)
        s.add(far(201), "https://c.example/2")
        assert len(s) == 6
        with kind(uri, prefix=prefix, read_only=True) as r:
            assert len(r) == 6
        with open_reset(prefix) as b:  # (another client resets: a new meta, a new count)
            b.add(far(300), "https://d.example/1")
        assert len(s) == 1
        s.add(far(301), "https://d.example/2")
        assert len(s) == 2
    with kind(uri, prefix=prefix, ttl=1, change_ttl=True) as s:
        for i in range(5):
            s.add(far(400 + i), f"https://e.example/{i}")
        time.sleep(2.5)
    with kind(uri, prefix=prefix, change_ttl=True) as s:  # (no TTL: the keys last again)
        assert len(s) == 2 == len(list(s.entries()))
        s.add(far(500), "https://f.example/1")
        assert len(s) == 3


def test_a_scan_after_a_reset_reads_the_keys_of_the_new_store(open_reset: Open) -> None:
    """``entries()`` (report, copy) decodes every record with the client's cached ids: after
    another client's reset it must not name the new store's pages after the old one's hosts."""
    prefix = "test:reset-scan"
    with open_reset(prefix) as a:
        a.add(far(0), "https://a.example/1", job="crawl-a")
        assert [e.key for e in a.entries()] == ["https://a.example/1"]
        with open_reset(prefix) as b:
            b.add(far(1), "https://b.example/1", job="crawl-b")
            b.add(far(2), "https://b.example/2", job="crawl-b")
        got = sorted((e.key, e.job) for e in a.entries())
        assert got == [("https://b.example/1", "crawl-b"), ("https://b.example/2", "crawl-b")]


def test_an_import_run_twice_logs_each_entry_once(open_reset: Open) -> None:
    """A second add of an entry with the same fingerprint (an import run again, a resent
    round) replaces its record and keeps its log member: a second member would read as live
    for good, and the log and every client's index would only grow."""
    prefix = "test:readd"
    entries = [
        Entry(f"https://a.example/{i}", far(i).fp, 5.0, None, far(i).wide) for i in range(300)
    ]
    with open_reset(prefix) as s:
        s.import_records(entries, [])
        s.import_records(entries, [])
        s.add(far(0), "https://a.example/0", text="again")
        assert len(s) == 300 and s.counters()["new_total"] == 300
        got = s.get("https://a.example/0")
        assert got is not None and got.text == "again"
        members = sum(len(log) for log in _logs(s))
        assert members == 300
        assert not s.compact()  # (no dead member to drop)


def _logs(s: RedisStore | RedisClusterStore) -> list[list[bytes]]:
    """The store's log (one per shard of a Cluster store)."""
    if isinstance(s, RedisStore):
        return [s._client.lrange(f"{{{s.prefix}}}:n", 0, -1)]
    return [s._client.lrange(sh.key("n"), 0, -1) for sh in s._shards]


def test_a_thread_that_adds_while_another_drops_the_ids_sends_no_old_id_with_the_new_epoch(
    redis_server: RedisServer,
) -> None:
    """The store is shared by a crawl's threads. One thread's refresh (after a refused call)
    must drop the old ids before it publishes the new epoch, or another thread can encode
    with the old ids and send the new epoch, which the script accepts. The refresh is held
    between its two steps while the other thread adds (a thread switch there)."""
    url, prefix = redis_server.url, "test:reset-threads"
    with RedisStore(url, prefix=prefix, reset=True) as a:
        a.add(far(0), "https://a.example/1", job="crawl-a")
        with RedisStore(url, prefix=prefix, reset=True) as b:
            b.add(far(1), "https://b.example/1", job="crawl-b")
            b.add(far(2), "https://a.example/x", job="crawl-b")
            names, held, added = a._names, threading.Event(), threading.Event()
            real_forget, calls = names.forget, []

            def forget() -> None:
                calls.append(1)
                if len(calls) == 1:  # (the first refresh: hold it in its window)
                    held.set()
                    added.wait(10)
                real_forget()

            names.forget = forget  # type: ignore[method-assign]
            refresh = threading.Thread(target=a.get, args=("https://a.example/x",))
            refresh.start()
            assert held.wait(10)
            a.add(far(3), "https://a.example/2", job="crawl-a")
            added.set()
            refresh.join(10)
            got = sorted((e.key, e.job) for e in b.entries())
            assert ("https://a.example/2", "crawl-a") in got
            assert not any(k == "https://b.example/2" for k, _ in got)
