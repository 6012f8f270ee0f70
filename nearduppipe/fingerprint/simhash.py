"""SimHash (Charikar 2002) over weighted features, as used for web crawling by Manku et al. 2007.

Each feature is hashed to ``bits`` bits; the document's sum vector adds ``+w`` at every 1-bit and
``-w`` at every 0-bit of each feature's hash; the fingerprint keeps the sign (> 0 → 1). The hash
bits of a feature are a random ±1 vector, so the sums are ``bits`` random-hyperplane projections
of the sparse feature vector: the Hamming distance of two fingerprints estimates the angle
between the documents' vectors.

Bit ``j`` of the result (value ``1 << j``) comes from bit ``j`` of every feature hash, so a sum
vector written most-significant bit first reads like the fingerprint in binary.
"""

from __future__ import annotations

import contextlib
import operator
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from itertools import compress, repeat
from typing import Any

import numpy as np
import xxhash

from ..errors import NearDupError
from .features import _SUBLINEAR, DEFAULT_FEATURES, FeatureConfig, features, term_counts, weigh
from .rule import WIDE_BITS, Fingerprints

__all__ = [
    "EmptyFeaturesError",
    "fingerprint",
    "fingerprints",
    "hamming",
    "simhash",
    "simhash_pair",
    "xxh3_64",
]

HashFunc = Callable[[Any], int]
Features = Mapping[Any, float] | Iterable[tuple[Any, float]]

# Weights are summed as exact integers (fixed point, 1/65536 resolution) so that the result does
# not depend on summation order: identical on every process, numpy and platform. Integer-valued
# float64 sums below 2**53 are exact too, so the sums run through BLAS in float64.
_SCALE_BITS = 16
_MAX_SUM_BITS = 52
# splitmix64 constants (Steele et al. 2014): expand one 64-bit feature hash into the independent
# 64-bit words of the wide fingerprint. The words are a bijective mix of the hash with a per-word
# increment, so they are as random as the hash and independent of the 64-bit fingerprint's bits.
_U64 = np.uint64
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1


class EmptyFeaturesError(NearDupError, ValueError):
    """The input has no feature to fingerprint: its fingerprint would collide with every other
    empty input, so callers must skip it rather than store one."""


def xxh3_64(feature: Any) -> int:
    """Default feature hash: xxh3_64 of the feature's UTF-8 text (stable across processes,
    unlike Python's ``hash()``, which is salted per process)."""
    data = feature.encode("utf-8") if isinstance(feature, str) else str(feature).encode("utf-8")
    return xxhash.xxh3_64_intdigest(data)


def _fixed_point(weights: list[float]) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(w)):
        raise ValueError("feature weights must be finite numbers")
    peak = float(np.max(np.abs(w)))
    if peak == 0.0:
        return np.zeros(len(w), dtype=np.int64)
    # Shrink the scale only when the integer sums could overflow int64.
    headroom = _MAX_SUM_BITS - int(np.ceil(np.log2(peak * len(w) + 1)))
    scale = float(2 ** min(_SCALE_BITS, headroom))
    result: np.ndarray = np.rint(w * scale)
    return result


def _hash_pairs(
    pairs: Iterable[tuple[Any, float]], h: HashFunc, bits: int
) -> tuple[list[int], list[float]]:
    mask = (1 << bits) - 1
    hashes: list[int] = []
    weights: list[float] = []
    for feature, weight in pairs:
        hashes.append(h(feature) & mask)
        weights.append(weight)
    return hashes, weights


# Rows of frequent features: a feature's xxh3_64 and its eight splitmix64 words (the wide
# fingerprint's, see _wide_words) as 72 little-endian bytes, so that a page's matrix is one join
# of cached rows and only features not seen lately are hashed. Two generations, bounded (~6 MB
# each at 2**15 rows): when the current one is full it becomes the old one and a new one
# starts; a row found in the old generation moves to the new one. So the words every page
# uses stay cached whatever the vocabulary of a long crawl, where emptying one full cache
# had every page hash its common words again after each fill. Shared by threads: a row, once
# computed, never changes.
_ROW_WORDS = 1 + WIDE_BITS // 64
_ROW_CACHE_SIZE = 1 << 15
_row_cache: dict[str, bytes] = {}
_row_cache_old: dict[str, bytes] = {}


def _feature_rows(features: Mapping[Any, float]) -> np.ndarray:
    """(n, 9) little-endian uint64 matrix: per feature the xxh3_64 of its UTF-8 text, then its
    wide words. Raises AttributeError for a feature without ``encode`` (not a ``str``)."""
    rows: list[Any] = list(map(_row_cache.get, features))
    try:
        data = b"".join(rows)
    except TypeError:  # a None: features not cached
        missing = list(compress(features, map(operator.is_, rows, repeat(None))))
        fresh = _new_rows(missing)
        rows = list(map(fresh.get, features, rows))  # a missing row from fresh, others kept
        data = b"".join(rows)
        _remember(fresh)
    matrix: np.ndarray = np.frombuffer(data, dtype="<u8").reshape(-1, _ROW_WORDS)
    return matrix


def _new_rows(missing: list[str]) -> dict[str, bytes]:
    """The rows of features not in the current generation: from the old one, or computed."""
    old = _row_cache_old
    found = {f: row for f in missing if (row := old.get(f)) is not None}
    if found:
        missing = [f for f in missing if f not in found]
    if not missing:
        return found
    digest = xxhash.xxh3_64_digest  # the canonical form: the hash, big-endian
    hashes = b"".join([digest(f.encode("utf-8")) for f in missing])
    hv = np.frombuffer(hashes, dtype=">u8").astype("<u8")
    block = np.empty((len(hv), _ROW_WORDS), dtype="<u8")
    block[:, 0] = hv
    block[:, 1:] = _wide_words(hv, _ROW_WORDS - 1)
    chunks = block.view(f"V{8 * _ROW_WORDS}").ravel().tolist()  # a bytes object per row
    fresh = dict(zip(missing, chunks, strict=True))
    fresh.update(found)
    return fresh


def _remember(fresh: dict[str, bytes]) -> None:
    global _row_cache, _row_cache_old
    if len(fresh) > _ROW_CACHE_SIZE:
        return
    if len(_row_cache) + len(fresh) > _ROW_CACHE_SIZE:
        _row_cache_old, _row_cache = _row_cache, {}
    _row_cache.update(fresh)


def _hashes_and_weights(
    features: Features, bits: int, hashfunc: HashFunc | None
) -> tuple[list[int], list[float]]:
    pairs = features.items() if isinstance(features, Mapping) else features
    return _hash_pairs(pairs, hashfunc or xxh3_64, bits)


# The reduction runs compiled (.compiled, numba) once that is loaded, and as numpy calls until
# then: both sums are exact, so the bits are the same. Loading takes ~1 s of numba's import and
# disk cache (a few seconds the first time, compiling), on a thread of its own, started by the
# first reduction or by warm(): no page waits for it, none is slowed by more than the share of
# the CPU that thread takes, and a worker starts taking pages as soon as before.
_compiled: Any = None
_loader: threading.Thread | None = None
_loader_lock = threading.Lock()


def warm(wait: bool = False) -> None:
    """Start loading the compiled reduction in the background (once per process); with
    ``wait``, return when it is loaded (or failed to load: numpy then stays in use)."""
    global _loader
    with _loader_lock:
        if _loader is None:
            _loader = threading.Thread(target=_load, name="nearduppipe-numba", daemon=True)
            # a fork while the thread imports would leave the child an import lock no thread
            # of its own holds: the next import there would hang. Finish loading first.
            os.register_at_fork(before=_finish_loading)
            _loader.start()
    if wait:
        _loader.join()


def _finish_loading() -> None:
    loader = _loader
    if loader is not None and loader is not threading.current_thread():
        loader.join()


def _load() -> None:
    global _compiled
    from . import compiled

    compiled.warm()
    _compiled = compiled


def _sign_bits(words: np.ndarray, w: np.ndarray, bits: int) -> int:
    """SimHash reduction: ``words`` is an (n, m) uint64 matrix of feature hash words; returns
    the ``bits``-bit integer whose bit j (bit ``j % 64`` of word ``j // 64``) is set when the
    weighted sum of the features' bit j is positive:
    ``sum_j = sum_i w_i * (2*b_ij - 1) = 2 * sum_i w_i * b_ij - sum(w)``. Weights are integers
    (see :func:`_fixed_point`) and every sum is below 2**53: exact, so the same as any other
    exact order of summation. One compiled loop over the packed words (:mod:`.compiled`), or
    :func:`_sign_bits_numpy` while that is loading.
    """
    kernel = _compiled
    if kernel is None:
        warm()
        return _sign_bits_numpy(words, w, bits)
    packed = kernel.sign_words(
        np.ascontiguousarray(words, dtype=np.uint64), np.ascontiguousarray(w, dtype=np.int64)
    )
    value = int.from_bytes(packed.astype("<u8", copy=False).tobytes(), "little")
    return value & ((1 << bits) - 1)


def _sign_bits_numpy(words: np.ndarray, w: np.ndarray, bits: int) -> int:
    """:func:`_sign_bits` as numpy calls (~4x slower than compiled).

    ``sum_j = 2 * sum_g W_g * c_gj - sum(w)`` where ``g`` runs over blocks of features of equal
    weight ``W_g`` and ``c_gj`` counts the features of block ``g`` with bit j set. The bits are
    unpacked one byte each and a block's bytes are added as uint64 words, eight byte-wide
    counters at a time (a block has at most 255 features, so no counter carries into the next).
    """
    n = words.shape[0]
    wi = w.astype(np.int64)
    order = np.argsort(wi, kind="stable")
    ws = wi[order]
    starts = _block_starts(np.flatnonzero(ws[1:] != ws[:-1]).tolist(), n)
    rows = np.ascontiguousarray(words[order], dtype="<u8")
    hbits = np.unpackbits(rows.view(np.uint8), axis=1, bitorder="little")
    blocks = np.add.reduceat(hbits.view(np.uint64), starts, axis=0)
    counts = blocks.view(np.uint8)[:, :bits].astype(np.int64)
    sums = 2 * (ws[starts] @ counts) - int(wi.sum())
    packed = np.packbits(sums > 0, bitorder="little")
    return int.from_bytes(packed.tobytes(), "little")


def _block_starts(changes: list[int], n: int) -> list[int]:
    """First row of each block: a new block where the weight changes (after row ``changes[k]``)
    and every 255 rows within a run of one weight."""
    starts = [0]
    for end in [*changes, n - 1]:
        end += 1
        start = starts[-1]
        while end - start > 255:
            start += 255
            starts.append(start)
        if end < n:
            starts.append(end)
    return starts


def _wide_words(hashes: np.ndarray, words: int) -> np.ndarray:
    """splitmix64 of each hash with ``words`` different increments: (n, words) uint64."""
    with np.errstate(over="ignore"):
        steps = np.arange(1, words + 1, dtype=_U64) * _U64(_GOLDEN)
        z = hashes[:, None] + steps[None, :]
        z = (z ^ (z >> _U64(30))) * _U64(_MIX1)
        z = (z ^ (z >> _U64(27))) * _U64(_MIX2)
        out: np.ndarray = z ^ (z >> _U64(31))
    return out.astype("<u8", copy=False)


def simhash(features: Features, bits: int = 64, hashfunc: HashFunc | None = None) -> int:
    """Fingerprint of weighted features: a mapping ``{feature: weight}`` or ``(feature, weight)``
    pairs. ``hashfunc`` maps a feature to an int of at least ``bits`` bits (its low ``bits`` bits
    are used); the default is :func:`xxh3_64`. Ties (a sum of exactly 0) give a 0-bit.
    """
    if not 1 <= bits <= 64:
        raise ValueError(f"bits must be between 1 and 64, not {bits!r}")
    if hashfunc is None and isinstance(features, Mapping) and bits == 64 and features:
        try:  # the default pipeline: cached rows, of which the first word is the hash
            hv = np.ascontiguousarray(_feature_rows(features)[:, :1])
        except AttributeError:  # a non-str feature: take the general path
            pass
        else:
            return _sign_bits(hv, _fixed_point(list(features.values())), 64)
    hashes, weights = _hashes_and_weights(features, bits, hashfunc)
    if not hashes:
        raise EmptyFeaturesError("no features to fingerprint")
    hv = np.array(hashes, dtype="<u8").reshape(-1, 1)
    return _sign_bits(hv, _fixed_point(weights), bits)


def simhash_pair(features: Features, wide_bits: int = WIDE_BITS) -> Fingerprints:
    """The 64-bit SimHash and the wide SimHash of the same features in one pass: each feature is
    hashed once (xxh3_64); the wide fingerprint's words are splitmix64 expansions of that hash,
    so it costs one more matrix product, not ``wide_bits / 64`` more string hashes."""
    if wide_bits % 64 or not 64 <= wide_bits <= 1024:
        raise ValueError(f"wide_bits must be a multiple of 64 up to 1024, not {wide_bits!r}")
    words: np.ndarray | None = None
    if isinstance(features, Mapping) and features and wide_bits == 64 * (_ROW_WORDS - 1):
        with contextlib.suppress(AttributeError):  # a non-str feature: the general path
            words, weights = _feature_rows(features), list(features.values())
    if words is None:
        hashes, weights = _hashes_and_weights(features, 64, None)
        if not hashes:
            raise EmptyFeaturesError("no features to fingerprint")
        hv = np.array(hashes, dtype="<u8")
        words = np.empty((len(hv), 1 + wide_bits // 64), dtype="<u8")
        words[:, 0] = hv
        words[:, 1:] = _wide_words(hv, wide_bits // 64)
    both = _sign_bits(words, _fixed_point(weights), 64 + wide_bits)  # one reduction for both
    return Fingerprints(both & _MASK64, both >> 64)


# The fixed-point weight of a term frequency under sublinear tf (``1 + log tf``, see
# features._SUBLINEAR) at the full scale: rint(weight * 2**16), as _fixed_point computes it.
_FIXED_SUBLINEAR = np.rint(np.array(_SUBLINEAR) * float(2**_SCALE_BITS)).astype(np.int64)


def _fixed_from_counts(counts: Mapping[str, int]) -> np.ndarray | None:
    """``_fixed_point`` of the sublinear tf weights of ``counts`` (the same integers), looked up
    by term frequency instead of weighed one by one; None for a frequency beyond the table.

    ``_fixed_point`` keeps the full scale (2**16) while ``peak * n + 1 <= 2**36``; the peak
    weight here is below 1 + log 4096 < 16, so any ``n`` below 2**32 keeps it."""
    if len(counts) >= 1 << 32:
        return None
    tf = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    try:
        weights: np.ndarray = _FIXED_SUBLINEAR[tf]
    except IndexError:  # a term frequency of 4096 or more
        return None
    return weights


def fingerprints(text: str, config: FeatureConfig = DEFAULT_FEATURES) -> Fingerprints:
    """Both fingerprints of a text through the default pipeline.

    With sublinear tf weights and every feature kept (the default), a feature's weight depends
    only on its term frequency: the fixed-point weights are looked up from the counts, skipping
    the float weights :func:`features` returns (the same bits: tests pin them)."""
    if config.weighting == "tf" and config.sublinear_tf and config.top_k is None:
        counts = term_counts(text, config)
        if not counts:
            raise EmptyFeaturesError("text has no usable token")
        fixed = _fixed_from_counts(counts)
        if fixed is not None:
            both = _sign_bits(_feature_rows(counts), fixed, 64 + WIDE_BITS)
            return Fingerprints(both & _MASK64, both >> 64)
        feats = weigh(counts, config)
    else:
        feats = features(text, config)
    if not feats:
        raise EmptyFeaturesError("text has no usable token")
    return simhash_pair(feats)


def fingerprint(text: str, config: FeatureConfig = DEFAULT_FEATURES) -> int:
    """64-bit SimHash of a text through the default pipeline (tokenize, weight, hash, reduce).

    Raises :class:`EmptyFeaturesError` when the text has no usable token. The low word of
    :func:`fingerprints` (the same sums of the same hashes): the wide words cost less than
    weighing the features one by one, which that path skips.
    """
    return fingerprints(text, config).fp


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints."""
    if a < 0 or b < 0:
        raise ValueError("fingerprints are non-negative integers")
    return (a ^ b).bit_count()
