"""The grouped batch joins (index/joins.py through ``BlockIndex.cross``, ``pairs`` and
``join_share``) return exactly what a full scan returns, each pair once, on adversarial data:
every table set a layout allows (equal and unequal probe radii, Manku's multi-block keys,
fewer than 64 bits), one giant bucket, a bucket holding nearly every row, pairs at exactly the
distance and one bit past it (in one block, on the blocks' boundary bits, spread), 0, 1 and 2
rows, no queries, more shares than buckets, removed ids, the values 0 and 2**64 - 1 and the
top bit, and 1, 2, 3 or 7 threads."""

from __future__ import annotations

import numpy as np
import pytest

from nearduppipe.index.search import BlockIndex, Layout

U64 = np.uint64
TOP = (1 << 64) - 1


def scan(
    queries: np.ndarray, stored: np.ndarray, alive: np.ndarray, radius: int
) -> list[list[int]]:
    """Every ``[q, j, d]`` of a query and a live stored fingerprint within ``radius``, sorted
    (all pairs, in chunks of queries)."""
    found: list[list[int]] = []
    for lo in range(0, len(queries), 512):
        d = np.bitwise_count(queries[lo : lo + 512, None] ^ stored[None, :]).astype(np.int64)
        q, j = np.nonzero((d <= radius) & alive[None, :])
        found += [[int(a) + lo, int(b), int(d[a, b])] for a, b in zip(q, j, strict=True)]
    return sorted(found)


def self_scan(stored: np.ndarray, alive: np.ndarray, radius: int) -> list[list[int]]:
    return [p for p in scan(stored, stored, alive, radius) if p[1] > p[0] and alive[p[0]]]


def flipped(fp: int, bits: list[int]) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


def index_of(layout: Layout, stored: np.ndarray, removed: tuple[int, ...] = ()) -> BlockIndex:
    idx = BlockIndex(layout)
    idx.add_many(stored)  # one run: the compiled join
    for i in removed:
        idx.remove(i)
    assert idx.runs == (1 if len(stored) else 0)
    return idx


def shares(idx: BlockIndex, queries: np.ndarray, count: int, upper: bool) -> list[list[int]]:
    """Every share of :meth:`BlockIndex.join_share`, concatenated (not sorted: a pair twice
    shows)."""
    parts = [idx.join_share(queries, s, count, upper) for s in range(count)]
    out: list[list[int]] = np.concatenate(parts).reshape(-1, 3).tolist()
    return out


def assert_joins(
    idx: BlockIndex,
    queries: np.ndarray,
    stored: np.ndarray,
    alive: np.ndarray,
    counts: tuple[int, ...] = (1, 2, 3, 7),
) -> tuple[int, int]:
    """cross, pairs and every share count equal the full scan; returns the pair counts."""
    radius = idx.distance
    want, want_self = scan(queries, stored, alive, radius), self_scan(stored, alive, radius)
    assert idx.cross(queries).tolist() == want
    assert idx.pairs().tolist() == want_self
    for count in counts:
        got = shares(idx, queries, count, upper=False)
        assert sorted(got) == want and len(got) == len(want), count
        got = shares(idx, stored, count, upper=True)
        assert sorted(got) == want_self and len(got) == len(want_self), count
    return len(want), len(want_self)


def forced(layout: Layout, which: int) -> BlockIndex:
    """An index whose runs are all filed in the layout's ``which``-th table set (the index
    picks one by a run's size: small runs would never use the wide keys of large ones)."""
    idx = BlockIndex(layout)
    idx._geo.sets = [idx._geo.sets[which]]
    return idx


SETS = [
    (r, which)
    for r in (1, 2, 3, 5, 8, 9, 13, 16)
    for which in range(len(Layout(distance=r).table_sets()))
]


@pytest.mark.parametrize(("radius", "which"), SETS)
def test_every_table_set_joins_as_a_full_scan(radius: int, which: int) -> None:
    """Whatever table set a run is filed in (1-5 tables, equal or unequal probe radii, the
    directory narrower than the key), near copies at exactly ``radius`` and ``radius + 1``
    bits (the ``radius`` bits in one block, on every block's edge bits, or anywhere), exact
    copies and the extreme values."""
    layout = Layout(distance=radius)
    tables, radii = layout.table_sets()[which]
    rng = np.random.default_rng(100 * radius + which)
    blocks = [parts[0] for parts in tables]  # (one block a table)
    edges = sorted({b for shift, width in blocks for b in (shift, shift + width - 1)})
    shift0, width0 = blocks[0]
    stored = []
    for c in rng.integers(0, TOP, 25, dtype=U64, endpoint=True).tolist():
        stored.append(c)
        for d in (radius, radius + 1, radius // 2):
            stored.append(flipped(c, rng.choice(64, d, replace=False).tolist()))
        stored.append(flipped(c, list(range(shift0, shift0 + min(width0, radius)))))
        for d in (radius, radius + 1):  # (as many of the blocks' edge bits as there are)
            stored.append(flipped(c, edges[:d]))
    stored = np.array([*stored, 0, TOP, TOP, 1 << 63, (1 << 63) | 1], dtype=U64)
    queries = np.concatenate([stored ^ U64(1 << 63), stored[::3], stored[:5] ^ U64(3)])
    alive = np.ones(len(stored), dtype=bool)
    alive[[0, len(stored) - 2]] = False
    idx = forced(layout, which)
    idx.add_many(stored)
    idx.remove(0)
    idx.remove(len(stored) - 2)
    assert idx.runs == 1 and tuple(idx._runs[0].args[8].tolist()) == radii
    found, found_self = assert_joins(idx, queries, stored, alive)
    assert found > 100 and found_self > 50


@pytest.mark.parametrize(
    "layout",
    [
        Layout(distance=0),  # one table keyed by all 64 bits
        Layout(distance=3, blocks=6),  # Manku: 20 tables of 3-block keys
        Layout(distance=2, blocks=5),
        Layout(distance=8, blocks=3),  # 3 tables of 21-22 bits at radius 2
        Layout(distance=1, blocks=64),  # 64 tables of 1-bit keys (2 buckets each)
        Layout(distance=6, bits=20),
        Layout(distance=3, bits=8),  # 256 values: crowded buckets
    ],
)
def test_explicit_blocks_and_narrow_fingerprints_join_as_a_full_scan(layout: Layout) -> None:
    rng = np.random.default_rng(layout.distance * 64 + layout.bits)
    top = (1 << layout.bits) - 1
    r = layout.distance
    stored = []
    for c in rng.integers(0, top, 40, dtype=U64, endpoint=True).tolist():
        for d in (0, r, r + 1, max(r - 1, 0)):
            stored.append(flipped(c, rng.choice(layout.bits, d, replace=False).tolist()))
    stored = np.array([*stored, 0, top, top, 1 << (layout.bits - 1)], dtype=U64)
    queries = np.concatenate([stored[::2] ^ U64(1), stored[:7]])
    alive = np.ones(len(stored), dtype=bool)
    alive[3] = False
    found, _ = assert_joins(index_of(layout, stored, removed=(3,)), queries, stored, alive)
    assert found > 10


@pytest.mark.parametrize("value", [0, TOP, 1 << 63, (1 << 63) | 1])
@pytest.mark.parametrize("radius", [0, 3, 8, 16])
def test_identical_fingerprints_one_bucket_in_every_table(value: int, radius: int) -> None:
    """Every stored fingerprint the same (one bucket in every table, the last one for
    2**64 - 1; the top bit set: no sign trouble), every query the same or one bit off."""
    stored = np.full(150, value, dtype=U64)
    queries = np.array([value] * 40 + [value ^ 1] * 5 + [value ^ TOP], dtype=U64)
    alive = np.ones(len(stored), dtype=bool)
    alive[[0, 149]] = False
    idx = index_of(Layout(distance=radius), stored, removed=(0, 149))
    found, found_self = assert_joins(idx, queries, stored, alive, counts=(1, 3, 1000))
    assert found_self == 148 * 147 // 2
    assert found == 148 * (40 + (5 if radius else 0))


@pytest.mark.parametrize("radius", [3, 5, 8])
def test_one_bucket_holds_nearly_every_row(radius: int) -> None:
    """99 % of the rows share their top 32 bits (a bucket of ~2,000 in the first tables, more
    than the join's first candidate buffer), the rest random; queries mostly in that bucket."""
    rng = np.random.default_rng(radius)
    hot = 0xDEADBEEF << 32
    low = rng.integers(0, 1 << 32, 1980, dtype=U64)
    stored = np.concatenate([U64(hot) | low, rng.integers(0, TOP, 20, dtype=U64, endpoint=True)])
    stored[1000:1100] = stored[:100] ^ U64(1 << 5)  # (some near pairs inside the bucket)
    queries = np.concatenate([stored[:300] ^ U64(1 << 40), stored[1990:]])
    alive = np.ones(len(stored), dtype=bool)
    alive[7] = False
    idx = index_of(Layout(distance=radius), stored, removed=(7,))
    found, found_self = assert_joins(idx, queries, stored, alive, counts=(1, 4))
    assert found >= 290 and found_self >= 99


@pytest.mark.parametrize("radius", [0, 3, 8])
@pytest.mark.parametrize("rows", [0, 1, 2])
@pytest.mark.parametrize("nq", [0, 1])
def test_tiny_joins(radius: int, rows: int, nq: int) -> None:
    """0, 1 or 2 rows, 0 or 1 query, more shares than buckets or rows."""
    stored = np.array([TOP, TOP ^ 1][:rows], dtype=U64)
    queries = np.array([TOP ^ 2][:nq], dtype=U64)
    idx = BlockIndex(Layout(distance=radius))
    idx.add_many(stored)
    alive = np.ones(rows, dtype=bool)
    assert_joins(idx, queries, stored, alive, counts=(1, 2, 17, 1000))


def test_every_id_removed() -> None:
    stored = np.array([5, 5, 7], dtype=U64)
    idx = BlockIndex(Layout(distance=8))
    idx.add_many(stored, alive=np.zeros(3, dtype=bool))
    assert_joins(idx, stored, stored, np.zeros(3, dtype=bool), counts=(1, 2))
    assert idx.cross(stored).shape == (0, 3) and idx.pairs().shape == (0, 3)


@pytest.mark.slow
@pytest.mark.parametrize("radius", [5, 8, 16])
def test_threads_give_the_full_scan(radius: int) -> None:
    """1, 2, 3 and 7 threads (one per 1,024 queries at most: 8,000 queries), and threads
    inside shares, give the same pairs: the full scan's."""
    rng = np.random.default_rng(40 + radius)
    centres = rng.integers(0, TOP, 40, dtype=U64, endpoint=True)
    stored = np.concatenate(
        [centres ^ (U64(1) << U64(b)) for b in range(0, 64, 9)]
        + [rng.integers(0, TOP, 2000, dtype=U64, endpoint=True)]
    )
    picks = rng.integers(0, len(stored), 6000)
    queries = np.concatenate([
        stored[picks] ^ rng.integers(0, 1 << 20, 6000, dtype=U64),
        rng.integers(0, TOP, 1400, dtype=U64, endpoint=True),
        np.full(600, stored[0]),
    ])  # fmt: skip
    alive = np.ones(len(stored), dtype=bool)
    alive[3] = False
    idx = index_of(Layout(distance=radius), stored, removed=(3,))
    want = scan(queries, stored, alive, radius)
    assert len(want) > 3000
    for workers in (1, 2, 3, 7):
        assert idx.cross(queries, workers).tolist() == want, workers
    # the self-join of 8,000 ids, threads inside each of 3 shares
    ids = np.concatenate([stored, stored[:2000] ^ U64(0b101), queries[6000:9000]])
    alive = np.ones(len(ids), dtype=bool)
    alive[[0, len(ids) - 1]] = False
    idx = index_of(Layout(distance=radius), ids, removed=(0, len(ids) - 1))
    want = self_scan(ids, alive, radius)
    assert len(want) > 2000
    for workers in (1, 2, 3, 7):
        assert idx.pairs(workers).tolist() == want, workers
    own = idx.fingerprints().copy()
    got = np.concatenate([idx._join(own, 3, True, (s, 3)) for s in range(3)]).tolist()
    assert sorted(got) == want and len(got) == len(want)
