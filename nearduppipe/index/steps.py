"""A run built a slice at a time: the compiled loops of :class:`nearduppipe.index.runs.Merge`.

:func:`nearduppipe.index.compiled.build_run` builds a run in one call. Large merges used to call
it on worker threads, which release the GIL while they build but must take it back after:
on a busy 2-core machine the crawl's thread then handed the GIL over and waited until the
worker (at a lower priority) was scheduled to take it, 150-580 ms with 0.2 ms of CPU, measured
at 0.2-1 M adds (issue 33). These loops do the same counting sort in slices of a bounded number
of ids or buckets, so the adding thread itself advances a merge by a few microseconds per add,
and no other thread ever needs the GIL for it. Each loop's slice is ``start .. stop - 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .compiled import bucket

__all__ = ["allocate", "count_step", "live_step", "prefix_step", "scatter_step"]


@njit(cache=True, nogil=True)
def live_step(alive: Any, start: int, stop: int, ids: Any, m: int) -> int:
    """Append the live ids of the slice to ``ids[:m]``; returns the new length."""
    for i in range(start, stop):
        if alive[i]:
            ids[m] = i
            m += 1
    return m


@njit(cache=True, nogil=True)
def count_step(
    fps: Any,
    ids: Any,
    start: int,
    stop: int,
    shifts: Any,
    widths: Any,
    t: int,
    drop: int,
    buckets: Any,
    row: Any,
) -> None:
    """Table ``t``'s bucket of ``ids[start:stop]`` into ``buckets``, counted in
    ``row[bucket + 1]``."""
    for j in range(start, stop):
        b = bucket(fps[ids[j]], shifts, widths, t, drop)
        buckets[j] = b
        row[b + 1] += 1


@njit(cache=True, nogil=True)
def prefix_step(row: Any, fill: Any, start: int, stop: int) -> None:
    """Buckets ``start .. stop - 1`` of the directory: counts to offsets (running sums),
    each bucket's first offset also in ``fill`` (where the scatter writes next)."""
    for b in range(start, stop):
        fill[b] = row[b]
        row[b + 1] += row[b]


@njit(cache=True, nogil=True)
def scatter_step(
    fps: Any, ids: Any, buckets: Any, fill: Any, tfps: Any, tids: Any, t: int, start: int, stop: int
) -> None:
    """File ``ids[start:stop]`` at their bucket's next place in table ``t`` (stable: a
    bucket lists its ids oldest first)."""
    for j in range(start, stop):
        i = ids[j]
        b = buckets[j]
        pos = fill[b]
        fill[b] = pos + 1
        tfps[t, pos] = fps[i]
        tids[t, pos] = i


@njit(cache=True, nogil=True)
def allocate(n_tables: int, m: int, nb: int) -> tuple[Any, Any, Any, Any, Any]:
    """A run's arrays, uninitialised: ``(offsets, table_fps, table_ids, buckets, fill)``.

    Allocated here, on 4 KiB pages: numpy asks for huge pages on large arrays, and with THP
    ``defrag = madvise`` the first writes of a merge's tables then compacted memory on the
    adding thread (10-50 ms of CPU in one add at 1-2 M ids, measured)."""
    return (
        np.empty((n_tables, nb + 1), dtype=np.int32),
        np.empty((n_tables, m), dtype=np.uint64),
        np.empty((n_tables, m), dtype=np.uint32),
        np.empty(m, dtype=np.int64),
        np.empty(nb, dtype=np.int64),
    )


def warm() -> None:
    """Compile (or load from the disk cache) these loops for the types a merge passes, so the
    first large merge of a crawl does not pay for it (hundreds of ms in one add)."""
    fps = np.arange(8, dtype=np.uint64)
    alive = np.ones(8, dtype=np.bool_)
    offsets, tfps, tids, buckets, fill = allocate(1, 8, 4)
    ids = np.empty(8, dtype=np.int64)
    m = live_step(alive, 0, 8, ids, 0)
    offsets[:] = 0
    shifts = np.zeros((1, 1), dtype=np.int64)
    widths = np.full((1, 1), 2, dtype=np.int64)
    count_step(fps, ids, 0, m, shifts, widths, 0, 0, buckets, offsets[0])
    prefix_step(offsets[0], fill, 0, 4)
    scatter_step(fps, ids, buckets, fill, tfps, tids, 0, 0, m)
