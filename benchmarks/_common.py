"""Shared helpers for the benchmark scripts (not a test suite: run them by hand)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def timed(fn: Callable[[], Any], repeat: int = 5) -> float:
    """Median wall time of ``fn`` in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def random_fps(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, np.iinfo(np.uint64).max, n, dtype=np.uint64, endpoint=True)


def flip(fp: int, n: int, rng: np.random.Generator) -> int:
    for b in rng.choice(64, size=n, replace=False).tolist():
        fp ^= 1 << b
    return fp


def per_call_times(fn: Callable[[Any], Any], args: list[Any]) -> list[float]:
    """Wall time of ``fn(a)`` for each ``a``, in seconds."""
    times = []
    for a in args:
        t0 = time.perf_counter()
        fn(a)
        times.append(time.perf_counter() - t0)
    return times
