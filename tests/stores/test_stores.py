"""One behavioural suite for every store backend: the rule, one entry per key, revisits,
forgetting, TTL and bounded decisions, checked against a brute-force model of the rule."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nearduppipe import Match, Store, StoreError, open_store
from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.index.search import kernels
from nearduppipe.stores.base import BadKey, Entry, Verdict
from nearduppipe.stores.indexed import IndexedStore

from ..support.bound import dispatched
from ..support.forked import exit_code, fork

A = 0x0123_4567_89AB_CDEF
W = (1 << 511) | 0xDEADBEEF  # a wide fingerprint


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(params=["memory", "sqlite", "redis", "redis6"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A function opening a fresh store of that backend (reopenable: same place each time);
    ``redis6`` is a Redis 6.2 server, where the store calls its script, not its library."""
    if request.param in ("redis", "redis6"):
        server = request.getfixturevalue(request.param + "_server")
        prefix = f"test:{request.node.name}"
        opened: list[Store] = []

        def open_redis(reset: bool = False, **options: object) -> Store:
            s = open_store(server.url, prefix=prefix, reset=reset or not opened, **options)  # type: ignore[arg-type]
            opened.append(s)
            return s

        yield open_redis
        for s in opened:
            s.close()
        return
    uri = "memory:" if request.param == "memory" else str(tmp_path / "s.sqlite")
    opened2: list[Store] = []

    def open_local(reset: bool = False, **options: object) -> Store:
        s = open_store(uri, reset=reset, **options)  # type: ignore[arg-type]
        opened2.append(s)
        return s

    yield open_local
    for s in opened2:
        s.close()


def flip(x: int, n: int, bits: int, rng: random.Random) -> int:
    for b in rng.sample(range(bits), n):
        x ^= 1 << b
    return x


class Model:
    """The rule, by brute force over every stored entry."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.entries: dict[str, tuple[Fingerprints, str | None, int]] = {}  # key → fps, job, seq
        self.seq = 0

    def near(self, fps: Fingerprints, exclude: str | None) -> list[Match]:
        found = []
        for key, (mine, _, seq) in self.entries.items():
            if key == exclude:
                continue
            d = (mine.fp ^ fps.fp).bit_count()
            dw = (
                (mine.wide ^ fps.wide).bit_count()
                if mine.wide is not None and fps.wide is not None
                else None
            )
            if self.rule.is_near(d, dw):
                found.append((dw if dw is not None else 8 * d, d, seq, Match(key, mine.fp, d, dw)))
        return [m for *_, m in sorted(found, key=lambda x: x[:3])]

    def check(self, fps: Fingerprints, key: str, job: str | None) -> Verdict:
        own = self.entries.get(key)
        if own is not None:
            if job is not None and own[1] == job:
                return Verdict("again")
            mine = own[0]
            d = (mine.fp ^ fps.fp).bit_count()
            dw = (
                (mine.wide ^ fps.wide).bit_count()
                if mine.wide is not None and fps.wide is not None
                else None
            )
            if self.rule.is_near(d, dw):
                self.entries[key] = (mine, job, own[2])
                return Verdict("unchanged", Match(key, mine.fp, d, dw))
        near = self.near(fps, key)
        if near:
            return Verdict("duplicate", near[0])
        self.entries.pop(key, None)
        self.entries[key] = (fps, job, self.seq)
        self.seq += 1
        return Verdict("changed" if own is not None else "new")


def test_same_answers_as_brute_force(backend: object) -> None:
    """Random, clustered and adversarial pages: revisits with and without edits, near and far
    copies, pages without wide fingerprints, removals and reopens."""
    rng = random.Random(17)
    rule = Rule()
    model = Model(rule)
    store = backend()  # type: ignore[operator]
    keys = [f"https://site/{i}" for i in range(400)]
    centres = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(30)]
    counts = {"duplicate": 0, "unchanged": 0, "changed": 0, "again": 0, "new": 0}
    for step in range(2500):
        kind = rng.random()
        key = rng.choice(keys)
        job = rng.choice(["j1", "j2", None])
        if kind < 0.15 and key in model.entries:  # a revisit, lightly edited or not
            mine = model.entries[key][0]
            fps = Fingerprints(
                flip(mine.fp, rng.randint(0, 4), 64, rng),
                None if mine.wide is None else flip(mine.wide, rng.randint(0, 30), 512, rng),
            )
        elif kind < 0.5:  # near a cluster centre: 64-bit and wide distances across the thresholds
            c = rng.choice(centres)
            fps = Fingerprints(
                flip(c.fp, rng.randint(0, 10), 64, rng),
                flip(c.wide or 0, rng.randint(0, 90), 512, rng),
            )
        elif kind < 0.6:  # a format-1 style entry: no wide fingerprint
            c = rng.choice(centres)
            fps = Fingerprints(flip(c.fp, rng.randint(0, 5), 64, rng), None)
        elif kind < 0.65:  # block boundaries and extremes
            fps = Fingerprints(
                rng.choice([0, (1 << 64) - 1, 1 << 63, (1 << 21) - 1]),
                rng.choice([None, 0, (1 << 512) - 1]),
            )
        else:
            fps = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
        if kind > 0.97 and model.entries:
            gone = rng.choice(list(model.entries))
            assert store.remove(gone)
            del model.entries[gone]
            assert store.get(gone) is None and not store.remove(gone)
            continue
        want = model.check(fps, key, job)
        got = store.check(fps, key, job=job)
        assert got == want, (step, key)
        counts[got.status] += 1
        # reopen: everything persisted (memory: nothing to reopen)
        if step % 500 == 499 and not store.uri.startswith("memory"):
            store.close()
            store = backend()  # type: ignore[operator]
        if step % 97 == 0:
            q = rng.choice(centres)
            assert store.near(q) == model.near(q, None)
    assert all(n > 20 for n in counts.values()), counts
    assert len(store) == len(model.entries)
    if isinstance(store, IndexedStore):  # its verdict bound the code the dispatcher picks
        assert store.near(centres[0])
        index = store._index
        args = (index.hit_ids, index.hit_distances, store._wide, store._has_wide, store._times)
        args += (store._query_wide.words(None), True, 0.0, -1, 8, 61, 3, store._dw, store._sel[:1])
        assert store._verdicts is dispatched(kernels().verdicts, *args)
    got_entries = [(e.key, e.fingerprints) for e in store.entries()]
    assert got_entries == [
        (k, v[0]) for k, v in sorted(model.entries.items(), key=lambda x: x[1][2])
    ]


def test_revisits_and_one_entry_per_key(backend: object) -> None:
    store = backend()  # type: ignore[operator]
    a = Fingerprints(A, W)
    assert store.check(a, "u", job="crawl1") == Verdict("new")
    assert store.check(a, "u", job="crawl1") == Verdict("again")  # same job: a retry
    assert store.check(Fingerprints(A ^ 1, W ^ 3), "u", job="crawl2") == Verdict(
        "unchanged", Match("u", A, 1, 2)
    )
    changed = Fingerprints(A ^ 0xFFFF_0000_FFFF, W ^ ((1 << 200) - 1))
    assert store.check(changed, "u", job="crawl3") == Verdict("changed")
    assert len(store) == 1
    entry = store.get("u")
    assert entry is not None and entry.fingerprints == changed and entry.job == "crawl3"
    # a copy of the new text is dropped against it; a copy of the old one is not
    assert store.check(changed, "copy-new").status == "duplicate"
    assert store.check(a, "copy-old").status == "new"
    assert store.counters()["revisits_unchanged"] == 1
    assert store.counters()["revisits_changed"] == 1
    assert [d.key for d in store.decisions()] == ["copy-new"]
    assert all(d.key != d.matched_key for d in store.decisions())


def test_a_running_jobs_keys_are_claimed_not_revisited(backend: object) -> None:
    """docs/verdicts.md: another crawl's check of a key stored by a job whose lease holds is
    ``claimed`` and writes nothing (before, ``unchanged`` gave the entry to the second crawl,
    whose own item then came back ``unchanged`` too: a page neither exported)."""
    store = backend(clock=Clock())  # type: ignore[operator]
    a = Fingerprints(A, W)
    store.lease("crawl1", 60)
    assert store.check(a, "u", job="crawl1") == Verdict("new")
    near = Fingerprints(A ^ 1, W ^ 3)
    assert store.check(near, "u", job="crawl2") == Verdict("claimed", Match("u", A, 1, 2))
    changed = Fingerprints(A ^ 0xFFFF_0000_FFFF, W ^ ((1 << 200) - 1))
    assert store.check(changed, "u", job="crawl2").status == "claimed"  # whatever the content
    entry = store.get("u")
    assert entry is not None and entry.job == "crawl1" and entry.fingerprints == a
    assert store.check(a, "u", job="crawl1") == Verdict("again")  # its own item still passes
    # a key made from the content (no job) is one page whoever asks: not claimed
    assert store.check(near, "u").status == "unchanged"
    assert store.counters()["claimed"] == 2
    assert store.info().claimed == 2
    # the lease ends (released, or run out): the next crawl's check is a revisit again
    store.lease("crawl1", 0)
    assert store.check(near, "u", job="crawl3").status == "unchanged"
    store.lease("crawl3", 60)
    assert store.check(near, "u", job="crawl4").status == "claimed"
    store.lease("crawl3", 0)
    with pytest.raises(ValueError):
        store.lease("", 10)
    with pytest.raises(ValueError):
        store.lease("crawl1", float("nan"))


def test_rule_is_the_stores_and_verdict_uses_wide(backend: object) -> None:
    store = backend()  # type: ignore[operator]
    assert store.rule == Rule()
    t = store.rule.wide_threshold
    assert t == 61  # floor(512 * acos(0.93) / pi)
    store.add(Fingerprints(A, W), "orig")
    # 64-bit within the radius but wide beyond the threshold: not a near-duplicate
    assert store.check(Fingerprints(A ^ 0b11, W ^ ((1 << (t + 1)) - 1)), "far").status == "new"
    assert store.remove("far")
    # 64-bit at the radius (10) and wide at the threshold: a near-duplicate
    r = store.rule.radius
    v = store.check(Fingerprints(A ^ ((1 << r) - 1), W ^ ((1 << t) - 1)), "near")
    assert v.status == "duplicate" and v.match == Match("orig", A, r, t)
    # beyond the 64-bit radius: never a candidate
    assert store.check(Fingerprints(A ^ ((1 << (r + 1)) - 1), W), "beyond").status == "new"
    # no wide fingerprint on one side: the 64-bit rule at legacy_distance (3)
    assert store.check(Fingerprints(A ^ 0x1F0000, None), "old1").status == "new"
    assert store.check(Fingerprints(A ^ 0x7, None), "old2").match == Match("orig", A, 3, None)


def test_paper_rule(tmp_path: Path) -> None:
    with open_store("memory:", rule=Rule.paper(3)) as s:
        s.add(A, "a")
        assert s.check_and_add(A ^ 0b111, "b") == Match("a", A, 3)
        assert s.check_and_add(A ^ 0b1111 << 8, "c") is None  # 4 bits: kept
        assert s.check_and_add(Fingerprints(A ^ 1, 0), "d") == Match("a", A, 1)  # wide ignored


def test_near_is_sorted_and_read_only(backend: object) -> None:
    store = backend()  # type: ignore[operator]
    store.add(Fingerprints(A ^ 0b111, W), "far")
    store.add(Fingerprints(A ^ 0b1, W ^ 1), "near")
    store.add(Fingerprints(A ^ 0b10, W), "nearest")
    assert store.near(Fingerprints(A, W)) == [
        Match("nearest", A ^ 2, 1, 0),
        Match("far", A ^ 7, 3, 0),
        Match("near", A ^ 1, 1, 1),
    ]
    assert store.near(Fingerprints(A, W), exclude="nearest")[0].key == "far"
    assert len(store) == 3 and store.decision_count() == 0


def test_forget_removes_from_every_table(backend: object) -> None:
    store = backend()  # type: ignore[operator]
    for i in range(50):
        store.add(Fingerprints(A ^ (1 << i), W), f"k{i}")
    for i in range(0, 50, 2):
        assert store.remove(f"k{i}")
    assert len(store) == 25
    assert {m.key for m in store.near(Fingerprints(A, W))} == {f"k{i}" for i in range(1, 50, 2)}
    assert store.check(Fingerprints(A ^ 1, W), "k0").status == "duplicate"  # k1 still there


def test_bad_keys_and_closed(backend: object) -> None:
    store = backend()  # type: ignore[operator]
    for bad in ["k\ud800", "", "x" * 70_000, 42]:
        with pytest.raises(BadKey):
            store.check(A, bad)
    with pytest.raises(ValueError):
        store.check(-5, "k")
    assert len(store) == 0
    store.check(A, "ok", text="sample \udc80 with a lone surrogate")
    assert store.get("ok").text == "sample \ufffd with a lone surrogate"
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError):
        store.check(A, "k")


def test_every_call_refuses_bad_arguments_and_writes_nothing(backend: object) -> None:
    """The public calls check their arguments once, in ``Store`` (stores/checks.py), for
    every backend alike: before, the Redis checks did not clean a job, the Cluster's ``add``
    cleaned nothing. A refused call leaves the store as it was."""
    store = backend()  # type: ignore[operator]
    store.add(Fingerprints(A, W), "kept", job="j")
    bad_fps = [
        None,
        "x",
        -1,
        1 << 64,
        1.5,
        True,
        Fingerprints(A, 1 << 512),
        Fingerprints("1", None),
    ]
    for fps in bad_fps:
        for call in (
            lambda f: store.check(f, "k"),
            lambda f: store.near(f),
            lambda f: store.add(f, "k"),
        ):
            with pytest.raises((TypeError, ValueError)):
                call(fps)
    for key in [None, 7, "", "x" * 70_000, "k\ud800"]:
        for call in (
            lambda k: store.check(A, k),
            lambda k: store.add(A, k),
            lambda k: store.near(A, exclude=k if k is not None else 0),
            lambda k: store.get(k),
            lambda k: store.remove(k),
        ):
            with pytest.raises(BadKey):
                call(key)
    for kw in [{"text": 5}, {"job": b"j"}, {"source": "other"}]:
        with pytest.raises((TypeError, ValueError)):
            store.check(A, "k", **kw)
    for t in [float("nan"), float("inf"), "soon", None]:
        if t is not None:
            with pytest.raises(ValueError):
                store.add(A, "k", stored_at=t)
    bad_entry = Entry("k2", A ^ 0xFF, float("nan"))
    with pytest.raises(ValueError):
        store.import_records([bad_entry], [])
    assert len(store) == 1 and store.get("k") is None and store.get("k2") is None
    assert [e.key for e in store.entries()] == ["kept"]
    # lone surrogates in a job, a text or an imported entry are stored as U+FFFD everywhere
    store.check(Fingerprints(~A & ((1 << 64) - 1), None), "s", text="a\udc80", job="j\ud800")
    got = store.get("s")
    assert got is not None and (got.text, got.job) == ("a\ufffd", "j\ufffd")
    far = Fingerprints(A ^ 0xFFFF_FFFF_0000_0000, None)
    store.import_records([Entry("i", far.fp, 1_000.0, "t\udc80", None, "j\udc80")], [])
    got = store.get("i")
    assert got is not None and (got.text, got.job, got.stored_at) == ("t\ufffd", "j\ufffd", 1_000.0)


def test_columns_are_the_entries(backend: object) -> None:
    """``Store.columns`` (the arrays ``dedup --against`` joins) holds what ``entries`` reads,
    row for row, keys read only for the rows asked, on every backend."""
    rng = random.Random(4)
    store = backend()  # type: ignore[operator]
    for i in range(60):
        wide = rng.getrandbits(512) if i % 3 else None
        store.add(Fingerprints(rng.getrandbits(64), wide), f"k{i}", stored_at=1000.0 + i)
    store.remove("k7")
    cols = store.columns()
    got = {}
    keys = cols.keys(np.arange(len(cols.fp)))
    for r, key in enumerate(keys):
        wide = int.from_bytes(cols.wide[r].astype("<u8").tobytes(), "little")
        got[key] = (int(cols.fp[r]), wide if cols.has_wide[r] else None, float(cols.stored_at[r]))
    want = {e.key: (e.fingerprint, e.wide, e.stored_at) for e in store.entries()}
    assert got == want and len(got) == 59
    assert cols.keys(np.array([2, 0])) == [keys[2], keys[0]]


def test_ttl_with_an_injected_clock(backend: object) -> None:
    clock = Clock()
    store = backend(ttl=3600, clock=clock)  # type: ignore[operator]
    store.add(Fingerprints(A, W), "old")
    clock.t += 3599
    assert store.check(Fingerprints(A, W), "copy1").status == "duplicate"
    clock.t += 2
    assert store.check(Fingerprints(A, W), "copy2").status == "new"  # "old" expired
    assert store.check(Fingerprints(A, W), "old").status == "duplicate"  # its own entry expired


def test_decisions_are_bounded(backend: object) -> None:
    store = backend(max_decisions=10)  # type: ignore[operator]
    store.add(Fingerprints(A, W), "orig")
    for i in range(25):
        assert store.check(Fingerprints(A, W), f"dup{i}").status == "duplicate"
    assert store.decision_count() == 10
    assert [d.key for d in store.decisions()] == [f"dup{i}" for i in range(15, 25)]
    c = store.counters()
    assert c["decisions_total"] == 25 and c["decisions_trimmed"] == 15


def test_check_is_atomic_across_threads(backend: object) -> None:
    # 8 threads each send one member of every group at once: exactly one per group is kept.
    store = backend()  # type: ignore[operator]
    rng = np.random.default_rng(5)
    groups = rng.integers(0, 1 << 63, 200, dtype=np.uint64).tolist()
    kept: list[str] = []
    barrier = threading.Barrier(8)

    def worker(t: int) -> None:
        barrier.wait()
        for g, fp in enumerate(groups):
            if store.check(Fingerprints(fp ^ (1 << t), W ^ g), f"g{g}/t{t}").kept:
                kept.append(f"g{g}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(kept) == sorted(f"g{g}" for g in range(len(groups)))
    assert len(store) == 200 and store.decision_count() == 200 * 7


def test_text_samples_and_import(backend: object, tmp_path: Path) -> None:
    store = backend()  # type: ignore[operator]
    assert store.check(Fingerprints(A, W), "https://a/1", text="原文 original").status == "new"
    assert store.check(Fingerprints(A, W), "https://a/2", text="副本 copy").status == "duplicate"
    store.add(A ^ 0xFF00_0000, "https://a/3", job="j")  # no sample, no wide
    assert [e.text for e in store.entries()] == ["原文 original", None]
    assert [d.text for d in store.decisions()] == ["副本 copy"]
    with open_store(str(tmp_path / "copy.sqlite")) as dst:
        assert dst.import_records(store.entries(), store.decisions()) == 2

        def same(a: list[tuple[object, ...]], b: list[tuple[object, ...]], t: int) -> None:
            assert [x[:t] + x[t + 1 :] for x in a] == [x[:t] + x[t + 1 :] for x in b]
            assert all(abs(x[t] - y[t]) < 0.01 for x, y in zip(a, b, strict=True))  # type: ignore[operator]

        same(list(dst.entries()), list(store.entries()), 2)
        same(list(dst.decisions()), list(store.decisions()), 5)


def test_forget_command_reads_keys_from_arguments_files_and_stdin(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "f.sqlite"
    with open_store(str(path)) as s:
        for i in range(6):
            s.add(Fingerprints(A ^ (i << 30), W), f"https://x/{i}")
    keys = tmp_path / "keys.txt"
    keys.write_text("https://x/2\nhttps://x/3\n\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "nearduppipe.cli",
            "forget",
            str(path),
            "https://x/0",
            "--file",
            str(keys),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and "forgot 3 pages" in run.stdout, run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "nearduppipe.cli", "forget", str(path), "--file", "-"],
        input="https://x/4\nhttps://x/nope\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "forgot 1 pages" in run.stdout and "1 not stored" in run.stdout
    with open_store(str(path), read_only=True) as s:
        assert sorted(e.key for e in s.entries()) == ["https://x/1", "https://x/5"]
        assert [m.key for m in s.near(Fingerprints(A, W))] == ["https://x/1", "https://x/5"]


def test_counts_per_source_add_up_across_reopen_and_forget(
    backend: object, request: pytest.FixtureRequest
) -> None:
    """Every verdict is counted for its source (the middleware's pages, the pipeline's items),
    the counts survive a reopen, and forgetting keys changes the entries, not the counts."""
    rng = random.Random(7)
    expected = {s: dict.fromkeys(STATUS_FIELDS.values(), 0) for s in ("pages", "items")}
    store = backend()  # type: ignore[operator]
    bases = [rng.getrandbits(64) for _ in range(20)]
    for step in range(400):
        group = rng.randrange(len(bases))
        fp = flip(bases[group], rng.choice([0, 1, 2, 12]), 64, rng)
        source = rng.choice(["pages", "items"])
        key = f"https://x.example/{group}/{rng.randrange(3)}"
        verdict = store.check(Fingerprints(fp, None), key, job=f"job{step // 100}", source=source)
        expected[source][STATUS_FIELDS[verdict.status]] += 1
    for field in ("unique", "dropped", "revisits_unchanged", "revisits_changed", "again"):
        assert expected["pages"][field] > 0 and expected["items"][field] > 0, field

    def tallies(s: Store) -> dict[str, dict[str, int]]:
        info = s.info()
        got = {"pages": info.pages.as_dict(), "items": info.items.as_dict()}
        for d in got.values():
            d.pop("checked")
        return got

    assert tallies(store) == expected
    assert store.info().pages_seen == 400 and store.info().unique == len(store)
    if request.node.callspec.params["backend"] != "memory":
        store.close()
        store = backend()  # type: ignore[operator]
        assert tallies(store) == expected
    entries = len(store)
    for key in [e.key for e in store.entries()][:5]:
        assert store.remove(key)
    assert len(store) == entries - 5
    assert tallies(store) == expected and store.info().unique == entries


STATUS_FIELDS = {
    "new": "unique",
    "duplicate": "dropped",
    "unchanged": "revisits_unchanged",
    "changed": "revisits_changed",
    "again": "again",
    "claimed": "claimed",  # (no lease taken in this test: never answered)
}


def test_a_store_from_before_new_entries_were_counted(tmp_path: Path, redis_server: object) -> None:
    """A format-2 store written before ``new_total`` was counted takes its entries as the
    count of pages stored, when opened for writing (and when read)."""
    import json
    import sqlite3

    path = tmp_path / "old.sqlite"
    redis_url = redis_server.url  # type: ignore[attr-defined]
    for uri, options in ((str(path), {}), (redis_url, {"prefix": "test:old-counts"})):
        with open_store(uri, reset=True, **options) as s:  # type: ignore[arg-type]
            for i in range(5):
                s.check(Fingerprints(rng_fp(i), None), f"k{i}")
        if uri == str(path):
            with sqlite3.connect(path) as conn:
                (raw,) = conn.execute("SELECT value FROM neardup WHERE key = 'm:state'").fetchone()
                state = json.loads(raw)
                del state["new_total"]
                conn.execute(
                    "UPDATE neardup SET value = ? WHERE key = 'm:state'", (json.dumps(state),)
                )
        else:
            import redis

            client = redis.Redis.from_url(redis_url)
            assert client.hdel("{test:old-counts}:meta", "new_total") == 1
        with open_store(uri, read_only=True, **options) as s:  # type: ignore[arg-type]
            assert s.info().unique == 5 and s.info().pages_seen == 5
        with open_store(uri, **options) as s:  # type: ignore[arg-type]
            s.check(Fingerprints(rng_fp(9), None), "k9")
            assert s.info().unique == 6 and s.info().pages.unique == 6
            assert s.remove("k0")
        with open_store(uri, read_only=True, **options) as s:  # type: ignore[arg-type]
            assert s.info().unique == 6 and len(s) == 5


def rng_fp(i: int) -> int:
    return random.Random(i).getrandbits(64)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
@pytest.mark.parametrize("uri", ["memory:", "sqlite"])
def test_a_forked_child_reads_the_store_but_cannot_write(uri: str, tmp_path: Path) -> None:
    """The in-process stores keep their columns in memory shared with a forked child (see
    index/columns.py): the child's search answers, its writes are refused, the parent's go on."""
    import os

    store = open_store(str(tmp_path / "s.sqlite") if uri == "sqlite" else uri)
    store.check(Fingerprints(A, W), "a")
    pid = fork()
    if pid == 0:
        code = 1
        try:
            found = [m.key for m in store.near(Fingerprints(A ^ 1, W))]
            try:
                store.check(Fingerprints(~A & (2**64 - 1), None), "b")
                code = 3
            except StoreError as e:
                code = 0 if found == ["a"] and "forked child" in str(e) else 2
            store.close()  # (the parent's writer, connections and lock stay the parent's)
        finally:
            os._exit(code)
    try:
        assert exit_code(pid) == 0
        assert store.check(Fingerprints(~A & (2**64 - 1), None), "b").status == "new"
    finally:
        store.close()
