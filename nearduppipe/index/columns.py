"""Growable arrays whose growth never copies what they hold.

The index and the stores keep one row per id (fingerprint, live flag, wide fingerprint, time).
Growing a numpy array copies it: at 30 M ids the 512-bit column alone is 1.9 GB, a pause of
most of a second on the crawl's thread. On Linux a column lives in an anonymous memory file
(``memfd_create``) instead: growing it is ``ftruncate`` and a new, larger mapping of the same
pages, so nothing is copied and views handed out earlier stay valid (they keep the old mapping
alive). Elsewhere growth falls back to a doubling copy.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import queue
import sys
import threading
import weakref
from collections.abc import Iterable

import numpy as np

__all__ = ["Column", "fork_generation", "free_later", "wait_freed"]


_PAGE = mmap.PAGESIZE
_madvise = None
if sys.platform == "linux":  # (ctypes calls run without the GIL)
    try:
        _madvise = ctypes.CDLL(None, use_errno=True).madvise
        _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _madvise.restype = ctypes.c_int
    except (OSError, AttributeError):
        _madvise = None


def _return_pages(arrays: list[np.ndarray]) -> None:
    for arr in arrays:
        start = arr.ctypes.data
        lo = -(-start // _PAGE) * _PAGE  # whole pages inside the array only
        hi = (start + arr.nbytes) // _PAGE * _PAGE
        if _madvise is not None and hi - lo >= 1 << 20:
            _madvise(lo, hi - lo, mmap.MADV_DONTNEED)
    arrays.clear()


_queue: queue.SimpleQueue[list[np.ndarray] | threading.Event] | None = None
_queue_lock = threading.Lock()


def _freer(work: queue.SimpleQueue[list[np.ndarray] | threading.Event]) -> None:
    # (at the normal priority: it takes the GIL back after each madvise, and a thread that
    # holds the GIL waits, when asked to give it up, until the asking thread runs; a thread
    # at nice +10 on a busy machine kept the crawl's thread waiting 100s of ms, issue 33)
    while True:
        item = work.get()
        if isinstance(item, threading.Event):
            item.set()
        else:
            _return_pages(item)
        del item


def _work_queue() -> queue.SimpleQueue[list[np.ndarray] | threading.Event]:
    global _queue
    with _queue_lock:
        if _queue is None:  # one thread for the process (starting one per call cost ~1 ms)
            _queue = queue.SimpleQueue()
            threading.Thread(
                target=_freer, args=(_queue,), name="neardup-free", daemon=True
            ).start()
        return _queue


_generation = 0  # forks this process is away from the one that started the program


def fork_generation() -> int:
    """Which process this is, as far as columns care: it changes in a forked child.

    A column's pages are a shared mapping of a memory file: after ``fork`` parent and child
    write the same memory, and a child that grew a column would shrink the file under its
    parent (SIGBUS there). So a forked child that writes takes :meth:`Column.owned` first."""
    return _generation


def _after_fork() -> None:  # a forked child has no thread to serve it
    global _queue, _queue_lock, _generation
    _queue, _queue_lock = None, threading.Lock()
    _generation += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def free_later(arrays: Iterable[np.ndarray]) -> None:
    """Drop the last references to large arrays that nothing reads any more, on a worker
    thread, after handing their pages back to the kernel outside the GIL.

    Freeing hundreds of MB (an index run replaced by a merge at tens of millions of ids)
    unmaps them inside ``free()``, which holds the GIL: the crawl's thread waited 20-90 ms for
    it at 10-25 M, measured. ``madvise(MADV_DONTNEED)`` does the expensive part (returning the
    pages) from a ctypes call, which releases the GIL; the unmap left to ``free()`` is then
    cheap. The arrays' contents are lost at once: only for arrays no one reads again.
    """
    _work_queue().put([a for a in arrays if a.flags.c_contiguous])


def wait_freed(timeout: float = 60.0) -> bool:
    """Wait until the arrays handed to :func:`free_later` so far are freed (tests)."""
    done = threading.Event()
    _work_queue().put(done)
    return done.wait(timeout)


class Column:
    """A ``(capacity, *row)`` array of ``dtype``, zero-filled, that :meth:`reserve` grows.
    Read and write it through :attr:`array`; take the attribute again after a reserve."""

    def __init__(self, dtype: type | np.dtype, row: tuple[int, ...] = (), capacity: int = 1024):
        self.dtype = np.dtype(dtype)
        self.row = row
        self._row_bytes = self.dtype.itemsize * int(np.prod(row, dtype=np.int64))
        self._fd: int | None = None
        self._generation = _generation
        if hasattr(os, "memfd_create"):
            try:
                self._fd = os.memfd_create("nearduppipe", os.MFD_CLOEXEC)
            except OSError:  # no memfd (old kernel, seccomp): copy on growth
                self._fd = None
            else:
                weakref.finalize(self, os.close, self._fd)
        self.array = self._allocate(max(1, capacity), None)

    def _allocate(self, capacity: int, old: np.ndarray | None) -> np.ndarray:
        if self._fd is None:
            arr = np.zeros((capacity, *self.row), dtype=self.dtype)
            if old is not None:
                arr[: len(old)] = old
            return arr
        size = capacity * self._row_bytes
        os.ftruncate(self._fd, size)  # new pages read as zeros
        mapping = mmap.mmap(self._fd, size)
        return np.frombuffer(mapping, dtype=self.dtype).reshape((capacity, *self.row))

    def release(self, view: np.ndarray) -> None:
        """Hand back ``view``, an array of an earlier mapping that a merge read through until
        it finished (:meth:`reserve` gave that mapping's pages back already, and the merge
        faulted them in again). Whoever drops the last reference unmaps those pages: a touched
        512 MB mapping stalled the other threads 18-39 ms (Python 3.10 and 3.13; 3-5 ms after
        an ``madvise``), and the crawl's thread was that caller, up to 19 ms of CPU per merge
        swapped in at 10-30 M ids (measured). The memory file keeps the data: a view still in
        use faults it in again."""
        if self._fd is not None and view is not self.array:
            free_later([view])

    def owned(self, rows: int) -> Column:
        """This column, or in a process forked since it was made a new one holding a copy of
        its first ``rows`` rows (what a forked child writes to: see :func:`fork_generation`)."""
        if self._generation == _generation or self._fd is None:  # (no memfd: private memory)
            return self
        out = Column(self.dtype, self.row, len(self.array))
        out.array[:rows] = self.array[:rows]
        return out

    def reserve(self, need: int) -> np.ndarray:
        """Make room for ``need`` rows (capacity grows by half at least); returns the array."""
        if need > len(self.array):
            cap = max(need, len(self.array) + len(self.array) // 2)
            old = self.array
            self.array = self._allocate(cap, old)
            if self._fd is not None:
                # unmapping the old view (page tables of hundreds of MB) is left to a worker
                # thread, outside the GIL. A shared mapping of the memory file: its pages stay
                # in the file, and a view handed out earlier faults them back in.
                free_later([old])
        return self.array

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)
