"""The structures that let a store grow without a pause (issue 33), crossed at small sizes: the
memory store's sharded key map and chunked slots, and the sqlite store's key filter filled in
steps while the full one answers. Every answer is compared with a brute-force model, across
shard, chunk and filter-size boundaries, removals and (sqlite) reopens mid-fill."""

from __future__ import annotations

import gc
import random
from pathlib import Path

import numpy as np
import pytest

from nearduppipe import open_store
from nearduppipe.fingerprint import simhash
from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.stores.keymap import KeyMap, Slots
from nearduppipe.stores.memory import MemoryStore
from nearduppipe.stores.sqlite import keys as keyfilter
from nearduppipe.stores.sqlite.keys import KeyFilter, key_hash

from ..stores.test_stores import Model, flip


def test_keymap_and_slots_match_a_dict() -> None:
    rng = random.Random(3)
    for shard_bits, chunk_bits in [(0, 0), (2, 3), (5, 1)]:
        km, want = KeyMap(shard_bits), {}
        slots: Slots[str] = Slots(chunk_bits)
        want_slots: dict[int, str | None] = {}
        for step in range(3000):
            key = f"k{rng.randrange(1500)}"
            if rng.random() < 0.2 and key in want:
                del km[key], want[key]
            else:
                km[key] = want[key] = step
            i = rng.randrange(700)
            slots[i] = want_slots[i] = rng.choice([key, None])
            assert km.get(key) == want.get(key)
        assert len(km) == len(want) and dict(km.items()) == want
        assert all(slots[i] == v for i, v in want_slots.items())
        assert len(slots) >= 700 and len(slots) % (1 << chunk_bits) == 0
        with pytest.raises(KeyError):
            del km["absent"]


def _references_walked() -> int:
    """References a full collection follows: those held by the objects the collector tracks."""
    return sum(len(gc.get_referents(o)) for o in gc.get_objects())


@pytest.mark.parametrize("uri", ["memory:", "sqlite"])
def test_a_full_collection_does_not_walk_the_entries(uri: str, tmp_path: Path) -> None:
    """A full garbage collection, started by anyone's garbage, follows every reference of
    every tracked container: with the memory store's slots in lists, 318 ms inside one call at
    4.8 M entries (issue 33). Stored entries must add (next to) nothing to that walk."""
    # an earlier test's first fingerprint may have started loading numba on a thread: its
    # objects would be counted as the store's
    simhash.warm(wait=True)
    store = open_store(str(tmp_path / "s.sqlite") if uri == "sqlite" else uri)
    try:
        store.check_and_add(1, "https://example.com/warm")  # (kernels, writer thread, ...)
        gc.collect()
        before = _references_walked()
        for i in range(40_000):
            store.check_and_add(
                (i * 0x9E3779B97F4A7C15) & (2**64 - 1), f"https://example.com/{i}", text="t"
            )
        gc.collect()
        grown = _references_walked() - before
        # (lists of slots: ~98,000 more; the bound leaves room for other threads' objects)
        assert grown < 20_000, f"{grown} more references walked after 40,000 entries"
    finally:
        store.close()
    km, slots = KeyMap(2), Slots[str](3)
    for i in range(100):
        km[f"k{i}"], slots[i] = i, f"k{i}"
    assert not any(gc.is_tracked(x) for x in (*km._shards, *slots._chunks))


def test_key_filter_never_forgets_a_key_while_it_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    """No false negative at any point: before, during and after each larger filter is filled
    (its pages mapped 4 bytes per add, then in steps of 3 ids), with removals; saved mid-fill
    and loaded back."""
    monkeypatch.setattr(keyfilter, "_MIN_BITS", 1 << 6)
    monkeypatch.setattr(keyfilter, "_TOUCH", 4)
    monkeypatch.setattr(keyfilter, "_PAGE", 2)
    rng = np.random.default_rng(5)
    f = KeyFilter(step=3)
    alive = np.zeros(0, dtype=bool)
    hashes: list[int] = []
    sizes, filling, touching = {f._mask}, 0, 0
    for i in range(3000):
        h = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
        hashes.append(h)
        alive = np.append(alive, True)
        f.add(i, h, lambda a=alive: a)
        if rng.random() < 0.1:  # a removal: its id stays dead
            alive[int(rng.integers(0, i + 1))] = False
        filling += f._next is not None
        touching += f._next is not None and f._touched < len(f._next[0])
        sizes.add(f._mask)
        live = np.flatnonzero(alive)
        assert all(f.may_hold(hashes[j]) for j in live[-50:].tolist())
        if i % 500 == 0:
            assert all(f.may_hold(hashes[j]) for j in live.tolist())
        if f._next is not None and i > 1000 and not i % 7:  # saved mid-fill, loaded back
            g = KeyFilter(step=3)
            g.load(np.array(hashes, dtype=np.uint64), alive, f.saved())
            assert all(g.may_hold(hashes[j]) for j in np.flatnonzero(alive).tolist())
    assert len(sizes) >= 5 and filling > 100 and touching > 20  # several sizes, in steps
    assert all(f.may_hold(hashes[j]) for j in np.flatnonzero(alive).tolist())
    assert f.hashes[: len(hashes)].tolist() == hashes
    # and it still rejects most keys it never saw (a filter, not a constant True)
    assert sum(f.may_hold(int(x)) for x in rng.integers(0, 2**63, 2000)) < 400


def _pages(rng: random.Random, model: Model, keys: list[str]) -> tuple[Fingerprints, str]:
    """A page of the kinds test_stores uses: revisits, near copies of a few centres, random."""
    key = rng.choice(keys)
    kind = rng.random()
    if kind < 0.15 and key in model.entries:
        mine = model.entries[key][0]
        return Fingerprints(flip(mine.fp, rng.randint(0, 4), 64, rng), mine.wide), key
    if kind < 0.5:
        c = rng.getrandbits(6)  # 64 clusters: centre c's bits repeated
        fp = flip(c * 0x0410_4104_1041_0410 & (1 << 64) - 1, rng.randint(0, 9), 64, rng)
        wide = None if kind < 0.3 else flip(c * ((1 << 512) // 63), rng.randint(0, 90), 512, rng)
        return Fingerprints(fp, wide), key
    return Fingerprints(rng.getrandbits(64), rng.getrandbits(512)), key


def test_memory_store_across_shards_and_chunks() -> None:
    rng = random.Random(11)
    model = Model(Rule())
    store = MemoryStore(shard_bits=3, chunk_bits=4)
    keys = [f"https://site{i % 7}.example/{i}" for i in range(2000)]
    for step in range(2500):
        fps, key = _pages(rng, model, keys)
        if rng.random() < 0.03 and model.entries:
            gone = rng.choice(list(model.entries))
            assert store.remove(gone)
            del model.entries[gone]
            continue
        assert store.check(fps, key) == model.check(fps, key, None), step
    assert len(store) == len(model.entries) > 700
    stored = list(store.entries())
    assert [e.key for e in stored] == sorted(model.entries, key=lambda k: model.entries[k][2])
    assert all(e.fingerprint == model.entries[e.key][0].fp for e in stored)


def test_memory_store_options_through_open_store() -> None:
    with open_store("memory:", shard_bits=1, chunk_bits=2) as store:
        for i in range(50):
            store.add(i << 20, f"k{i}")
        assert [e.key for e in store.entries()] == [f"k{i}" for i in range(50)]
        assert store.get("k33") is not None and store.get("k50") is None


def test_sqlite_store_while_its_key_filter_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose key filter starts at 64 bits and fills each larger one 5 ids per add:
    many rebuilds, reopened (snapshot written mid-fill) along the way."""
    monkeypatch.setattr(keyfilter, "_MIN_BITS", 1 << 6)
    monkeypatch.setattr(keyfilter, "_STEP", 5)
    rng = random.Random(23)
    model = Model(Rule())
    uri = f"sqlite:///{tmp_path}/s.sqlite"
    store = open_store(uri)
    keys = [f"https://site{i % 5}.example/{i}" for i in range(1800)]
    reopened_mid_fill = 0
    for step in range(2000):
        fps, key = _pages(rng, model, keys)
        if rng.random() < 0.03 and model.entries:
            gone = rng.choice(list(model.entries))
            assert store.remove(gone)
            del model.entries[gone]
            continue
        assert store.check(fps, key) == model.check(fps, key, None), step
        filling = store._keys._next is not None  # type: ignore[attr-defined]
        if step % 400 == 399 or (step > 1200 and filling and step % 3):
            reopened_mid_fill += store._keys._next is not None  # type: ignore[attr-defined]
            store.close()
            store = open_store(uri)
    assert reopened_mid_fill
    assert len(store) == len(model.entries) > 600
    assert all(
        store.get(k) is not None and store.get(k).fingerprint == v[0].fp  # type: ignore[union-attr]
        for k, v in model.entries.items()
    )
    assert all(store.get(k) is None for k in keys if k not in model.entries)
    assert store._keys._mask + 1 > 1 << 14  # type: ignore[attr-defined]  # it grew
    store.close()
    with open_store(uri, read_only=True) as again:
        assert sorted(e.key for e in again.entries()) == sorted(model.entries)
    assert key_hash("a") != key_hash("b")
