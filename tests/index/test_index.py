"""The index returns exactly what a brute-force scan returns, for random and adversarial data."""

from __future__ import annotations

import os
import threading
import traceback

import numpy as np
import pytest

from nearduppipe.index.columns import Column
from nearduppipe.index.runs import Geometry
from nearduppipe.index.search import BlockIndex, Layout, kernels

from ..support.bound import dispatched
from ..support.forked import exit_code, fork

U64 = np.uint64


def brute(fps: np.ndarray, q: int, k: int) -> list[tuple[int, int]]:
    d = np.bitwise_count(fps ^ U64(q))
    return sorted(((int(i), int(d[i])) for i in np.flatnonzero(d <= k)), key=lambda h: (h[1], h[0]))


def flip(fp: int, n: int, rng: np.random.Generator, bits: int = 64) -> int:
    for b in rng.choice(bits, size=n, replace=False).tolist():
        fp ^= 1 << b
    return fp


def random_fps(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, np.iinfo(np.uint64).max, n, dtype=U64, endpoint=True)


@pytest.mark.parametrize(
    "layout",
    [
        Layout(),
        Layout(blocks=6),
        Layout(blocks=4),
        Layout(distance=0),
        Layout(distance=1),
        Layout(distance=5),
        Layout(distance=8),
        Layout(distance=8, blocks=4),
        Layout(distance=4, blocks=3),
        Layout(distance=15),  # (the rule's widest radii: 4 blocks by default)
        Layout(distance=16),
    ],
)
def test_matches_brute_force_with_planted_neighbours(layout: Layout) -> None:
    rng = np.random.default_rng(7)
    k = layout.distance
    base = random_fps(rng, 20_000)
    planted = [flip(int(base[i]), d, rng) for i in range(0, 2000) for d in [i % (k + 2)]]
    stored = np.concatenate([base, np.array(planted, dtype=U64)])
    idx = BlockIndex(layout, tail_capacity=97)  # small tail: many merges and rebuilds
    for fp in stored[:5000].tolist():
        idx.add(fp)
    idx.add_many(stored[5000:15000])
    for fp in stored[15000:].tolist():
        idx.add(fp)
    assert len(idx) == len(stored)
    queries = [flip(int(stored[i]), int(rng.integers(0, k + 2)), rng) for i in range(0, 22_000, 11)]
    queries += random_fps(rng, 300).tolist()
    for q in queries:
        assert idx.query(q) == brute(stored, q, k)


def test_adversarial_clusters_and_block_boundaries() -> None:
    rng = np.random.default_rng(3)
    layout = Layout()
    # Many fingerprints sharing whole blocks (worst case for bucket sizes), all-zero/all-one,
    # and neighbours differing exactly at block boundaries (bits 15/16, 31/32, 47/48, 63/0).
    shared_top = [(0xDEAD << 48) | int(x) for x in rng.integers(0, 1 << 48, 3000).tolist()]
    shared_mid = [(0xBEEF << 16) | int(x & ~(0xFFFF << 16)) for x in random_fps(rng, 3000).tolist()]
    edges = [0, (1 << 64) - 1]
    for b in [0, 15, 16, 31, 32, 47, 48, 63]:
        edges += [1 << b, ((1 << 64) - 1) ^ (1 << b), (1 << b) | (1 << ((b + 1) % 64))]
    stored = np.array(shared_top + shared_mid + edges, dtype=U64)
    for blocks in (None, 4, 6):
        idx = BlockIndex(Layout(blocks=blocks), tail_capacity=500)
        for fp in stored.tolist():
            idx.add(fp)
        qs = edges + [flip(x, 3, rng) for x in shared_top[:300] + shared_mid[:300]]
        qs += [flip(x, 4, rng) for x in shared_top[:100]]
        for q in qs:
            assert idx.query(q) == brute(stored, q, layout.distance)


def _data(kind: str, k: int, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """Stored fingerprints and queries: random with planted neighbours, clustered (shared
    blocks: the longest buckets), or adversarial (neighbours differing at every block edge)."""
    if kind == "random":
        base = random_fps(rng, 6000)
        stored = np.concatenate([base, [flip(int(x), k, rng) for x in base[:1500]]]).astype(U64)
    elif kind == "clustered":
        centres = random_fps(rng, 30).tolist()
        near = [flip(c, int(rng.integers(0, k + 3)), rng) for c in centres for _ in range(150)]
        top = [(0xABCDE << 44) | int(x) for x in rng.integers(0, 1 << 44, 1500).tolist()]
        stored = np.array(near + top, dtype=U64)
    else:
        fps = [0, (1 << 64) - 1]
        for b in range(64):  # every single-bit and adjacent two-bit neighbour of 0 and ~0
            fps += [1 << b, ((1 << 64) - 1) ^ (1 << b), (1 << b) | (1 << ((b + 1) % 64))]
        fps += [flip(0, k, rng) for _ in range(500)] + [flip(0, k + 1, rng) for _ in range(500)]
        stored = np.array(fps, dtype=U64)
    qs = [flip(int(stored[i]), int(rng.integers(0, k + 2)), rng) for i in range(0, len(stored), 9)]
    return stored, [*qs, 0, (1 << 64) - 1, *random_fps(rng, 100).tolist()]


@pytest.mark.parametrize("kind", ["random", "clustered", "adversarial"])
@pytest.mark.parametrize("k", [0, 1, 3, 4, 8])
def test_every_table_set_matches_brute_force(k: int, kind: str) -> None:
    """A run files its ids in the table set cheapest for its size (unequal probe radii per
    table): each set the layout allows, forced on every run, returns the brute-force answer."""
    rng = np.random.default_rng(k * 10 + len(kind))
    stored, qs = _data(kind, k, rng)
    layout = Layout(distance=k)
    sets = Geometry(layout).sets
    # 1 to k + 1 tables (at most 5), none probed beyond radius 4
    assert len(sets) == {0: 1, 1: 2, 3: 4, 4: 5, 8: 4}[k]
    assert all(sum(int(r) + 1 for r in ts.probes) == k + 1 for ts in sets)
    for ts in sets:
        idx = BlockIndex(layout, tail_capacity=300)
        idx._geo.sets = [ts]
        idx.add_many(stored[:2000])
        for fp in stored[2000:].tolist():
            idx.add(fp)
        idx.wait()
        assert {len(run.tables.tables) for run in idx._runs} == {len(ts.tables)}
        for q in qs:
            assert idx.query(q) == brute(stored, q, k), (len(ts.tables), q)


def test_runs_pick_their_table_set_by_size() -> None:
    """Radius 8: many narrow tables for small runs, 3 wide ones for large (the cost model)."""
    geo = Geometry(Layout(distance=8))
    picks = {n: len(geo.for_size(n).tables) for n in (4096, 100_000, 1_000_000, 10_000_000)}
    assert picks == {4096: 5, 100_000: 5, 1_000_000: 4, 10_000_000: 3}
    assert [len(ts.tables) for ts in Geometry(Layout(distance=8, blocks=3)).sets] == [3]


def test_runs_of_different_table_sets_in_one_index() -> None:
    """A bulk-loaded run of 4 tables, then small runs of 5: one search reads both kinds with the
    code bound at its first run, and returns the brute-force answer."""
    rng = np.random.default_rng(17)
    stored = random_fps(rng, 250_000)
    idx = BlockIndex(Layout(distance=8), tail_capacity=512)
    idx.add_many(stored[:240_000])
    idx.search_into(1)  # binds the search to the 4-table run's argument types
    for fp in stored[240_000:].tolist():
        idx.add(fp)
    idx.wait()
    assert sorted({len(run.tables.tables) for run in idx._runs}) == [4, 5]
    for i in range(0, 250_000, 2_500):
        q = flip(int(stored[i]), i % 10, rng)
        assert idx.query(q) == brute(stored, q, 8)
    assert_bound_as_dispatched(idx)


def test_reads_do_not_grow_the_index() -> None:
    idx = BlockIndex()
    idx.add_many(random_fps(np.random.default_rng(1), 10_000))
    before = (len(idx), idx.nbytes)
    for q in random_fps(np.random.default_rng(2), 1000).tolist():
        idx.query(q)
    assert (len(idx), idx.nbytes) == before


def test_tables_are_combinations() -> None:
    assert len(Layout().tables()) == 3 and Layout().probe == 1  # multi-index: 3 blocks, radius 1
    assert len(Layout(distance=8).tables()) == 3 and Layout(distance=8).probe == 2
    assert len(Layout(blocks=4).tables()) == 4 and Layout(blocks=4).probe == 0  # the paper's
    assert len(Layout(blocks=6).tables()) == 20
    widths = [w for _, w in Layout(blocks=6).block_ranges()]
    assert sum(widths) == 64 and max(widths) - min(widths) <= 1


def test_memory_per_fingerprint_is_compact() -> None:
    idx = BlockIndex()
    idx.add_many(random_fps(np.random.default_rng(1), 200_000))
    # fingerprint + live flag, 3 tables of (id, fingerprint), directories of ~2 ids per group
    assert idx.nbytes / len(idx) <= 64


def test_bad_parameters() -> None:
    with pytest.raises(ValueError):
        Layout(distance=20, blocks=2)  # would probe each 32-bit key at radius 10
    with pytest.raises(ValueError):
        Layout(bits=65)
    with pytest.raises(ValueError):
        BlockIndex().add(-1)
    with pytest.raises(ValueError):
        BlockIndex().add(1 << 64)
    with pytest.raises(ValueError):
        BlockIndex().query("12")  # type: ignore[arg-type]


@pytest.mark.parametrize("layout", [Layout(), Layout(distance=8), Layout(blocks=4)])
def test_removals_match_brute_force(layout: Layout) -> None:
    """Removed ids leave every table (tombstones, then rebuilds) and are never returned."""
    rng = np.random.default_rng(11)
    k = layout.distance
    stored = random_fps(rng, 6000)
    # clustered: 40 centres with 50 neighbours each within k + 1 bits
    centres = random_fps(rng, 40).tolist()
    cluster = [flip(c, int(rng.integers(0, k + 2)), rng) for c in centres for _ in range(50)]
    stored = np.concatenate([stored, np.array(cluster, dtype=U64)])
    idx = BlockIndex(layout, tail_capacity=101)
    for fp in stored.tolist():
        idx.add(fp)
    alive = np.ones(len(stored), dtype=bool)
    for round_ in range(3):
        for i in rng.choice(len(stored), 1500, replace=False).tolist():
            if alive[i]:
                idx.remove(i)
                alive[i] = False
        with pytest.raises(KeyError):
            idx.remove(int(np.flatnonzero(~alive)[0]))
        assert len(idx) == int(alive.sum())
        live = np.flatnonzero(alive)
        for q in [flip(c, int(rng.integers(0, k + 2)), rng) for c in centres]:
            want = [h for h in brute(stored, q, k) if alive[h[0]]]
            assert idx.query(q) == want, round_
        for fp in random_fps(rng, 500).tolist():  # new ids after removals
            idx.add(fp)
        stored = np.concatenate([stored, idx.fingerprints()[len(stored) :]])
        alive = np.concatenate([alive, np.ones(len(stored) - len(alive), dtype=bool)])
        assert len(live) <= len(idx)


def test_query_radius_is_a_smaller_ball() -> None:
    rng = np.random.default_rng(5)
    stored = random_fps(rng, 3000)
    idx = BlockIndex(Layout(distance=8))
    idx.add_many(stored)
    for i in range(0, 3000, 30):
        q = flip(int(stored[i]), i % 9, rng)
        assert idx.query(q, radius=3) == brute(stored, q, 3)


@pytest.mark.parametrize("sync_merge,merge_step", [(1, 5), (1, 1 << 13), (700, 37), (1 << 20, 1)])
def test_runs_merged_at_once_and_a_slice_per_add_match_brute_force(
    sync_merge: int, merge_step: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queries between adds, removals and merges (some built a slice per add, still pending,
    removals made meanwhile) return exactly the brute-force answer: clustered data, radius 8.
    Every merge built a slice at a time hands the arrays it read back to their columns (an
    earlier mapping is unmapped off this thread)."""
    released: list[bool] = []
    release = Column.release

    def spy(column: Column, view: np.ndarray) -> None:
        released.append(view is column.array)
        release(column, view)

    monkeypatch.setattr(Column, "release", spy)
    rng = np.random.default_rng(sync_merge)
    layout = Layout(distance=8)
    centres = random_fps(rng, 60).tolist()
    stored: list[int] = []
    idx = BlockIndex(layout, tail_capacity=64, sync_merge=sync_merge, merge_step=merge_step)
    alive: list[bool] = []
    pending = 0
    for step in range(6000):
        fp = (
            flip(centres[step % 60], int(rng.integers(0, 11)), rng)
            if step % 3
            else int(random_fps(rng, 1)[0])
        )
        assert idx.add(fp) == len(stored)
        stored.append(fp)
        alive.append(True)
        if step % 7 == 0 and step:
            i = int(rng.integers(0, len(stored)))
            if alive[i]:
                idx.remove(i)
                alive[i] = False
        pending += any(not m.done for m in idx._pending)
        if step % 50 == 0:
            arr = np.array(stored, dtype=U64)
            q = flip(centres[int(rng.integers(0, 60))], int(rng.integers(0, 10)), rng)
            want = [h for h in brute(arr, q, 8) if alive[h[0]]]
            assert idx.query(q) == want, step
    if sync_merge > 1:  # runs shrink geometrically: about log4(6000 / 64), plus merges pending
        assert idx.runs <= 16
    assert (pending > 1000) == (sync_merge < 1 << 20 and merge_step < 100)
    idx.wait()
    arr = np.array(stored, dtype=U64)
    for q in [flip(c, 4, rng) for c in centres]:
        assert idx.query(q) == [h for h in brute(arr, q, 8) if alive[h[0]]]
    assert_bound_as_dispatched(idx)
    assert (len(released) >= 2) == (sync_merge < 1 << 20)


def test_count_live_is_numpy_count() -> None:
    """What a merge counts its run's tombstones with (compiled: numpy's sum would hold
    the GIL, and so the crawl's thread, for 13 ms at 30 M)."""
    rng = np.random.default_rng(5)
    flags = rng.random(10_000) < 0.3
    for lo, hi in [(0, 10_000), (0, 0), (17, 18), *rng.integers(0, 10_000, (20, 2)).tolist()]:
        lo, hi = min(lo, hi), max(lo, hi)
        assert kernels().count_live(flags, lo, hi) == int(np.count_nonzero(flags[lo:hi]))


def assert_bound_as_dispatched(idx: BlockIndex) -> None:
    """The search calls its loops without numba's dispatch (``nearduppipe.index.runs.bind``): the code it
    bound must be what the dispatcher picks for the arguments it passes now, after merges,
    on worker threads or not, and after the columns grew."""
    assert idx.runs and idx._query is not None and idx._scan is not None
    q, k = np.uint64(12345), idx.distance
    out = (idx._alive, idx._out_ids, idx._out_d, 0)
    for run in idx._runs:
        assert idx._query is dispatched(kernels().query_run, *run.args, q, k, *out)
    fps = idx._fps
    assert idx._scan is dispatched(kernels().scan_range, fps, idx._alive, 0, 0, q, k, *out[1:])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_merges_pending_at_a_fork_are_finished_by_the_child() -> None:
    """Merges are built a slice per add by the adding thread: no thread is started for them.
    A merge still pending when the process forks is finished by the child at its first write,
    and its index answers exactly as a scan does; the parent goes on building its own. The
    columns are memory files mapped in both processes: the child's writes go to its own copy,
    never the parent's."""
    threads = threading.active_count()
    rng = np.random.default_rng(11)
    fps = random_fps(rng, 1500)
    fps[1000:1100] = fps[:100] ^ U64(0b1011)  # near-duplicates across runs
    idx = BlockIndex(Layout(distance=8), tail_capacity=64, sync_merge=1, merge_step=1)
    for fp in fps.tolist():
        idx.add(fp)
    assert idx._pending and not any(m.done for m in idx._pending)
    assert threading.active_count() <= threads + 1  # (at most the column freer)
    queries = [flip(int(fps[i]), 3, rng) for i in range(0, 1500, 37)]
    want = [brute(fps, q, 8) for q in queries]
    assert [idx.query(q) for q in queries] == want  # (answered while merges are pending)
    pid = fork()
    if pid == 0:  # the child: every merge its index waits for is still pending
        code = 1
        try:
            idx.remove(0)  # the first write: pending merges are finished first
            ok = not idx._pending and not idx.is_alive(0)
            grown = [idx.add(int(fp) ^ 1) for fp in random_fps(rng, 5000)]  # (grows them)
            idx.wait()
            ok = ok and grown[0] == len(fps)
            ok = ok and [idx.query(q) for q in queries] == [
                [h for h in w if h[0] != 0] for w in want
            ]
            code = 0 if ok and idx.query(int(fps[1]))[0] == (1, 0) else 3
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    assert exit_code(pid) == 0
    idx.wait()
    assert not idx._fps[len(fps) :].any()  # (the child's adds went to its own copy)
    assert [idx.query(q) for q in queries] == want  # id 0 is still here: the child's own
    assert idx.add(1) == len(fps) and idx.fingerprint(len(fps)) == 1
    assert idx.query(1) == [(len(fps), 0)]


def test_search_binds_the_code_the_dispatcher_picks() -> None:
    idx = BlockIndex(Layout(distance=8), tail_capacity=64, sync_merge=100)
    rng = np.random.default_rng(5)
    for fp in random_fps(rng, 20_000).tolist():  # columns grow; runs merge on both threads
        idx.add(fp)
        if idx.id_count % 997 == 0:
            idx.search_into(fp)
    idx.wait()
    idx.add_many(random_fps(rng, 5000))  # a bulk load's run
    idx.search_into(1)
    assert_bound_as_dispatched(idx)


@pytest.mark.parametrize(("bulk", "workers"), [(True, 1), (True, 3), (False, 1)])
def test_cross_is_the_brute_force_join_of_queries_and_stored(bulk: bool, workers: int) -> None:
    """``BlockIndex.cross`` (dedup --against): every (query, stored id, d) within the distance,
    sorted, as a full scan finds them: random, clustered and adversarial queries (each block
    of a stored fingerprint flipped, exact copies, a removed id)."""
    rng = np.random.default_rng(22)
    centres = random_fps(rng, 40).tolist()
    stored = np.array(
        [flip(c, int(rng.integers(0, 11)), rng) for c in centres for _ in range(15)]
        + random_fps(rng, 800).tolist(),
        dtype=U64,
    )
    queries = np.array(
        [flip(c, int(rng.integers(0, 12)), rng) for c in centres for _ in range(10)]
        + [int(stored[i]) for i in range(0, 600, 7)]  # exact copies
        + [int(stored[i]) ^ (0xFF << (8 * (i % 8))) for i in range(0, 600, 11)]  # 8 bits, one block
        + random_fps(rng, 300).tolist(),
        dtype=U64,
    )
    idx = BlockIndex(Layout(distance=8), tail_capacity=128)
    if bulk:
        idx.add_many(stored)  # one run: the compiled join
    else:
        for fp in stored.tolist():
            idx.add(fp)
    idx.remove(5)
    want = sorted(
        (q, j, d)
        for q in range(len(queries))
        for j, d in brute(stored, int(queries[q]), 8)
        if j != 5
    )
    got = idx.cross(queries, workers).tolist()
    assert got == [list(p) for p in want] and len(want) > 500


@pytest.mark.parametrize("workers", [1, 2])
def test_cross_at_a_bulk_size_is_the_brute_force_join(workers: int) -> None:
    """The grouped join (queries sharing a bucket probe it once) on a run of 4 tables of
    16-bit keys (~200 k stored: buckets of ~3 ids, groups of several queries), with skewed
    fingerprints (long buckets), clusters and queries at distance 8 and 9 of a stored one:
    exactly the pairs a full scan finds, each once, in both threads' shares."""
    rng = np.random.default_rng(23)
    n = 200_000
    skewed = np.zeros(n // 4, dtype=U64)
    for b in range(64):  # (bits set with probability 0.15 or 0.85: crowded buckets)
        on = rng.random(n // 4) < (0.15 if b % 2 else 0.85)
        skewed |= on.astype(U64) << U64(b)
    stored = np.concatenate([random_fps(rng, n - n // 4), skewed])
    picks = rng.choice(n, 1500, replace=False)
    queries = np.array(
        [flip(int(stored[i]), int(rng.integers(0, 10)), rng) for i in picks.tolist()]
        + [flip(int(stored[i]), 8, rng) for i in picks[:300].tolist()]
        + [flip(int(stored[i]), 9, rng) for i in picks[300:600].tolist()]
        + random_fps(rng, 1500).tolist(),
        dtype=U64,
    )
    idx = BlockIndex(Layout(distance=8))
    idx.add_many(stored)
    idx.remove(int(picks[0]))
    assert idx._runs[0].args[0].shape[0] == 4  # (the table set of bulk joins)
    want = [
        [q, j, d]
        for q in range(len(queries))
        for j, d in sorted(brute(stored, int(queries[q]), 8))
        if j != int(picks[0])
    ]
    got = idx.cross(queries, workers).tolist()
    assert got == want and len(want) > 2000


@pytest.mark.parametrize(("bulk", "workers"), [(True, 1), (True, 2), (False, 1)])
def test_pairs_are_the_brute_force_self_join(bulk: bool, workers: int) -> None:
    rng = np.random.default_rng(21)
    centres = random_fps(rng, 50).tolist()
    stored = np.array(
        [flip(c, int(rng.integers(0, 11)), rng) for c in centres for _ in range(20)]
        + random_fps(rng, 1000).tolist(),
        dtype=U64,
    )
    idx = BlockIndex(Layout(distance=8), tail_capacity=128)
    if bulk:
        idx.add_many(stored)  # one run: the compiled self-join
    else:
        for fp in stored.tolist():
            idx.add(fp)
    idx.remove(3)
    want = [
        (i, j, d)
        for i in range(len(stored))
        for j, d in brute(stored, int(stored[i]), 8)
        if j > i and 3 not in (i, j)
    ]
    assert idx.pairs(workers).tolist() == [list(p) for p in sorted(want)]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_pairs_at_a_bulk_size_are_the_brute_force_self_join(workers: int) -> None:
    """The grouped self-join on a run of 4 tables of 16-bit keys (~200 k ids): clusters of
    near copies, exact copies and a removed id, each pair once with ``i < j``: a full scan
    for the clustered ids, and one query per id (the index's single-query search, itself
    tested against a full scan above) for all of them."""
    rng = np.random.default_rng(24)
    centres = random_fps(rng, 400).tolist()
    near = [flip(c, int(rng.integers(0, 10)), rng) for c in centres for _ in range(5)]
    fps = np.array(
        near + near[:100] + random_fps(rng, 200_000 - len(near) - 100).tolist(), dtype=U64
    )
    idx = BlockIndex(Layout(distance=8))
    idx.add_many(fps)
    idx.remove(7)
    assert idx._runs[0].args[0].shape[0] == 4
    got = idx.pairs(workers).tolist()
    per_query = [
        [i, j, d]
        for i in range(len(fps))
        if i != 7
        for j, d in sorted(idx.query(int(fps[i])))
        if j > i
    ]
    assert got == per_query
    clustered = len(near) + 100
    scan = sorted(
        (i, j, d)
        for i in range(clustered)
        for j, d in brute(fps, int(fps[i]), 8)
        if j > i and 7 not in (i, j)
    )
    assert [p for p in got if p[0] < clustered] == [list(p) for p in scan] and len(scan) > 2000
