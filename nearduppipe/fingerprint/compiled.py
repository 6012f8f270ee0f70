"""The SimHash reduction compiled by numba: the weighted bit sums of a page's feature matrix.

A page has ~500 features of 576 bits (the 64-bit and the wide fingerprint). As numpy calls (sort
by weight, every bit unpacked to a byte, blocks of one weight added, a matrix product) that
took ~0.17 ms of temporary arrays per page; as one loop over the packed words it is ~0.04 ms
(benchmarks/fingerprint_cost.py, "sums").
The sums are exact integers either way (int64 below 2**53, see ``simhash._fixed_point``), so
the bits are the same (tests/fingerprint/test_fingerprint_identity.py and
tests/fingerprint/test_simhash.py pin them).

numba is already the index's compiler (``index/compiled.py``). This module is imported on the
first fingerprint, not with the package (importing numba costs ~0.5 s), and its compiled code
is cached beside this file (``cache=True``). ``simhash.warm`` loads it on a thread of its own
(~1 s with numba's import; compiling it once, 2-3 s, when there is no cache: see
``benchmarks/fingerprint_cost.py --first-call``); pages are reduced by numpy meanwhile, so no
page waits for it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["sign_words", "warm"]


@njit(cache=True, nogil=True)
def sign_words(words: np.ndarray, w: np.ndarray) -> np.ndarray:  # pragma: no cover (compiled)
    """The SimHash of the (n, m) uint64 feature words ``words`` weighted by the int64 ``w``, as
    m uint64 words: bit ``b`` of word ``k`` is set when ``sum_i w_i * (2 * bit_b(words[i, k])
    - 1) > 0``."""
    n, m = words.shape
    sums = np.zeros(m * 64, dtype=np.int64)  # sum_i w_i * bit, for every bit
    total = np.int64(0)
    for i in range(n):
        wi = w[i]
        total += wi
        for k in range(m):
            x = words[i, k]
            base = k * 64
            for b in range(64):  # (vectorised by LLVM: no branch, a mask per bit)
                sums[base + b] += wi & -np.int64((x >> np.uint64(b)) & np.uint64(1))
    out = np.zeros(m, dtype=np.uint64)
    for j in range(m * 64):
        if 2 * sums[j] - total > 0:
            out[j // 64] |= np.uint64(1) << np.uint64(j % 64)
    return out


def warm() -> None:
    """Compile (or load from the disk cache) :func:`sign_words` for the arrays fingerprinting
    passes: feature rows read from cached bytes (read-only) and arrays built on the spot."""
    words = np.arange(18, dtype=np.uint64).reshape(2, 9)
    w = np.ones(2, dtype=np.int64)
    sign_words(words, w)
    frozen = np.frombuffer(words.tobytes(), dtype=np.uint64).reshape(2, 9)
    sign_words(frozen, w)
