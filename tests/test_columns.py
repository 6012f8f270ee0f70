"""Columns grow without losing rows, and views taken before a growth stay valid."""

from __future__ import annotations

import numpy as np

from nearduppipe._columns import Column


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
