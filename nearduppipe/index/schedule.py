"""When :class:`nearduppipe.index.BlockIndex` seals its tail into a run and which runs it merges.

The runs form a log-structured merge: adjacent runs of similar size are merged into one (a
binary counter with factor :data:`MERGE_FACTOR`), so a query searches about ``log4`` of the
size runs and each id is rebuilt ``O(log n)`` times. A merge of at most :data:`SYNC_MERGE` ids is
built at once on the adding thread; a larger one is a :class:`~nearduppipe.index.merge.Merge`,
advanced a slice per add, and swapped in by a later add once built (at most
:data:`MERGE_THREADS` pending at a time, on disjoint runs). This is the policy; the index's
arrays and queries are in :mod:`.search`, the merge's slices in :mod:`.merge`.
"""

from __future__ import annotations

import numpy as np

from .columns import Column, free_later
from .merge import Merge
from .runs import Geometry, Run

__all__ = ["MERGE_FACTOR", "MERGE_THREADS", "SYNC_MERGE", "MergeSchedule"]

# ids a merge may rebuild on the caller's thread: 2.5-3.1 ms of CPU (1 << 15: 5.3-6.2 ms, and 6x
# more adds over 5 ms in a 30 M add loop; no fewer over 20 ms, which wait for a core), measured
SYNC_MERGE = 1 << 14
MERGE_FACTOR = 4  # a run is merged with the newer ones once they reach 1/4 of its span
# merges pending per index, on disjoint runs, each advanced by every add (a big one need not
# hold up the small ones)
MERGE_THREADS = 2


class MergeSchedule:
    """The merge policy of :class:`~nearduppipe.index.BlockIndex`, which holds the state."""

    # (the index's attributes this policy reads and changes)
    sync_merge: int
    _geo: Geometry
    _fps: np.ndarray
    _alive: np.ndarray
    _fps_column: Column
    _alive_column: Column
    _n: int
    _tail: int
    _runs: list[Run]
    _pending: list[Merge]

    def _seal(self) -> None:
        """Turn the tail into a run, then merge runs of similar size."""
        self._collect()
        if self._tail < self._n:
            self._runs.append(Run(self._geo, self._fps, self._alive, self._tail, self._n))
            self._tail = self._n
        # runs up to the last one a pending merge takes are not merged again here
        busy = max((self._runs.index(m.sources[-1]) + 1 for m in self._pending), default=0)
        while len(self._runs) - busy >= 2:
            # merge the newest runs while the one before is at most MERGE_FACTOR times their
            # total span: runs shrink geometrically from oldest to newest, so a query searches
            # about log4(n / tail) of them and each id is rebuilt about 4 * log4(n / tail) times
            take, span = 1, self._runs[-1].hi - self._runs[-1].lo
            while len(self._runs) - busy > take:
                before = self._runs[-take - 1]
                if before.hi - before.lo > MERGE_FACTOR * span:
                    break
                take, span = take + 1, span + before.hi - before.lo
            if take == 1:
                break
            started = len(self._pending)
            if self._rebuild(self._runs[-take:]):
                continue
            if len(self._pending) > started:  # started, built a slice per add
                busy = len(self._runs)
                continue
            # too big to merge at once and two merges are pending: merge the newest runs that
            # fit under sync_merge, so small runs do not pile up meanwhile
            take, span = 0, 0
            while len(self._runs) - busy > take:
                nxt = self._runs[-take - 1]
                if span + nxt.hi - nxt.lo > self.sync_merge:
                    break
                take, span = take + 1, span + nxt.hi - nxt.lo
            if take < 2 or not self._rebuild(self._runs[-take:]):
                break

    def _rebuild(self, sources: list[Run]) -> bool:
        """Replace adjacent runs ``sources`` by one run of their live ids: at once when small,
        else a slice per add (False: started so, or two merges are pending already)."""
        if sum(r.hi - r.lo for r in sources) <= self.sync_merge:
            at = self._runs.index(sources[0])
            merged = Run(self._geo, self._fps, self._alive, sources[0].lo, sources[-1].hi)
            self._runs[at : at + len(sources)] = [merged]
            return True
        if len(self._pending) < MERGE_THREADS:
            self._pending.append(Merge(self._geo, self._fps, self._alive, sources))
        return False

    def _busy(self, run: Run) -> bool:
        return any(run in m.sources for m in self._pending)

    def _collect(self) -> None:
        """Swap in the merges that are built."""
        for merge in [m for m in self._pending if m.done]:
            self._pending.remove(merge)
            merged = merge.take()
            views = merge.views()  # (not kept past the release: see Column.release)
            self._fps_column.release(views[0])
            self._alive_column.release(views[1])
            del views
            at = self._runs.index(merge.sources[0])
            self._runs[at : at + len(merge.sources)] = [merged]
            # the old runs' arrays (hundreds of MB at tens of millions of ids) are freed
            # outside the GIL, on a worker thread (no query reads them any more)
            old, merge.sources = merge.sources, []
            free_later(a for run in old for a in (run.offsets, run.tfps, run.tids))

    def wait(self) -> None:
        """Finish the pending merges, and those they make due (tests, benchmarks, batch, before
        a bulk self-join)."""
        while True:
            for merge in self._pending:
                merge.take()
            self._collect()
            self._seal()
            if self._pending:
                continue
            # adds made while merges were pending leave runs an add's merge step never
            # reaches (it looks at the newest runs only): merge from the oldest run that
            # the newer ones have outgrown
            total, oldest = 0, None
            for at in range(len(self._runs) - 1, -1, -1):
                span = self._runs[at].hi - self._runs[at].lo
                if total and span <= MERGE_FACTOR * total:
                    oldest = at
                total += span
            if oldest is None:
                return
            self._rebuild(self._runs[oldest:])
