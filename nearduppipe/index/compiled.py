"""The index's inner loops, compiled by numba: what a store's add and check run.

A radius-8 search probes 50-700 buckets per run and verifies hundreds to thousands of candidates;
as numpy calls that is ~20 vectorised steps with a temporary array each (~65 us at 1 M stored),
as one compiled loop it is a few microseconds. numba (a JIT for exactly this kind of numeric
loop, with wheels for every supported Python) replaces hand-written C here.

Every function takes plain arrays, allocates nothing per candidate and releases the GIL
(``nogil``), so a large merge can run on a worker thread while the crawl's thread queries.
Compiled code is cached beside this file (``cache=True``); without a cache, compiling takes ~1 s.

Table keys follow :func:`nearduppipe.index.layout.table_key`: a table's key is its blocks
``(shift, width)`` concatenated, most significant first; a run files each fingerprint in the
bucket given by the top ``dir_bits`` bits of that key (``key >> drop``).

The batch kernels (a run's self-join, connected components) are in :mod:`.joins`; the slices
of a merge in :mod:`.steps`. :func:`nearduppipe.index.runs.kernels` gathers them all.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, types
from numba.core import cgutils as _cgutils
from numba.extending import intrinsic

__all__ = [
    "bucket",
    "build_run",
    "count_live",
    "live_ids",
    "query_run",
    "scan_range",
    "verdicts",
    "warm",
]

_U64 = np.uint64
cgutils: Any = _cgutils  # (untyped)
ir: Any = cgutils.ir  # numba's own llvmlite.ir, the one it generates code with


@intrinsic
def _ctpop(typingctx: Any, x: Any) -> Any:
    """The CPU's population count of a uint64 (LLVM ``ctpop``)."""
    sig = types.uint64(types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.ctpop(args[0])

    return sig, codegen


_popcount: Any = _ctpop  # called with one argument inside compiled code


@intrinsic
def _prefetch_at(typingctx: Any, arr: Any, i: Any) -> Any:
    """Ask the CPU to start loading ``arr[i]`` (1-d) into its caches (LLVM ``prefetch``)."""
    sig = types.void(arr, i)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # a read, kept in every cache level, of data
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


_prefetch: Any = _prefetch_at


@njit(cache=True, nogil=True, inline="always")
def bucket(fp: Any, shifts: Any, widths: Any, t: int, drop: int) -> Any:
    key = _U64(0)
    for p in range(shifts.shape[1]):
        w = widths[t, p]
        if w == 0:
            break
        key = (key << _U64(w)) | ((fp >> _U64(shifts[t, p])) & ((_U64(1) << _U64(w)) - _U64(1)))
    return np.int64(key >> _U64(drop))


@njit(cache=True, nogil=True)
def live_ids(alive: Any, lo: int, hi: int) -> Any:
    """The ids ``lo .. hi - 1`` still alive, ascending (``np.flatnonzero`` without the GIL)."""
    out = np.empty(hi - lo, dtype=np.int64)
    m = 0
    for i in range(lo, hi):
        if alive[i]:
            out[m] = i
            m += 1
    return out[:m]


@njit(cache=True, nogil=True)
def count_live(alive: Any, lo: int, hi: int) -> int:
    """How many ids of ``lo .. hi - 1`` are alive, without the GIL (numpy's sum of 30 M flags
    holds it 13 ms, measured: on a merge worker, that long a stall of the crawl's thread)."""
    m = 0
    for i in range(lo, hi):
        m += alive[i]
    return m


@njit(cache=True, nogil=True)
def build_run(
    fps: Any, ids: Any, shifts: Any, widths: Any, drops: Any, dir_bits: int
) -> tuple[Any, Any, Any]:
    """``(offsets, table_fps, table_ids)`` of the ids ``ids`` (ascending) in every table: a
    counting sort by bucket, stable, so each bucket lists its ids oldest first. Offsets are
    ``int32`` (a run holds fewer than 2**31 ids): half the directory's cache footprint.

    Allocated here, on 4 KiB pages. Huge pages (numpy's allocation madvises them) made no
    difference to a check at 1 M or 10 M, measured again for the query alone at 10 M in
    2026-11, and with THP ``defrag = madvise`` a worker building a large run stalled in
    direct compaction holding the address space's lock: an add waited 917 ms at 28 M."""
    n_tables = shifts.shape[0]
    m = len(ids)
    nb = 1 << dir_bits
    offsets = np.zeros((n_tables, nb + 1), dtype=np.int32)
    tfps = np.empty((n_tables, m), dtype=np.uint64)
    tids = np.empty((n_tables, m), dtype=np.uint32)
    buckets = np.empty(m, dtype=np.int64)
    for t in range(n_tables):
        row = offsets[t]
        for j in range(m):
            b = bucket(fps[ids[j]], shifts, widths, t, drops[t])
            buckets[j] = b
            row[b + 1] += 1
        for b in range(nb):
            row[b + 1] += row[b]
        fill = row[:nb].astype(np.int64)
        for j in range(m):
            i = ids[j]
            pos = fill[buckets[j]]
            fill[buckets[j]] = pos + 1
            tfps[t, pos] = fps[i]
            tids[t, pos] = i
    return offsets, tfps, tids


@njit(cache=True, nogil=True)
def query_run(
    offsets: Any,
    tfps: Any,
    tids: Any,
    shifts: Any,
    widths: Any,
    drops: Any,
    masks: Any,
    n_masks: Any,
    probes: Any,
    q: Any,
    radius: int,
    alive: Any,
    out_ids: Any,
    out_d: Any,
    k: int,
) -> int:
    """Append ``(id, distance)`` of every live fingerprint of one run within ``radius`` of
    ``q`` to ``out_*`` from position ``k``; returns the new count (which may exceed the
    buffers: the caller retries with larger ones). Table ``t`` is probed at the offsets
    ``masks[t, :n_masks[t]]`` (its keys within ``probes[t]`` bits). Each id is reported once:
    from the first table whose probed buckets hold it."""
    n_tables = offsets.shape[0]
    qb = np.empty(n_tables, dtype=np.int64)
    for t in range(n_tables):
        qb[t] = bucket(q, shifts, widths, t, drops[t])
    # Three passes: the directory reads of every probe first (independent loads the CPU
    # overlaps; measured 20-30 % faster than scanning each bucket as it is found), then a
    # prefetch of every cache line of the buckets found, then the scan (the prefetches: 12-15 %
    # less per query at 1 M and 10 M, measured; each line rather than the first: 10 % less on
    # clustered fingerprints, whose buckets are longer). A bucket rarely starts on a line, so
    # its last line is prefetched apart: missed, it was read inside the scan, where few misses
    # overlap (10-35 % of a 10 M query, measured).
    row_len = masks.shape[1]
    lo = np.empty(n_tables * row_len, dtype=np.int64)
    hi = np.empty(n_tables * row_len, dtype=np.int64)
    for t in range(n_tables):
        for mi in range(n_masks[t]):
            b = qb[t] ^ masks[t, mi]
            lo[t * row_len + mi] = offsets[t, b]
            hi[t * row_len + mi] = offsets[t, b + 1]
    for t in range(n_tables):
        row = tfps[t]
        for mi in range(n_masks[t]):
            start, stop = lo[t * row_len + mi], hi[t * row_len + mi]
            for j in range(start, stop, 8):  # a point in each cache line the bucket spans
                _prefetch(row, j)
            if stop - start > 1:
                _prefetch(row, stop - 1)  # (the last line when the bucket ends past j)
    cap = len(out_ids)
    for t in range(n_tables):
        for mi in range(n_masks[t]):
            for j in range(lo[t * row_len + mi], hi[t * row_len + mi]):
                f = tfps[t, j]
                d = _popcount(f ^ q)
                if d > radius:
                    continue
                seen = False
                for t2 in range(t):
                    b2 = bucket(f, shifts, widths, t2, drops[t2])
                    if _popcount(_U64(b2 ^ qb[t2])) <= probes[t2]:
                        seen = True
                        break
                if seen:
                    continue
                i = tids[t, j]
                if not alive[i]:
                    continue
                if k < cap:
                    out_ids[k] = i
                    out_d[k] = d
                k += 1
    return k


@njit(cache=True, nogil=True)
def scan_range(
    fps: Any, alive: Any, lo: int, hi: int, q: Any, radius: int, out_ids: Any, out_d: Any, k: int
) -> int:
    """:func:`query_run` for the ids ``lo .. hi - 1`` not yet in a run (a direct scan)."""
    cap = len(out_ids)
    for i in range(lo, hi):
        d = _popcount(fps[i] ^ q)
        if d <= radius and alive[i]:
            if k < cap:
                out_ids[k] = i
                out_d[k] = d
            k += 1
    return k


@njit(cache=True, nogil=True)
def verdicts(
    ids: Any,
    d64: Any,
    wide: Any,
    has_wide: Any,
    times: Any,
    qwide: Any,
    q_has_wide: bool,
    cutoff: float,
    exclude: int,
    radius: int,
    threshold: int,
    legacy: int,
    out_wide: Any,
    out_sel: Any,
) -> int:
    """The candidates ``ids[:len(out_sel)]`` that the two-stage rule calls near
    (:meth:`nearduppipe.fingerprint.rule.Rule.is_near`), skipping id ``exclude`` and entries
    stored before ``cutoff``: their positions go to ``out_sel`` and their count is returned.
    ``threshold < 0`` is the paper's rule (64-bit only). ``out_wide[j]`` receives candidate j's
    wide distance, or -1 where either side has none (under the paper's rule too: it is shown,
    not used)."""
    kept = 0
    for j in range(len(out_sel)):
        i = ids[j]
        out_wide[j] = -1
        if i == exclude or times[i] < cutoff or d64[j] > radius:
            continue
        if q_has_wide and has_wide[i]:  # reported under every rule (explain, reports)
            dw = 0
            for w in range(wide.shape[1]):
                dw += _popcount(wide[i, w] ^ qwide[w])
            out_wide[j] = dw
            near = threshold < 0 or dw <= threshold
        else:
            near = threshold < 0 or d64[j] <= min(radius, legacy)
        if near:
            out_sel[kept] = j
            kept += 1
    return kept


_warm = False


def warm() -> None:
    """Compile (or load from the disk cache) every kernel of this module with the argument
    types the index uses, so the first add or query of a crawl does not pay for it (up to
    seconds). (The batch kernels of :mod:`.joins` are compiled at their first call.)"""
    global _warm
    if _warm:
        return
    fps = np.arange(8, dtype=np.uint64)
    alive = np.ones(8, dtype=np.bool_)
    shifts = np.zeros((1, 1), dtype=np.int64)
    widths = np.full((1, 1), 2, dtype=np.int64)
    drops = np.zeros(1, dtype=np.int64)
    ids = live_ids(alive, 0, 8)
    count_live(alive, 0, 8)
    offsets, tfps, tids = build_run(fps, ids, shifts, widths, drops, 2)
    out_ids, out_d = np.empty(8, dtype=np.int64), np.empty(8, dtype=np.int64)
    # read-only, as a run's are: one specialisation, not two
    masks, n_masks, probes = np.zeros((1, 1), np.int64), np.ones(1, np.int64), np.zeros(1, np.int64)
    masks.flags.writeable = n_masks.flags.writeable = probes.flags.writeable = False
    args = (offsets, tfps, tids, shifts, widths, drops, masks, n_masks, probes, np.uint64(1), 1)
    query_run(*args, alive, out_ids, out_d, 0)
    scan_range(fps, alive, 0, 8, np.uint64(1), 1, out_ids, out_d, 0)
    wide = np.zeros((8, 8), dtype=np.uint64)
    verdicts(
        ids, out_d, wide, alive, np.zeros(8), wide[0], True, 0.0, -1, 8, 61, 3, out_d.copy(),
        out_ids[:8],
    )  # fmt: skip
    _warm = True
