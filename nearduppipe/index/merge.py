"""Merges of index runs, built a slice at a time by the thread that adds.

Large merges used to run on worker threads, which release the GIL while they build but take it
back after each compiled call: on a busy 2-core machine the adding thread then handed the GIL
over and waited until the worker (at a lower priority) was scheduled, 150-580 ms for calls that
used 0.2 ms of CPU, measured at 0.2-1 M adds (issue 33). Here each add advances the pending
merge by :data:`MERGE_STEP` ids or buckets (the loops of :mod:`.steps`), so no add waits for
more than a slice and no other thread touches the index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .runs import Geometry, Run, TableSet, kernels, run_shape

__all__ = ["MERGE_STEP", "Merge", "warm"]

# what one call of Merge.advance may do by default: ids or buckets visited (~10-40 us)
MERGE_STEP = 1 << 13
_LIVE, _TOUCH, _COUNT, _PREFIX, _SCATTER, _RECOUNT = range(6)


class Merge:
    """One run being built from the runs ``sources`` (adjacent), a slice at a time, by the
    thread that adds (:meth:`advance`, a bounded step per add).

    Merges used to run on worker threads, and the adding thread then waited for them to take
    the GIL back, up to hundreds of ms on a busy machine (see :mod:`.steps`). Here no thread
    but the caller's touches the index. The merge reads the fingerprint and flag arrays it was
    given; ids removed while it runs are filtered by queries like any tombstone and counted
    at its end. The old runs keep answering until the finished run is swapped in."""

    def __init__(self, geo: Geometry, fps: np.ndarray, alive: np.ndarray, sources: list[Run]):
        self.sources = sources
        self.result: Run | None = None
        self._geo = geo
        self._arrays: tuple[np.ndarray, np.ndarray] | None = (fps, alive)
        self._lo, self._hi = sources[0].lo, sources[-1].hi
        self._ids = np.empty(self._hi - self._lo, dtype=np.int64)
        self._m = 0  # live ids found so far
        self._stage, self._pos, self._t = _LIVE, self._lo, 0
        self._live = 0
        self._parts: tuple[TableSet, int, np.ndarray] | None = None
        self._buckets = self._fill = self._offsets = self._tfps = self._tids = self._ids
        self._touch: list[np.ndarray] = []

    @property
    def done(self) -> bool:
        return self.result is not None

    def advance(self, budget: int = MERGE_STEP) -> bool:
        """Visit about ``budget`` ids or buckets more; True once the run is built."""
        S = _steps()
        assert self._arrays is not None
        fps, alive = self._arrays
        while budget > 0 and self.result is None:
            stage, pos, t = self._stage, self._pos, self._t
            if stage in (_LIVE, _RECOUNT):
                end = self._hi
            elif stage == _TOUCH:
                end = sum(a.size for a in self._touch)
            else:
                assert self._parts is not None
                ts, dir_bits, drops = self._parts
                end = 1 << dir_bits if stage == _PREFIX else self._m
            stop = min(pos + budget, end)
            if stage == _LIVE:
                self._m = S.live_step(alive, pos, stop, self._ids, self._m)
            elif stage == _RECOUNT:
                self._live += int(kernels().count_live(alive, pos, stop))
            elif stage == _TOUCH:
                base = 0
                for a in self._touch:  # (zeroed in order, a slice at a time)
                    if pos < base + a.size and stop > base:
                        a[max(pos - base, 0) : stop - base] = 0
                    base += a.size
            elif stage == _COUNT:
                S.count_step(
                    fps, self._ids, pos, stop, ts.shifts, ts.widths, t, int(drops[t]),
                    self._buckets, self._offsets[t],
                )  # fmt: skip
            elif stage == _PREFIX:
                S.prefix_step(self._offsets[t], self._fill, pos, stop)
            else:
                S.scatter_step(
                    fps, self._ids, self._buckets, self._fill, self._tfps, self._tids, t,
                    pos, stop,
                )  # fmt: skip
            budget -= max(1, stop - pos)
            self._pos = stop
            if stop == end:
                self._next_stage()
        return self.result is not None

    def _tables(self) -> None:
        """The live ids are known: allocate the run's arrays, then touch the tables' pages a
        slice at a time (``_TOUCH``; the directory must be zeros anyway): the scatter writes
        the tables at random, and its first slices took 40-50 ms of CPU faulting their pages
        in at 1-1.6 M ids, measured (numpy's huge pages; see :func:`.steps.allocate`)."""
        m = self._m
        ts, dir_bits, _ = self._parts = run_shape(self._geo, m)
        n = len(ts.tables)
        self._ids = self._ids[:m]
        arrays = _steps().allocate(n, m, 1 << dir_bits)
        self._offsets, self._tfps, self._tids, self._buckets, self._fill = arrays
        self._touch = [a.reshape(-1) for a in arrays]
        self._stage, self._pos, self._t = _TOUCH, 0, 0

    def _next_stage(self) -> None:
        if self._stage == _LIVE:
            self._tables()
        elif self._stage == _TOUCH:
            self._stage, self._pos = _COUNT, 0
        elif self._stage == _RECOUNT:
            self._finish()
        elif self._stage == _COUNT:
            self._stage, self._pos = _PREFIX, 0
        elif self._stage == _PREFIX:
            self._stage, self._pos = _SCATTER, 0
        elif self._parts is not None and self._t + 1 < len(self._parts[0].tables):  # next table
            self._stage, self._pos, self._t = _COUNT, 0, self._t + 1
        else:
            self._stage, self._pos = _RECOUNT, self._lo

    def _finish(self) -> None:
        assert self._parts is not None
        ts, dir_bits, _ = self._parts
        run = Run.built(
            self._lo, self._hi, self._m, ts, dir_bits, (self._offsets, self._tfps, self._tids)
        )
        run.dead = run.size - self._live  # (removed while it was built)
        self.result = run
        self._buckets = self._fill = self._ids = self._offsets = self._tfps = self._tids = _EMPTY

    def views(self) -> tuple[np.ndarray, np.ndarray]:
        """The fingerprint and flag arrays the merge read (for :meth:`Column.release`), once
        it is done; the merge lets go of them."""
        arrays, self._arrays = self._arrays, None
        assert arrays is not None, "views() is called once, after take()"
        return arrays

    def take(self) -> Run:
        """The run, built now if it is not yet (tests, ``wait``, a forked child's first
        write)."""
        while not self.advance(1 << 30):
            pass
        assert self.result is not None
        return self.result


_EMPTY = np.empty(0, dtype=np.int64)


def warm() -> None:
    """Load the merge loops now (what :class:`~nearduppipe.index.BlockIndex` does at start)."""
    _steps()


_STEPS: Any = None


def _steps() -> Any:
    """:mod:`.steps`, imported with :func:`kernels` (the same numba cache folder)."""
    global _STEPS
    if _STEPS is None:
        kernels()
        from . import steps

        steps.warm()
        _STEPS = steps
    return _STEPS
