"""A batch's kept records against a store (batch/against.py), on real sqlite files and a real
redis-server: a first export added to the store, a second export of which 30 % repeats the first
checked against it (every repeat named with its stored key, nothing new dropped, against a
brute-force scan), ``add`` twice idempotent, reads that never write, and the store's own rule
and scope enforced."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from nearduppipe.batch.against import Against, against_rule, check_against
from nearduppipe.cli._stores import open_cli_store
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_text
from nearduppipe.fingerprint.rule import Fingerprints, Rule, distances
from nearduppipe.stores import StoreError
from nearduppipe.stores.scope import scope_of

from ..fingerprint.test_compact_fingerprint import vocabulary

PARAMS = FingerprintParams()
WORDS = vocabulary(seed=32)
Record = tuple[str, str]  # key, text


def _text(rng: random.Random, n: int = 220) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _edit(rng: random.Random, text: str) -> str:
    """A light edit: two words replaced."""
    words = text.split()
    for _ in range(2):
        words[rng.randrange(len(words))] = rng.choice(WORDS)
    return " ".join(words)


def _fingerprinted(records: list[Record]) -> list[tuple[int, str, Fingerprints]]:
    out = []
    for i, (key, text) in enumerate(records):
        fps = fingerprint_text(text, PARAMS).fingerprints
        assert fps is not None
        out.append((i, key, fps))
    return out


def _kept(rows: list[tuple[int, str, Fingerprints]], rule: Rule) -> list[Any]:
    """The batch's kept records, by brute force: the first of each connected group."""
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(rows)):
        for j in range(i):
            if rule.is_near(*distances(rows[i][2], rows[j][2])):
                parent[max(root(i), root(j))] = min(root(i), root(j))
    return [r for r in rows if root(r[0]) == r[0]]


def _exports(seed: int) -> tuple[list[Record], list[Record], dict[int, str]]:
    """200 distinct records; then 200 of which 60 repeat the first (20 under the same key, 20
    exact copies under new keys, 20 light edits under new keys): the repeats' stored keys."""
    rng = random.Random(seed)
    first = [(f"http://one.test/p{i}", _text(rng)) for i in range(200)]
    second: list[Record] = []
    planted: dict[int, str] = {}
    sources = rng.sample(range(200), 60)
    for j in range(200):
        if j % 10 < 3:  # 30 %
            key, text = first[sources.pop()]
            kind = len(planted) % 3
            if kind == 1:
                second.append((f"http://two.test/copy{j}", text))
            elif kind == 2:
                second.append((f"http://two.test/edit{j}", _edit(rng, text)))
            else:
                second.append((key, text))
            planted[j] = key
        else:
            second.append((f"http://two.test/q{j}", _text(rng)))
    return first, second, planted


def _brute(
    stored: dict[str, Fingerprints], key: str, fps: Fingerprints, rule: Rule
) -> tuple[str, set[str]] | None:
    """What the store should answer: ``unchanged`` (own key near) or ``duplicate`` (the set of
    other near keys), from a scan of every stored entry."""
    own = stored.get(key)
    if own is not None and rule.is_near(*distances(own, fps)):
        return "unchanged", {key}
    near = {k for k, f in stored.items() if k != key and rule.is_near(*distances(f, fps))}
    return ("duplicate", near) if near else None


def _snapshot(store: Any) -> tuple[Any, ...]:
    return len(store), sorted(store.entries()), store.counters(), store.decision_count()


def test_a_second_export_against_the_first_names_every_repeat(store_uri: str) -> None:
    first, second, planted = _exports(seed=3)
    rule = Rule()
    with open_cli_store(store_uri, read_only=False) as store:
        assert against_rule(store, scope="global", extractor="trafilatura") == rule
        kept1 = _kept(_fingerprinted(first), rule)
        result = check_against(store, kept1, add=True)
        assert result.matches == [] and result.added == len(kept1) == len(store)
        stored = {key: fps for _, key, fps in kept1}
    rows2 = _fingerprinted(second)
    kept2 = _kept(rows2, rule)
    assert {r[0] for r in kept2} >= set(planted)  # (the repeats repeat nothing in export 2)
    with open_cli_store(store_uri, read_only=True, must_exist=True) as store:
        before = _snapshot(store)
        result = check_against(store, kept2)
        assert _snapshot(store) == before  # reads never write
    expected = {i: _brute(stored, key, fps, rule) for i, key, fps in kept2}
    expected = {i: e for i, e in expected.items() if e is not None}
    # every repeat named with its stored key; nothing new dropped (the scan agrees exactly)
    assert set(planted) <= set(expected)
    assert result.dropped == set(expected)
    for m in result.matches:
        status, keys = expected[m.record]  # type: ignore[misc]
        assert m.status == status and m.matched_key in keys
        assert (m.distance, m.wide_distance) == distances(stored[m.matched_key], rows2[m.record][2])
        if m.record in planted:
            assert m.matched_key == planted[m.record]
    assert result.looked_up["unchanged"] == 20 and result.looked_up["duplicate"] >= 40
    assert result.added == 0

    # --add: the new ones stored, in input order; twice: the second finds them all there
    with open_cli_store(store_uri, read_only=False, must_exist=True) as store:
        result = check_against(store, kept2, add=True)
        new = [r for r in kept2 if r[0] not in expected]
        assert result.added == len(new) and result.dropped == set(expected)
        assert len(store) == len(kept1) + len(new)
        entries = list(store.entries())[len(kept1) :]
        assert [e.key for e in entries] == [key for _, key, _ in new]
        assert store.counters()["new_total"] == len(kept1) + len(new)
        before = _snapshot(store)
        again = check_against(store, kept2, add=True)
        assert again.added == 0 and _snapshot(store) == before
        # everything already there: each record is its own stored entry, or near one
        assert again.dropped == {r[0] for r in kept2}
        assert all(m.status == "unchanged" for m in again.matches if m.record not in expected)


def test_the_stores_rule_and_scope_are_enforced(store_uri: str) -> None:
    with open_cli_store(store_uri, read_only=False, rule=Rule(scope="domain")) as store:
        stored_rule = store.rule
        assert against_rule(store, scope="domain", extractor="trafilatura") == stored_rule
        assert against_rule(store, scope="domain", extractor="trafilatura", rule=Rule())
        with pytest.raises(StoreError, match=r"scope 'domain'.*asks for 'global' \(--scope\)"):
            against_rule(store, scope="global", extractor="trafilatura")
        with pytest.raises(StoreError, match=r"extractor 'trafilatura'.*'resiliparse'"):
            against_rule(store, scope="domain", extractor="resiliparse")
        with pytest.raises(StoreError, match=r"cosine >= 0\.93.*cosine >= 0\.9:"):
            against_rule(store, scope="domain", extractor="trafilatura", rule=Rule(0.9))
        # a domain-scoped store: the same text is near only within its registrable domain
        rng = random.Random(5)
        text = _text(rng)
        seed = _fingerprinted([("http://news.example.co.uk/a", text)])
        assert check_against(store, seed, add=True).added == 1
        keys = [
            "http://www.example.co.uk/b",  # same domain: a near-duplicate
            "http://example.org/c",  # other domains: new
            "http://co.uk.example.net/d",
            "http://news.example.co.uk/a",  # the stored key itself: unchanged
        ]
        fps = fingerprint_text(text, PARAMS).fingerprints
        assert fps is not None
        result = check_against(store, [(i, k, fps) for i, k in enumerate(keys)])
        home = scope_of(seed[0][1], "domain")
        near = {i for i, k in enumerate(keys) if scope_of(k, "domain") == home}
        assert result.dropped == near == {0, 3}
        assert {m.record: m.status for m in result.matches} == {0: "duplicate", 3: "unchanged"}
        assert all(m.matched_key == seed[0][1] for m in result.matches)


def test_a_read_only_store_refuses_add(store_uri: str) -> None:
    with open_cli_store(store_uri, read_only=False) as store:
        check_against(store, [], add=True)  # creates it
    with (
        open_cli_store(store_uri, read_only=True, must_exist=True) as store,
        pytest.raises(StoreError, match="read-only"),
    ):
        Against(store, add=True)


# -- the join behind --against (batch/against.py: judge_records) --------------------------------


def _flip(x: int, bits: list[int]) -> int:
    for b in bits:
        x ^= 1 << b
    return x


def _chain(rule: Rule, rng: random.Random) -> tuple[Fingerprints, Fingerprints, Fingerprints]:
    """S, K near S, M near K but not near S (a chain the store's S breaks at K)."""
    for _ in range(1000):
        s = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
        k = Fingerprints(
            _flip(s.fp, rng.sample(range(64), 2)), _flip(s.wide, rng.sample(range(512), 40))
        )
        m = Fingerprints(
            _flip(k.fp, rng.sample(range(64), 2)), _flip(k.wide, rng.sample(range(512), 40))
        )
        near = rule.is_near
        if near(*distances(s, k)) and near(*distances(k, m)) and not near(*distances(s, m)):
            return s, k, m
    raise AssertionError("no chain")


def _feed(path: Any, rows: list[tuple[str, Fingerprints]]) -> None:
    import json

    from nearduppipe.fingerprint.compact import encode_for

    with open(path, "w") as f:
        for key, fps in rows:
            carried = encode_for(fps, PARAMS, from_text=True)
            f.write(json.dumps({"url": key, "text": "x", "fingerprint": carried}) + "\n")


def _dedup(path: Any, store: Any, add: bool = False) -> Any:
    import io

    from nearduppipe.batch.records import dedup_records

    out = io.StringIO()
    result = dedup_records(
        str(path), output=out, rule=store.rule, against=Against(store, add=add), workers=1
    )
    return result, [__import__("json").loads(line)["url"] for line in out.getvalue().splitlines()]


@pytest.mark.slow
def test_no_record_is_dropped_for_a_record_the_store_drops(store_uri: str, tmp_path: Any) -> None:
    """The issue's chain: M near K, K near the stored S, M far from S. The old order chose K as
    M's keeper before asking the store, then dropped K for S: M was lost, named as K's copy.
    The store is asked first now: K is S's repeat and M is kept (20 chains, both backends)."""
    rule, rng = Rule(), random.Random(5)
    chains = [_chain(rule, rng) for _ in range(20)]
    with open_cli_store(store_uri, read_only=False) as store:
        for g, (s, _, _) in enumerate(chains):
            store.add(s, f"s{g}")
    rows = [(f"k{g}", k) for g, (_, k, _) in enumerate(chains)]
    rows += [(f"m{g}", m) for g, (_, _, m) in enumerate(chains)]
    _feed(tmp_path / "in.jsonl", rows)
    with open_cli_store(store_uri, read_only=True, must_exist=True) as store:
        result, written = _dedup(tmp_path / "in.jsonl", store)
    assert written == [f"m{g}" for g in range(20)]
    assert {(m.key, m.matched_key, m.status) for m in result.against.matches} == {
        (f"k{g}", f"s{g}", "duplicate") for g in range(20)
    }


def test_the_join_answers_what_one_lookup_at_a_time_answers(store_uri: str) -> None:
    """The join (every record at once) against ``check``'s lookups (one store call each) on
    random, clustered and adversarial records: same records dropped, same status, the same
    stored key (nearest first); own keys stored near or far; expired entries match nothing."""
    from nearduppipe.batch.against import judge_records
    from nearduppipe.batch.engine_local import LocalEngine
    from nearduppipe.index.words import wide_words

    rng = random.Random(9)
    centres = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(15)]

    def near_one(c: Fingerprints) -> Fingerprints:
        return Fingerprints(
            _flip(c.fp, rng.sample(range(64), rng.randrange(0, 6))),
            _flip(c.wide, rng.sample(range(512), rng.randrange(0, 60))),  # type: ignore[arg-type]
        )

    with open_cli_store(store_uri, read_only=False) as store:
        for i in range(300):
            kind = rng.random()
            fps = (
                near_one(rng.choice(centres))
                if kind < 0.6
                else Fingerprints(rng.getrandbits(64), rng.getrandbits(512) if kind < 0.9 else None)
            )
            store.add(fps, f"k{i}")
        rows = []
        for i in range(400):
            key = f"k{rng.randrange(600)}"  # half of them stored keys
            fps = (
                near_one(rng.choice(centres))
                if rng.random() < 0.7
                else Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
            )
            rows.append((i, key, fps))
        one_by_one = check_against(store, rows)
        keys = [k for _, k, _ in rows]
        assert len(set(keys)) < len(keys)  # (a key twice: the join keeps the last)
        last = {k: i for i, k, _ in rows}
        qf = np.array([f.fp for _, _, f in rows], dtype=np.uint64)
        qw = np.stack([wide_words(f.wide) for _, _, f in rows])
        index = np.arange(len(rows), dtype=np.int64)
        side = (qf, qw, np.ones(len(rows), dtype=bool))
        by_store, left = judge_records(
            Against(store), LocalEngine(1), store.rule, index, side, keys
        )
    expected = {m.record: m for m in one_by_one.matches if last[m.key] == m.record}
    got = {r: m for r, m in by_store.items() if m.status != "superseded"}
    assert got.keys() == expected.keys() and len(expected) > 50
    for r, m in got.items():
        e = expected[r]
        assert (m.status, m.distance, m.wide_distance) == (e.status, e.distance, e.wide_distance)
        assert m.matched_key == e.matched_key
    assert {r for r, m in by_store.items() if m.status == "superseded"} == {
        i for i, k, _ in rows if last[k] != i
    }
    assert left.sum() == len(rows) - len(by_store)


def test_a_rerun_of_add_adds_nothing_even_with_a_key_twice(store_uri: str, tmp_path: Any) -> None:
    """A key twice in the inputs with other content was ``changed`` on every run (each
    record replaced the other): the key's last record is the page now, the earlier one
    superseded; the second run adds nothing and writes nothing."""
    rng = random.Random(2)
    a, b, c = (Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(3))
    _feed(tmp_path / "in.jsonl", [("u1", a), ("u1", b), ("u2", c)])
    with open_cli_store(store_uri, read_only=False) as store:
        first, written1 = _dedup(tmp_path / "in.jsonl", store, add=True)
        assert written1 == ["u1", "u2"] and first.against.added == 2
        entry = store.get("u1")
        assert entry is not None and entry.fingerprint == b.fp
        second, written2 = _dedup(tmp_path / "in.jsonl", store, add=True)
        assert written2 == [] and second.against.added == 0
        assert second.against.looked_up["unchanged"] == 2 and len(store) == 2


_WRITER = """
import json, random, sys, time
from nearduppipe import open_store
from nearduppipe.fingerprint.rule import Fingerprints
uri, rows, out, pause = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], float(sys.argv[4])
accepted = []
with open_store(uri) as store:
    for key, fp, wide in rows:
        if store.check(Fingerprints(fp, wide), key, job="crawl").status == "new":
            accepted.append(key)
        time.sleep(pause)
with open(out, "w") as f:
    json.dump(accepted, f)
"""


@pytest.mark.slow
def test_against_add_beside_a_writer_on_one_redis_store(redis_server: Any, tmp_path: Any) -> None:
    """``dedup --against --add`` while another process (a crawl's checks) writes near copies
    of the same pages to the same Redis store, over the whole run: ``-o`` holds exactly the
    records the store took from the batch, and each page is stored once between the two (the
    old run wrote ``-o`` before adding: 2 of 400 groups twice)."""
    import json
    import subprocess
    import sys
    import time

    from ..support.cli import ROOT

    rng = random.Random(12)
    uri = f"{redis_server.url}{'&' if '?' in redis_server.url else '?'}prefix=test:writer"
    groups = 300
    base = [Fingerprints(rng.getrandbits(64), rng.getrandbits(512)) for _ in range(groups)]

    def near(b: Fingerprints) -> Fingerprints:
        return Fingerprints(
            _flip(b.fp, rng.sample(range(64), 1)), _flip(b.wide, rng.sample(range(512), 20))
        )  # type: ignore[arg-type]

    batch = [(f"b{g}", near(b)) for g, b in enumerate(base)]
    writer = [(f"w{g}", near(b)) for g, b in enumerate(base)]
    rng.shuffle(writer)
    _feed(tmp_path / "in.jsonl", batch)
    with open_cli_store(uri, read_only=False) as store:
        store.add(Fingerprints(1, 1), "seed")  # (the store exists: --add opens it)
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    rows = json.dumps([[k, f.fp, f.wide] for k, f in writer])
    accepted_file = tmp_path / "accepted.json"
    w = subprocess.Popen(
        [sys.executable, "-c", _WRITER, uri, rows, str(accepted_file), "0.02"], env=env
    )
    time.sleep(1.0)  # (a third of the writer's pages are stored before the batch starts)
    out = subprocess.run(
        [sys.executable, "-m", "nearduppipe.cli", "dedup", str(tmp_path / "in.jsonl"),
         "--against", uri, "--add", "-o", str(tmp_path / "out.jsonl"), "--workers", "1"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert w.wait(timeout=120) == 0
    assert out.returncode == 0, out.stderr
    written = [json.loads(x)["url"] for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    accepted = set(json.loads(accepted_file.read_text()))
    with open_cli_store(uri, read_only=True, must_exist=True) as store:
        stored = {e.key for e in store.entries()} - {"seed"}
    assert set(written) == {k for k in stored if k.startswith("b")}  # -o: what the store took
    assert accepted == {k for k in stored if k.startswith("w")}
    for g in range(groups):  # each page once between the two writers
        assert (f"b{g}" in stored) + (f"w{g}" in stored) == 1, g
    assert written and accepted, (len(written), len(accepted))


def test_a_refused_keepers_records_are_checked_in_input_order(tmp_path: Any) -> None:
    """A(0), K(1), J(2): J near A and K, A not near K; another writer stores P (near A only)
    between the join and the adds. As a crawl meets them in input order: A refused (P), K
    kept, J a copy of K. (Checking the refused keeper's records first kept J and dropped the
    earlier K as J's copy.)"""
    from nearduppipe import open_store

    rng, rule = random.Random(31), Rule()
    bits = rng.sample(range(512), 110)  # (disjoint flips: 40 bits apart is near, 70 is not)
    a = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
    j = Fingerprints(_flip(a.fp, [1]), _flip(a.wide, bits[:40]))  # type: ignore[arg-type]
    k = Fingerprints(_flip(j.fp, [2]), _flip(j.wide, bits[40:80]))  # type: ignore[arg-type]
    p = Fingerprints(_flip(a.fp, [3]), _flip(a.wide, bits[80:]))  # type: ignore[arg-type]
    near = [(x, y) for x, y in ((a, j), (k, j), (p, a))]
    far = [(a, k), (p, j), (p, k)]
    assert all(rule.is_near(*distances(x, y)) for x, y in near)
    assert not any(rule.is_near(*distances(x, y)) for x, y in far)
    _feed(tmp_path / "in.jsonl", [("A", a), ("K", k), ("J", j)])

    class Racing(Against):
        def add_kept(self, record: int, key: str, fps: Fingerprints) -> Any:
            if record == 0:
                self.store.add(p, "P")  # (another writer, between the join and the adds)
            return super().add_kept(record, key, fps)

    with open_store(str(tmp_path / "s.sqlite")) as store:
        import io

        from nearduppipe.batch.records import dedup_records

        out = io.StringIO()
        result = dedup_records(
            str(tmp_path / "in.jsonl"), output=out, against=Racing(store, add=True), workers=1
        )
        written = [__import__("json").loads(x)["url"] for x in out.getvalue().splitlines()]
        assert written == ["K"] and {e.key for e in store.entries()} == {"P", "K"}
    assert {(m.key, m.matched_key) for m in result.against.matches} == {("A", "P"), ("J", "K")}


def test_an_expired_own_entry_is_new_to_the_join_and_the_lookup(tmp_path: Any) -> None:
    """The store's TTL by the store's clock: an own entry past it is absent (a check stores
    the page anew), for the join and for one lookup alike (the lookup said ``unchanged``)."""
    from nearduppipe import open_store
    from nearduppipe.batch.against import judge_records
    from nearduppipe.batch.engine_local import LocalEngine
    from nearduppipe.index.words import wide_words

    now = [1_000_000.0]
    a = Fingerprints(7, 1 << 300)
    with open_store(str(tmp_path / "s.sqlite"), ttl=3600, clock=lambda: now[0]) as store:
        store.add(a, "u")
        now[0] += 7200
        assert check_against(store, [(0, "u", a)]).matches == []
        side = (np.array([a.fp], dtype=np.uint64), wide_words(a.wide)[None, :], np.ones(1, bool))
        by_store, left = judge_records(
            Against(store), LocalEngine(1), store.rule, np.arange(1), side, ["u"]
        )
        assert by_store == {} and left.tolist() == [True]
        assert store.check(a, "u").status == "new"


@pytest.mark.parametrize("where", ["file", "fifo"])
def test_adds_come_after_the_output_and_a_refusal_rewrites_it(tmp_path: Any, where: str) -> None:
    """The adds run once ``-o`` and the pairs are written (a failed write adds nothing). A
    refusal then (another writer stored P, near A, meanwhile) drops A: a regular file is
    written again, holding what the store took; an output that cannot be (a FIFO: here an
    unseekable text) keeps A, counted in ``refused_written``, J left A's copy."""
    import io
    import json

    from nearduppipe import open_store
    from nearduppipe.batch.records import dedup_records

    rng = random.Random(31)
    bits = rng.sample(range(512), 110)  # (as the test above: A, K, J; P near A only)
    a = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
    j = Fingerprints(_flip(a.fp, [1]), _flip(a.wide, bits[:40]))  # type: ignore[arg-type]
    k = Fingerprints(_flip(j.fp, [2]), _flip(j.wide, bits[40:80]))  # type: ignore[arg-type]
    p = Fingerprints(_flip(a.fp, [3]), _flip(a.wide, bits[80:]))  # type: ignore[arg-type]
    _feed(tmp_path / "in.jsonl", [("A", a), ("K", k), ("J", j)])
    seen: list[list[str]] = []

    class Unseekable(io.StringIO):
        def seekable(self) -> bool:
            return False

    class Racing(Against):
        def add_kept(self, record: int, key: str, fps: Fingerprints) -> Any:
            out.flush()
            seen.append(list(map(str, _read(out))))  # (-o already written)
            if record == 0:
                self.store.add(p, "P")
            return super().add_kept(record, key, fps)

    def _read(f: Any) -> list[str]:
        text = f.getvalue() if isinstance(f, io.StringIO) else (tmp_path / "o.jsonl").read_text()
        return [json.loads(x)["url"] for x in text.splitlines()]

    with open_store(str(tmp_path / "s.sqlite")) as store:
        out: Any = Unseekable() if where == "fifo" else open(tmp_path / "o.jsonl", "w")  # noqa: SIM115
        with out:
            result = dedup_records(
                str(tmp_path / "in.jsonl"), output=out, against=Racing(store, add=True),
                workers=1,
            )  # fmt: skip
            out.flush()
            written = _read(out)
        assert seen[0] == ["A", "K"]  # (both written before the first add)
        assert {e.key for e in store.entries()} == {"P", "K"}
    assert result.against is not None
    if where == "file":
        assert written == ["K"] and result.kept == 1 and result.against.refused_written == 0
        assert {(m.key, m.matched_key) for m in result.against.matches} == {("A", "P"), ("J", "K")}
    else:
        assert written == ["A", "K"] and result.against.refused_written == 1
        assert {(m.key, m.matched_key) for m in result.against.matches} == {("A", "P")}
