"""Aliases (Rule.aliases, issue 43 item 3) in the in-process stores, against a brute-force
replay of the rule: a dropped page stays as a candidate for the page it was dropped for, judged
on its own fingerprints, and counts only while that page is live and within the bound."""

from __future__ import annotations

import random
import time
from pathlib import Path
from uuid import uuid4

import pytest

from nearduppipe.fingerprint.rule import Fingerprints, Rule, distances
from nearduppipe.stores import open_store

RULE = Rule(aliases=True)


def flip(x: int, bits: int, n: int, rng: random.Random) -> int:
    for b in rng.sample(range(bits), n):
        x ^= 1 << b
    return x


def brute(seq: list[tuple[str, Fingerprints]], rule: Rule) -> list[str | None]:
    """Each page's match (the kept page's key) or None, by a full scan of kept pages and
    aliases: the nearest valid candidate by (wide distance, 64-bit distance, age)."""
    entries: list[tuple[str, Fingerprints, int | None]] = []  # key, fps, kept page's index
    bound = rule.alias_threshold
    out: list[str | None] = []
    for key, fps in seq:
        best: tuple[tuple[int, int, int], int] | None = None
        for idx, (_, g, root) in enumerate(entries):
            d, dw = distances(g, fps)
            if not rule.is_near(d, dw):
                continue
            assert dw is not None
            target = idx if root is None else root
            if root is not None:
                wr = distances(entries[root][1], fps)[1]
                if bound is None or wr is None or wr > bound:
                    continue
            if best is None or (dw, d, idx) < best[0]:
                best = ((dw, d, idx), target)
        if best is None:
            entries.append((key, fps, None))
            out.append(None)
            continue
        out.append(entries[best[1]][0])
        if rule.aliases:
            entries.append((key, fps, best[1]))
    return out


def pages(kind: str, n: int, seed: int) -> list[tuple[str, Fingerprints]]:
    rng = random.Random(seed)
    seq: list[tuple[str, Fingerprints]] = []
    if kind == "random":
        return [
            (f"k{i}", Fingerprints(rng.getrandbits(64), rng.getrandbits(512))) for i in range(n)
        ]
    bases = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(n // 10)]
    for i in range(n):
        if kind == "clustered":  # variants of a few originals, near and far
            b = rng.choice(bases)
            f = Fingerprints(flip(b.fp, 64, rng.randint(0, 12), rng), flip(b.wide or 0, 512,
                             rng.randint(0, 90), rng))  # fmt: skip
        else:  # "chains": each page a small step from a recent one, drifting away
            prev = seq[-rng.randint(1, min(3, len(seq)))][1] if seq and rng.random() < 0.9 else (
                rng.choice(bases))  # fmt: skip
            f = Fingerprints(
                flip(prev.fp, 64, rng.randint(0, 5), rng),
                flip(prev.wide or 0, 512, rng.choice([20, 30, 40, 55, 61, 62]), rng),
            )
        seq.append((f"k{i}", f))
    return seq


@pytest.mark.parametrize("kind", ["random", "clustered", "chains"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_aliases_decide_as_a_full_scan(kind: str, seed: int) -> None:
    seq = pages(kind, 600, seed)
    want = brute(seq, RULE)
    with open_store("memory:", rule=RULE) as store:
        got = []
        for key, fps in seq:
            m = store.check_and_add(fps, key)
            got.append(m.key if m else None)
        assert got == want
        dropped = sum(w is not None for w in want)
        assert store.alias_count == dropped  # type: ignore[attr-defined]
        assert len(store) == len(seq) - dropped
        assert sorted(e.key for e in store.entries()) == sorted(
            k for (k, _), w in zip(seq, want, strict=True) if w is None
        )
    if kind != "random":
        assert want != brute(seq, Rule())  # (aliases changed some decision: the test can fail)


def test_the_bound_stops_a_drifting_chain() -> None:
    """Each page is near the one before it but drifts from the first: aliases drop the chain
    only while the first stays within the bound."""
    rng = random.Random(5)
    f = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
    seq = [("p0", f)]
    for i in range(1, 12):
        f = Fingerprints(flip(f.fp, 64, 1, rng), flip(f.wide or 0, 512, 40, rng))
        seq.append((f"p{i}", f))
    with open_store("memory:", rule=RULE) as store:
        got = [(m.key if (m := store.check_and_add(fps, k)) else None) for k, fps in seq]
    assert got == brute(seq, RULE)
    assert got[1] == "p0" and None in got[2:]  # (40 bits a step: past the bound within a few)
    # every page dropped was within the bound of the page it was dropped for
    bound = RULE.alias_threshold
    assert bound is not None
    for (_, fps), m in zip(seq, got, strict=True):
        if m is not None:
            kept = dict(seq)[m]
            assert (distances(kept, fps)[1] or 0) <= bound


def test_an_alias_counts_only_while_its_page_is_live() -> None:
    rng = random.Random(9)
    a = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
    b = Fingerprints(flip(a.fp, 64, 4, rng), flip(a.wide or 0, 512, 50, rng))
    c = Fingerprints(flip(b.fp, 64, 4, rng), flip(b.wide or 0, 512, 20, rng))
    assert distances(a, c)[1] is not None
    with open_store("memory:", rule=RULE) as store:
        assert store.check_and_add(a, "a") is None
        m = store.check_and_add(b, "b")
        assert m is not None and m.key == "a"
        assert store.get("b") is None  # (an alias is no entry)
        assert store.remove("a")
        m = store.check_and_add(c, "c")  # b's alias stands for a page that is gone
        assert m is None
        assert store.prune() == 1  # the dead alias
        assert store.alias_count == 0  # type: ignore[attr-defined]
        # a dropped page crawled again is judged again, not as its own alias
        m = store.check_and_add(b, "b")
        assert m is not None and m.key == "c"


def _crawl(store: object, seq: list[tuple[str, Fingerprints]]) -> list[str | None]:
    out = []
    for key, fps in seq:
        m = store.check_and_add(fps, key)  # type: ignore[attr-defined]
        out.append(m.key if m else None)
    return out


@pytest.mark.parametrize("snapshot", [True, False])
@pytest.mark.parametrize("kind", ["clustered", "chains"])
def test_sqlite_keeps_aliases_across_a_reopen(tmp_path, kind: str, snapshot: bool) -> None:
    """Half a crawl, the store closed and opened again (from its snapshot, or from its rows),
    the other half: the decisions of one crawl in a store that never closed."""
    import sqlite3

    seq = pages(kind, 500, 4)
    want = brute(seq, RULE)
    path = tmp_path / "s.sqlite"
    with open_store(str(path), rule=RULE) as store:
        got = _crawl(store, seq[:250])
    if not snapshot:
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM neardup_index")
    with open_store(str(path)) as store:
        assert store.rule.aliases
        assert store.format_version == 3
        assert (store._snapshot is not None) is snapshot  # type: ignore[attr-defined]
        assert store.alias_count == sum(w is not None for w in want[:250])  # type: ignore[attr-defined]
        got += _crawl(store, seq[250:])
        kept = sorted(k for (k, _), w in zip(seq, want, strict=True) if w is None)
        assert sorted(e.key for e in store.entries()) == kept
        assert len(store) == len(kept)
        dropped = next(k for (k, _), w in zip(seq, want, strict=True) if w is not None)
        assert store.get(dropped) is None
    assert got == want


def test_a_sqlite_store_without_aliases_stays_format_2(tmp_path) -> None:
    path = tmp_path / "s.sqlite"
    seq = pages("clustered", 100, 6)
    with open_store(str(path), rule=Rule()) as store:
        _crawl(store, seq)
        assert store.format_version == 2
    with open_store(str(path)) as store:
        assert not store.rule.aliases and store.format_version == 2
        assert store.alias_count == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["clustered", "chains"])
def test_persisted_stores_decide_as_a_full_scan(store_uri: str, kind: str) -> None:
    """sqlite and Redis (the check in its Lua script): the brute-force decisions, across a
    reopen, and the dropped pages are no entries."""
    seq = pages(kind, 400, 8)
    want = brute(seq, RULE)
    with open_store(store_uri, rule=RULE, reset=True) as store:
        got = _crawl(store, seq[:200])
        assert store.format_version in (3, 4)  # (sqlite 3, Redis 4: each one's newest)
    with open_store(store_uri) as store:
        assert store.rule.aliases
        got += _crawl(store, seq[200:])
        kept = sorted(k for (k, _), w in zip(seq, want, strict=True) if w is None)
        assert len(store) == len(kept)
        assert sorted(e.key for e in store.entries()) == kept
        dropped = [k for (k, _), w in zip(seq, want, strict=True) if w is not None]
        assert store.get(dropped[0]) is None
        assert len(list(store.decisions())) == len(dropped)
    assert got == want


def test_persisted_aliases_of_a_removed_page_stand_for_nothing(store_uri: str) -> None:
    rng = random.Random(9)
    a = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
    b = Fingerprints(flip(a.fp, 64, 4, rng), flip(a.wide or 0, 512, 50, rng))
    c = Fingerprints(flip(b.fp, 64, 4, rng), flip(b.wide or 0, 512, 20, rng))
    with open_store(store_uri, rule=RULE, reset=True) as store:
        assert store.check_and_add(a, "a") is None
        m = store.check_and_add(b, "b")
        assert m is not None and m.key == "a" and (m.distance, m.wide_distance) == distances(a, b)
        m = store.check_and_add(c, "c")  # near b, within the bound of a: a duplicate of a
        assert m is not None and m.key == "a" and (m.distance, m.wide_distance) == distances(a, c)
        assert len(store) == 1 and store.get("b") is None
        assert store.remove("a")
        assert store.prune() == 2  # b's and c's aliases: their page is gone
    with open_store(store_uri) as store:
        assert len(store) == 0
        assert store.check_and_add(c, "c") is None  # nothing stands for a any more
        m = store.check_and_add(b, "b")
        assert m is not None and m.key == "c"


def test_the_setting() -> None:
    from nearduppipe.settings import NearDupConfig, NearDupConfigError

    asked = NearDupConfig.from_settings({"NEARDUP_ALIASES": True}).rule
    assert asked.aliases and asked.aliases_given
    default = NearDupConfig.from_settings({}).rule  # (on, for new stores)
    assert default.aliases and not default.aliases_given
    for value in ("false", "", False):  # (-s NEARDUP_ALIASES= is false, as before 0.2)
        off = NearDupConfig.from_settings({"NEARDUP_ALIASES": value}).rule
        assert not off.aliases and off.aliases_given
    unset = NearDupConfig.from_settings({"NEARDUP_ALIASES": "None"}).rule
    assert unset.aliases and not unset.aliases_given
    assert not NearDupConfig.from_settings({"NEARDUP_SIMILARITY": None}).rule.aliases
    with pytest.raises(NearDupConfigError, match="NEARDUP_ALIASES must be true or false"):
        NearDupConfig.from_settings({"NEARDUP_ALIASES": "maybe"})
    with pytest.raises(NearDupConfigError, match="NEARDUP_ALIASES needs NEARDUP_SIMILARITY"):
        NearDupConfig.from_settings({"NEARDUP_ALIASES": True, "NEARDUP_SIMILARITY": None})


def test_the_default_is_for_new_stores(store_uri: str) -> None:
    """Aliases by default (NEARDUP_ALIASES unset) start a new store with them; a store made
    without them keeps its format, which earlier releases read, until they are asked for."""
    default = Rule(aliases=True, aliases_given=False)
    seq = pages("chains", 60, 4)
    with open_store(store_uri, rule=Rule(), reset=True) as store:
        _crawl(store, seq[:30])
        assert not store.rule.aliases
    with open_store(store_uri, rule=default) as store:
        assert not store.rule.aliases and store.format_version in (2, 3)  # (sqlite 2, Redis 3)
        assert _crawl(store, seq[30:]) == brute(seq, Rule())[30:]
    with open_store(store_uri, rule=RULE) as store:  # (asked: the store keeps them from now)
        assert store.rule.aliases and store.format_version in (3, 4)
    with open_store(store_uri, rule=default, reset=True) as store:  # (a new store)
        assert store.rule.aliases and store.format_version in (3, 4)
        assert _crawl(store, seq) == brute(seq, RULE)


def test_a_ttl_counts_entries_not_aliases(store_uri: str) -> None:
    """Under a TTL a Redis store counts its buckets' records (keys expire): entries, and the
    aliases apart; a writer without the TTL that takes the expiry off counts them again."""
    seq = pages("clustered", 300, 12)
    want = brute(seq, RULE)
    kept, gone = sum(w is None for w in want), []
    with open_store(store_uri, rule=RULE, reset=True, ttl=3600.0) as store:
        assert _crawl(store, seq) == want
        assert len(store) == kept and store.info().aliases == len(seq) - kept
        if "redis" in store_uri:  # a bucket expired whole: its records leave uncounted
            import redis

            client = redis.Redis.from_url(store_uri.split("?")[0])
            for bucket in client.scan_iter(store._k("b*")):  # type: ignore[attr-defined]
                gone = [rec[0] >= 4 for rec in client.hvals(bucket)]  # (an alias: flag bit 2)
                if any(gone):
                    client.delete(bucket)
                    break
            assert store.info().aliases == len(seq) - kept - sum(gone)
    with open_store(store_uri, ttl=None, change_ttl=True) as store:
        lost = len(gone) - sum(gone)  # (entries in the expired bucket)
        assert len(store) == kept - lost
        assert store.info().aliases == len(seq) - kept - sum(gone)


def _abc(seed: int = 9) -> tuple[Fingerprints, Fingerprints, Fingerprints]:
    """a; b near a; c near b, not near a, within the alias bound of a."""
    rng = random.Random(seed)
    a = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
    b = Fingerprints(flip(a.fp, 64, 4, rng), flip(a.wide or 0, 512, 50, rng))
    c = Fingerprints(flip(b.fp, 64, 4, rng), flip(b.wide or 0, 512, 20, rng))
    assert not RULE.is_near(*distances(a, c)) and RULE.is_near(*distances(b, c))
    assert (distances(a, c)[1] or 0) <= (RULE.alias_threshold or 0)
    return a, b, c


@pytest.mark.parametrize("again", ["add", "changed"])
def test_an_alias_stands_for_the_entry_it_was_dropped_for_on_every_backend(
    store_uri: str, again: str
) -> None:
    """The kept page stored again (an import of the same page, or a recrawl with other
    content): its aliases stand for nothing, in the in-process stores (a new id) as on Redis
    (a new sequence number)."""
    a, b, c = _abc()
    other = Fingerprints(a.fp ^ 0xFFFF_FFFF, (a.wide or 0) ^ ((1 << 300) - 1))
    for uri in ("memory:", store_uri):
        with open_store(uri, rule=RULE, reset=uri != "memory:") as store:
            assert store.check_and_add(a, "a") is None
            m = store.check_and_add(b, "b")
            assert m is not None and m.key == "a"
            if again == "add":
                store.add(a, "a")
            else:
                store.remove("a")
                store.add(other, "a")
            assert store.check_and_add(c, "c") is None, uri


def test_a_store_with_aliases_needs_a_verdict(store_uri: str) -> None:
    from nearduppipe.stores.base import StoreError

    with open_store(store_uri, rule=RULE, reset=True):
        pass
    with pytest.raises(StoreError, match="keeps aliases"):
        open_store(store_uri, rule=Rule.paper(3))


def test_sqlite_deletes_aliases_that_stand_for_nothing_and_keeps_its_snapshot(tmp_path) -> None:
    import sqlite3

    a, b, _ = _abc()
    path = str(tmp_path / "s.sqlite")
    with open_store(path, rule=RULE) as store:
        store.check_and_add(a, "a")
        assert store.check_and_add(b, "b") is not None
        store.remove("a")  # b's alias: standing for nothing from now on
    with open_store(path) as store:
        assert store.alias_count == 0  # type: ignore[attr-defined]
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT key FROM neardup WHERE key >= 'a:' AND key < 'a;'").fetchall()
    assert rows == []
    with open_store(path) as store:  # (the snapshot matches the rows again)
        assert store._snapshot is not None  # type: ignore[attr-defined]


def test_redis_sizes_its_reads_listpacks_and_compactions_by_entries_and_aliases(
    redis_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Aliases are records in the buckets and members of the log: a whole-store read plans
    by both counts, and so do the listpack advice and the compaction trigger at open."""
    import redis

    from nearduppipe.stores.redis import base

    uri = f"{redis_server.url}{'&' if '?' in redis_server.url else '?'}prefix=test:sizes"
    seq = pages("clustered", 200, 5)
    client = redis.Redis.from_url(redis_server.url)
    with open_store(uri, rule=RULE, reset=True) as store:
        _crawl(store, seq)
        meta = store._k("meta")  # type: ignore[attr-defined]
        n_aliases = int(client.hget(meta, "aliases") or 0)
        assert n_aliases > 0 and store._hint() == len(store) + n_aliases  # type: ignore[attr-defined]
    client.hset(meta, mapping={"dead": 12_000, "live": 1_000, "aliases": 20_000})
    compacted, sized = [], []
    monkeypatch.setattr(base, "compact", lambda shard: compacted.append(shard) or True)
    monkeypatch.setattr(base.RedisBase, "_check_listpack", lambda self, n: sized.append(n))
    open_store(uri).close()  # (12,000 dead members against 21,000 live records: kept)
    assert not compacted and sized == [21_000]
    client.hset(meta, "dead", 22_000)
    open_store(uri).close()
    assert len(compacted) == 1


def test_info_counts_the_aliases(store_uri: str) -> None:
    """`nearduppipe info` (and Store.info) counts a store's aliases beside its entries."""
    import json

    from ..support.cli import run

    seq = pages("clustered", 120, 7)
    want = brute(seq, RULE)
    with open_store(store_uri, rule=RULE, reset=True) as store:
        _crawl(store, seq)
        info = store.info()
    n = sum(w is not None for w in want)
    assert n > 0 and (info.entries, info.aliases) == (len(seq) - n, n)
    data = json.loads(run("info", store_uri, "--format", "json").stdout)
    assert (data["entries"], data["aliases"]) == (len(seq) - n, n)
    assert f"aliases:    {n} (dropped pages" in run("info", store_uri).stdout


def _other(store_uri: str, name: str) -> str:
    """A second store on ``store_uri``'s backend: a file beside it, or another prefix."""
    if store_uri.startswith("redis"):
        return f"{store_uri}-{name}"
    return str(Path(store_uri).with_name(f"{name}.sqlite"))


def test_imported_aliases_answer_as_the_source_does(store_uri: str) -> None:
    """Entries then aliases imported into a new store: the later pages of the crawl get the
    source's verdicts (and the brute force's), which entries alone do not give them."""
    seq = pages("clustered", 240, 11)
    want = brute(seq, RULE)
    with open_store(store_uri, rule=RULE, reset=True) as src:
        assert _crawl(src, seq[:160]) == want[:160]
        src_aliases = sorted(src.aliases())
        assert len(src_aliases) == src.info().aliases > 0
        with (
            open_store(_other(store_uri, "copy"), rule=RULE, reset=True) as dst,
            open_store(_other(store_uri, "bare"), rule=RULE, reset=True) as bare,
        ):
            dst.import_records(src.entries(), [])
            bare.import_records(src.entries(), [])
            assert dst.import_aliases(src.aliases()) == len(src_aliases)
            assert sorted(dst.aliases()) == src_aliases  # (times and jobs as they were)
            assert dst.info().aliases == len(src_aliases) and len(dst) == len(src)
            rest = seq[160:]
            assert _crawl(dst, rest) == _crawl(src, rest) == want[160:]
            assert _crawl(bare, rest) != want[160:]  # (the aliases decide some of them)


def test_an_alias_that_would_stand_for_nothing_is_not_imported(store_uri: str) -> None:
    from nearduppipe.stores import Alias, StoreError

    a, b, c = _abc()
    now = time.time()
    with open_store(store_uri, rule=RULE, reset=True, ttl=3600) as s:
        s.add(a, "https://x/kept", stored_at=now)
        s.add(b, "https://x/old", stored_at=now - 5000)  # (past the TTL, not yet swept)
        s.add(c, "https://x/entry", stored_at=now)

        def alias(key: str, root: str) -> Alias:
            return Alias(key, b.fp, now, root, b.wide, "job-1")

        got = s.import_aliases(
            [
                alias("https://x/a1", "https://x/kept"),
                alias("https://x/a2", "https://x/none"),  # no such page
                alias("https://x/a3", "https://x/old"),  # expired
                alias("https://x/entry", "https://x/kept"),  # the key's own entry stays
                alias("https://x/a4", "https://x/a1"),  # an alias stands for no alias
            ]
        )
        assert got == 1 and s.info().aliases == 1
        assert [(x.key, x.root, x.job) for x in s.aliases()] == [
            ("https://x/a1", "https://x/kept", "job-1")
        ]
        assert s.get("https://x/entry") is not None and s.get("https://x/a1") is None
    with open_store(_other(store_uri, "none"), rule=Rule(aliases=False), reset=True) as s:
        s.add(a, "https://x/kept")
        with pytest.raises(StoreError, match="keeps no aliases"):
            s.import_aliases([alias("https://x/a1", "https://x/kept")])
        assert list(s.aliases()) == [] and s.import_aliases([]) == 0


def test_only_aliases_that_stand_for_a_kept_page_are_listed(store_uri: str) -> None:
    """An alias whose kept page was stored again with other content, removed, or is past the
    TTL stands for nothing: ``aliases()`` leaves it out (a copy would make it stand for the
    page's new content, or for nothing)."""
    rng = random.Random(4)

    def crawl(s: object, names: tuple[str, ...]) -> None:
        for name in names:
            a = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
            b = Fingerprints(flip(a.fp, 64, 4, rng), flip(a.wide or 0, 512, 50, rng))
            assert s.check(a, f"https://x/{name}").status == "new"  # type: ignore[attr-defined]
            assert s.check(b, f"https://x/{name}-copy").status == "duplicate"  # type: ignore[attr-defined]

    with open_store(store_uri, rule=RULE, reset=True) as s:  # (no TTL: nothing swept)
        crawl(s, ("again", "removed", "fine"))
        assert len(list(s.aliases())) == 3
        s.add(_abc()[0], "https://x/again")  # (other content: a new entry)
        assert s.remove("https://x/removed")
        assert [(x.key, x.root) for x in s.aliases()] == [("https://x/fine-copy", "https://x/fine")]
    t = [1.0e9]
    with open_store(
        _other(store_uri, "ttl"), rule=RULE, reset=True, ttl=100, clock=lambda: t[0]
    ) as s:
        crawl(s, ("old",))
        t[0] += 60
        crawl(s, ("fine",))
        assert len(list(s.aliases())) == 2
        t[0] += 50  # ("old" stored 110 s ago, "fine" 50 s ago)
        assert [(x.key, x.root) for x in s.aliases()] == [("https://x/fine-copy", "https://x/fine")]


def test_importing_aliases_twice_changes_nothing(store_uri: str) -> None:
    seq = pages("clustered", 120, 8)
    with open_store(store_uri, rule=RULE, reset=True) as src:
        _crawl(src, seq)
        with open_store(_other(store_uri, "twice"), rule=RULE, reset=True) as dst:
            dst.import_records(src.entries(), [])
            n = dst.import_aliases(src.aliases())
            before = (dst.info().aliases, sorted(dst.aliases()), _log_length(dst))
            assert dst.import_aliases(src.aliases()) == n > 0
            assert (dst.info().aliases, sorted(dst.aliases()), _log_length(dst)) == before


def _log_length(store: object) -> int | None:
    """The Redis store's log (one member per record written: a second would never compact)."""
    client = getattr(store, "_client", None)
    return None if client is None else int(client.llen(store._k("n")))  # type: ignore[attr-defined]


def test_copy_carries_the_aliases(store_uri: str, tmp_path, redis_server) -> None:
    """`nearduppipe copy` to a sqlite file and to a Redis store: the aliases come along and
    the copies answer the rest of the crawl as the source does."""
    from ..support.cli import run

    seq = pages("clustered", 200, 3)
    want = brute(seq, RULE)
    with open_store(store_uri, rule=RULE, reset=True) as store:
        _crawl(store, seq[:140])
        n = store.info().aliases
    assert n > 0
    join = "&" if "?" in redis_server.url else "?"
    copies = [str(tmp_path / "copy.sqlite"), f"{redis_server.url}{join}prefix=test:{uuid4()}"]
    for copy_uri in copies:
        out = run("copy", store_uri, copy_uri)
        assert out.returncode == 0, out.stderr
        assert f"fingerprints, {n} aliases (dropped pages kept as candidates) and" in out.stdout
        assert "not copied" not in out.stderr
        with open_store(copy_uri) as copy:
            assert copy.rule.aliases and copy.info().aliases == n
            assert _crawl(copy, seq[140:]) == want[140:]
    with open_store(store_uri) as store:  # a kept page removed: its aliases stand for nothing
        root = next(iter(store.aliases())).root
        left = sum(a.root != root for a in store.aliases())
        assert store.remove(root)
    out = run("copy", store_uri, str(tmp_path / "again.sqlite"))
    assert out.returncode == 0, out.stderr
    assert f"fingerprints, {left} aliases" in out.stdout
    if store_uri.startswith("redis"):  # (a sqlite store counts at its open only the aliases
        # whose kept page it holds)
        warning = f"{n - left} of its {n} aliases stand for no page of the copy"
        assert warning in out.stderr


def test_copy_names_the_aliases_it_leaves(store_uri: str, redis_server) -> None:
    """A destination that keeps no aliases (an empty Redis store made without them; with
    --reset it would be a new store, which keeps them) gets the entries, and the copy says
    what it left."""
    from ..support.cli import run

    seq = pages("clustered", 80, 3)
    n = sum(w is not None for w in brute(seq, RULE))
    with open_store(store_uri, rule=RULE, reset=True) as store:
        _crawl(store, seq)
    join = "&" if "?" in redis_server.url else "?"
    dst = f"{redis_server.url}{join}prefix=test:{uuid4()}"
    open_store(dst, rule=Rule(aliases=False), reset=True).close()  # (empty: no --reset)
    out = run("copy", store_uri, dst)
    assert out.returncode == 0, out.stderr
    assert f"its {n} aliases (dropped pages kept as candidates) are not copied" in out.stderr
    with open_store(dst, read_only=True) as copy:
        assert not copy.rule.aliases and len(copy) == len(seq) - n and copy.info().aliases == 0
