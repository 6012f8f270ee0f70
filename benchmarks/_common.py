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


def skewed_fps(rng: np.random.Generator, n: int) -> np.ndarray:
    """Fingerprints whose bits are each set with their own probability in 0.15-0.85: about 7x
    the bucket load of uniform ones, as text-derived fingerprints show."""
    p = rng.uniform(0.15, 0.85, 64)
    out = np.zeros(n, dtype=np.uint64)
    for b in range(64):
        out |= (rng.random(n) < p[b]).astype(np.uint64) << np.uint64(b)
    return out


def text_fps(
    rng: np.random.Generator, n: int, vocabulary: int = 50_000, words: int = 200
) -> np.ndarray:
    """64-bit SimHashes of synthetic pages: ``words`` tokens drawn from a Zipf-distributed
    vocabulary (exponent 1.1, as word frequencies in real text), each word's bits from xxh3 of
    the word as the project hashes features, each occurrence weighted by the word's inverse
    document frequency ``-log p``. Frequent words are shared by most pages, which clusters the
    fingerprints the way real text does."""
    import xxhash

    hashes = np.array(
        [xxhash.xxh3_64_intdigest(f"w{i}".encode()) for i in range(vocabulary)], dtype=np.uint64
    )
    signs = ((hashes[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).astype(np.int8)
    signs = signs * 2 - 1  # +1 where the bit is set, -1 where not, then times the weight
    weights = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    p = weights / weights.sum()
    cdf = np.cumsum(p)
    signs = (signs * np.round(-np.log(p) * 8)[:, None]).astype(np.int32)
    return _text_sums(signs, cdf, n, words, int(rng.integers(1 << 62)))


def _text_sums(signs: np.ndarray, cdf: np.ndarray, n: int, words: int, seed: int) -> np.ndarray:
    from numba import njit

    @njit(cache=True)  # type: ignore[misc]
    def run(signs: np.ndarray, cdf: np.ndarray, n: int, words: int, seed: int) -> np.ndarray:
        np.random.seed(seed)
        out = np.zeros(n, dtype=np.uint64)
        sums = np.zeros(64, dtype=np.int64)
        for d in range(n):
            sums[:] = 0
            for _ in range(words):
                w = min(np.searchsorted(cdf, np.random.random()), len(cdf) - 1)
                sums += signs[w]
            fp = np.uint64(0)
            for b in range(64):
                if sums[b] > 0:
                    fp |= np.uint64(1) << np.uint64(b)
            out[d] = fp
        return out

    return run(signs, cdf, n, words, seed)
