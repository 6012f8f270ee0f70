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

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import xxhash

from .features import DEFAULT_FEATURES, FeatureConfig, features

__all__ = ["EmptyFeaturesError", "fingerprint", "hamming", "simhash", "xxh3_64"]

HashFunc = Callable[[Any], int]
Features = Mapping[Any, float] | Iterable[tuple[Any, float]]

# Weights are summed as exact integers (fixed point, 1/65536 resolution) so that the result does
# not depend on floating-point summation order: identical on every process, numpy and platform.
_SCALE_BITS = 16
_MAX_SUM_BITS = 62


class EmptyFeaturesError(ValueError):
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
    result: np.ndarray = np.rint(w * scale).astype(np.int64)
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


def simhash(features: Features, bits: int = 64, hashfunc: HashFunc | None = None) -> int:
    """Fingerprint of weighted features: a mapping ``{feature: weight}`` or ``(feature, weight)``
    pairs. ``hashfunc`` maps a feature to an int of at least ``bits`` bits (its low ``bits`` bits
    are used); the default is :func:`xxh3_64`. Ties (a sum of exactly 0) give a 0-bit.
    """
    if not 1 <= bits <= 64:
        raise ValueError(f"bits must be between 1 and 64, not {bits!r}")
    if hashfunc is None and isinstance(features, Mapping) and bits == 64:
        # Fast path of the default pipeline: no per-feature wrapper call, no masking.
        try:
            digest = xxhash.xxh3_64_intdigest
            hashes = [digest(f.encode("utf-8")) for f in features]
            weights = list(features.values())
        except AttributeError:  # a non-str feature: take the general path
            hashes, weights = _hash_pairs(features.items(), xxh3_64, bits)
    else:
        pairs = features.items() if isinstance(features, Mapping) else features
        hashes, weights = _hash_pairs(pairs, hashfunc or xxh3_64, bits)
    if not hashes:
        raise EmptyFeaturesError("no features to fingerprint")
    # (n, 64) matrix of hash bits, bit j in column j (little-endian bytes on every host).
    hv = np.array(hashes, dtype="<u8")
    hbits = np.unpackbits(hv.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    w = _fixed_point(weights)
    # sum_j = sum_i w_i * (2*b_ij - 1) = 2 * (w @ b)_j - sum(w)
    sums = 2 * (w @ hbits[:, :bits].astype(np.int64)) - int(w.sum())
    result = 0
    for j in np.flatnonzero(sums > 0).tolist():
        result |= 1 << j
    return result


def fingerprint(text: str, config: FeatureConfig = DEFAULT_FEATURES) -> int:
    """64-bit SimHash of a text through the default pipeline (tokenize, weight, hash, reduce).

    Raises :class:`EmptyFeaturesError` when the text has no usable token.
    """
    feats = features(text, config)
    if not feats:
        raise EmptyFeaturesError("text has no usable token")
    return simhash(feats)


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints."""
    if a < 0 or b < 0:
        raise ValueError("fingerprints are non-negative integers")
    return (a ^ b).bit_count()
