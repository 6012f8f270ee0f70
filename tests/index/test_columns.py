"""Columns grow without losing rows, and views taken before a growth stay valid."""

from __future__ import annotations

import mmap
import os
import sys

import numpy as np
import pytest

from nearduppipe.index.columns import Column, free_later, wait_freed


def test_growth_keeps_rows_and_earlier_views() -> None:
    col = Column(np.uint64, (8,), capacity=4)
    arr = col.array
    arr[3] = np.arange(8, dtype=np.uint64)
    view = arr[:4]
    for need in (5, 100, 10_000, 1_000_000):
        arr = col.reserve(need)
        assert len(arr) >= need
        assert arr[3].tolist() == list(range(8))
        assert not arr[4:need].any()  # new rows read as zeros
    arr[999_999, 7] = 5
    assert view[3].tolist() == list(range(8))  # the view from before still reads its rows
    assert col.reserve(10) is arr  # no growth needed: the same array


def test_bool_and_float_columns() -> None:
    flags, times = Column(np.bool_), Column(np.float64)
    flags.array[0], times.array[0] = True, 1.5
    f, t = flags.reserve(3000), times.reserve(3000)
    assert bool(f[0]) and t[0] == 1.5 and not f[1:].any() and not t[1:].any()
    assert f.flags.writeable and t.flags.writeable


def test_views_stay_valid_after_the_old_mapping_is_released() -> None:
    col = Column(np.uint64, capacity=1 << 18)  # 2 MB: its old mapping is madvised away
    arr = col.array
    arr[:] = np.arange(1 << 18, dtype=np.uint64)
    view = arr[10:]
    new = col.reserve(1 << 20)
    del arr
    assert wait_freed()
    assert view[:5].tolist() == [10, 11, 12, 13, 14]  # read back from the memory file
    new[20] = 7
    assert view[10] == 7  # the same pages
    assert int(new[(1 << 18) - 1]) == (1 << 18) - 1


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * mmap.PAGESIZE


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_free_later_returns_the_pages() -> None:
    arr = np.ones(64 << 20, dtype=np.uint8)  # 64 MB, touched
    before = _rss()
    free_later([arr])
    del arr
    assert wait_freed()
    assert _rss() < before - (48 << 20)


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memory files (Linux)")
def test_release_hands_back_an_earlier_mapping_that_was_read_again() -> None:
    """A merge reads through the mapping it was given after a growth gave that mapping's pages
    back: release() gives them back again, off the caller's thread; the current mapping is
    never given back, and both keep their data (the memory file's)."""
    rows = 8 << 20  # 64 MB
    col = Column(np.uint64, capacity=rows)
    old = col.array
    old[:] = np.arange(rows, dtype=np.uint64)
    total = rows * (rows - 1) // 2
    col.reserve(rows + 1)
    assert wait_freed()
    assert int(old.sum()) == total  # (the merge's read: the old mapping's pages, mapped again)
    assert int(col.array[:rows].sum()) == total  # the current mapping's, mapped too
    before = _rss()
    col.release(col.array)
    assert wait_freed()
    assert _rss() > before - (16 << 20)
    col.release(old)
    assert wait_freed()
    assert _rss() < before - (48 << 20)
    assert int(old[123]) == 123 and int(col.array[rows - 1]) == rows - 1
