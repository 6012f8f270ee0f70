"""Shared helpers for the benchmark scripts (not a test suite: run them by hand)."""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


class GcClock:
    """Time spent in the interpreter's garbage collector so far (``gc.callbacks``), and how
    many collections: an add or a check during which a collection ran is reported apart, as
    the pause is the interpreter's (:meth:`stop` when done)."""

    def __init__(self) -> None:
        self.ns = 0  # nanoseconds in collections
        self.count = 0
        self._t = 0
        gc.callbacks.append(self._tick)

    @property
    def total(self) -> float:
        """Seconds in collections."""
        return self.ns / 1e9

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t = time.perf_counter_ns()
        else:
            self.ns += time.perf_counter_ns() - self._t
            self.count += 1

    def stop(self) -> None:
        gc.callbacks.remove(self._tick)


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


KINDS = ("uniform", "skewed", "text")


def fingerprints(
    kind: str, rng: np.random.Generator, n: int, text_file: str | None = None, offset: int = 0
) -> np.ndarray:
    """``n`` 64-bit fingerprints of a kind: ``uniform``; ``skewed`` (:func:`skewed_fps`);
    ``text``, SimHashes of synthetic pages (:func:`text_fps`). Generating those costs ~45 s per
    million, so ``text_file`` keeps them: its ``n`` from ``offset`` on are used when it holds
    enough, else they are generated (and saved there when ``offset`` is 0). Callers that need
    stored pages and new ones from the same distribution take both from one call, or from
    disjoint offsets."""
    if kind == "uniform":
        return random_fps(rng, n)
    if kind == "skewed":
        return skewed_fps(rng, n)
    if kind != "text":
        raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    if text_file and os.path.exists(text_file):
        saved = np.load(text_file, mmap_mode="r")
        if len(saved) >= offset + n:
            return np.array(saved[offset : offset + n])
    out = text_fps(rng, n)
    if text_file and not offset:
        np.save(text_file, out)
    return out


def text_sample(text_file: str, stored: int, seed: int, n: int) -> list[int]:
    """Text-derived fingerprints for benchmarks whose pages are made in several processes:
    seed 1 gives the stored pages, the first ``n`` of ``text_file``; any other seed a sample
    of ``n`` new pages from after the first ``stored`` (same distribution, never stored)."""
    saved = np.load(text_file, mmap_mode="r")
    if seed == 1:
        return [int(x) for x in saved[:n]]
    at = np.random.default_rng(seed).choice(len(saved) - stored, n, replace=False) + stored
    return [int(x) for x in saved[np.sort(at)]]


def kind_args(ap: argparse.ArgumentParser, default: str, many: bool = False) -> None:
    """``--kind`` (or ``--kinds``, comma-separated) and ``--text-file``, as every benchmark
    that takes fingerprints reads them."""
    if many:
        ap.add_argument("--kinds", default=default, help=f"comma-separated: {', '.join(KINDS)}")
    else:
        ap.add_argument("--kind", choices=KINDS, default=default)
    ap.add_argument(
        "--text-file", default=None, help="an .npy of text-derived fingerprints, kept for reuse"
    )


def text_fps(
    rng: np.random.Generator,
    n: int,
    vocabulary: int = 50_000,
    words: int = 300,
    topics: int = 300,
) -> np.ndarray:
    """64-bit SimHashes of synthetic pages, weighted as the project weights features: ``words``
    tokens drawn from a Zipf-distributed vocabulary (exponent 1.1, as word frequencies in real
    text) and from the page's topic (one of ``topics``), the 100 most frequent dropped as stop
    words, each remaining word weighted ``1 + log tf`` with its bits from xxh3 of the word.
    Pages of a topic share words, which clusters their fingerprints as real crawls do."""
    import xxhash

    hashes = np.array(
        [xxhash.xxh3_64_intdigest(f"w{i}".encode()) for i in range(vocabulary)], dtype=np.uint64
    )
    signs = ((hashes[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).astype(np.int8)
    signs = (signs * 2 - 1).astype(np.float64)  # +1 where the bit is set, -1 where not
    weights = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    cdf = np.cumsum(weights / weights.sum())
    # topics: half of a page's words come from its topic's own Zipf list of 2,000 words, so
    # pages on one topic share vocabulary (what clusters real crawls: sections, templates)
    topic_words = rng.integers(100, vocabulary, (topics, 2_000))
    tw = 1.0 / np.arange(1, 2_001) ** 1.1
    topic_cdf = np.cumsum(tw / tw.sum())
    return _text_sums(signs, cdf, topic_words, topic_cdf, n, words, 100, int(rng.integers(1 << 62)))


def _text_sums(
    signs: np.ndarray,
    cdf: np.ndarray,
    topic_words: np.ndarray,
    topic_cdf: np.ndarray,
    n: int,
    words: int,
    stop: int,
    seed: int,
) -> np.ndarray:
    from numba import njit

    @njit(cache=True)  # type: ignore[misc]
    def run(
        signs: np.ndarray,
        cdf: np.ndarray,
        topic_words: np.ndarray,
        topic_cdf: np.ndarray,
        n: int,
        words: int,
        stop: int,
        seed: int,
    ) -> np.ndarray:
        np.random.seed(seed)
        out = np.zeros(n, dtype=np.uint64)
        sums = np.zeros(64, dtype=np.float64)
        tokens = np.empty(words, dtype=np.int64)
        for d in range(n):
            topic = np.random.randint(0, len(topic_words))
            for t in range(words):
                if t % 2:
                    r = min(np.searchsorted(topic_cdf, np.random.random()), len(topic_cdf) - 1)
                    tokens[t] = topic_words[topic, r]
                else:
                    tokens[t] = min(np.searchsorted(cdf, np.random.random()), len(cdf) - 1)
            tokens.sort()
            sums[:] = 0.0
            t = 0
            while t < words:
                u = t
                while u < words and tokens[u] == tokens[t]:
                    u += 1
                if tokens[t] >= stop:
                    sums += signs[tokens[t]] * (1.0 + np.log(u - t))
                t = u
            fp = np.uint64(0)
            for b in range(64):
                if sums[b] > 0:
                    fp |= np.uint64(1) << np.uint64(b)
            out[d] = fp
        return out

    return run(signs, cdf, topic_words, topic_cdf, n, words, stop, seed)
