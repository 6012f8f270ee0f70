"""Growable arrays whose growth never copies what they hold.

The index and the stores keep one row per id (fingerprint, live flag, wide fingerprint, time).
Growing a numpy array copies it: at 30 M ids the 512-bit column alone is 1.9 GB, a pause of
most of a second on the crawl's thread. On Linux a column lives in an anonymous memory file
(``memfd_create``) instead: growing it is ``ftruncate`` and a new, larger mapping of the same
pages, so nothing is copied and views handed out earlier stay valid (they keep the old mapping
alive). Elsewhere growth falls back to a doubling copy.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref

import numpy as np

__all__ = ["Column"]


class Column:
    """A ``(capacity, *row)`` array of ``dtype``, zero-filled, that :meth:`reserve` grows.
    Read and write it through :attr:`array`; take the attribute again after a reserve."""

    def __init__(self, dtype: type | np.dtype, row: tuple[int, ...] = (), capacity: int = 1024):
        self.dtype = np.dtype(dtype)
        self.row = row
        self._row_bytes = self.dtype.itemsize * int(np.prod(row, dtype=np.int64))
        self._fd: int | None = None
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

    def reserve(self, need: int) -> np.ndarray:
        """Make room for ``need`` rows (capacity grows by half at least); returns the array."""
        if need > len(self.array):
            cap = max(need, len(self.array) + len(self.array) // 2)
            old = [self.array]
            self.array = self._allocate(cap, self.array)
            # unmapping the old view (page tables of hundreds of MB) is left to a worker
            # thread, so the caller does not wait for it
            threading.Thread(target=old.clear, name="neardup-unmap", daemon=True).start()
        return self.array

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)
