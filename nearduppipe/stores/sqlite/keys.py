"""Which page keys a sqlite store may hold, answered in memory.

Why: every check asks "is this key stored?" and most keys of a crawl are new. Asking sqlite
costs a query on a read connection whose page cache every commit invalidates (tens of µs, the
largest part of the store's own cost). A Bloom filter over 64-bit hashes of the keys answers
"certainly not" in about a µs; only a "maybe" (stored keys, and about 1 % of the others) goes to
sqlite. Per id the store keeps the key's hash (8 bytes), so the filter can be rebuilt larger as
the store grows, and saved with the index snapshot.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

__all__ = ["KeyFilter", "key_hash", "key_hashes"]

_BITS_PER_KEY = 16  # two probes: about 1.4 % false positives when full
_MIN_BITS = 1 << 16
_SPAN = 1 << 26  # bits built at once when the filter is rebuilt (a 64 MB bool array)


def key_hash(key: str) -> int:
    """A stable 64-bit hash of a key (the same in every process, unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


def key_hashes(keys: list[str]) -> np.ndarray:
    return np.fromiter((key_hash(k) for k in keys), dtype=np.uint64, count=len(keys))


class KeyFilter:
    def __init__(self) -> None:
        self.hashes = np.zeros(1024, dtype=np.uint64)  # per id
        self._bits = bytearray(_MIN_BITS // 8)  # a bytearray: indexing it costs ~30 ns
        self._mask = _MIN_BITS - 1
        self._count = 0  # keys set in the filter since it was built

    def load(self, hashes: np.ndarray, alive: np.ndarray, saved: bytes | None = None) -> None:
        """Every id's key hash at open (``alive``: which ids hold a key); ``saved``: the bits
        of :meth:`saved` for these keys, used as they are if their size is right."""
        self.hashes = np.array(hashes, dtype=np.uint64)
        live = int(np.count_nonzero(alive))
        m = len(saved) * 8 if saved is not None else 0
        if m >= _MIN_BITS and m & (m - 1) == 0 and live * _BITS_PER_KEY <= m:
            self._bits = bytearray(saved)  # type: ignore[arg-type]
            self._mask = m - 1
            self._count = live
        else:
            self._rebuild(alive)

    def saved(self) -> bytes:
        return bytes(self._bits)

    def _rebuild(self, alive: np.ndarray) -> None:
        live = self.hashes[: len(alive)][alive]
        m = _MIN_BITS
        while m < 2 * _BITS_PER_KEY * max(len(live), 1):  # room to double before the next
            m *= 2
        self._mask = m - 1
        store = bytearray(m // 8)
        bits = np.frombuffer(store, dtype=np.uint8)  # a writable view: filled vectorised
        mask = np.uint64(self._mask)
        probes = (live & mask, (live >> np.uint64(32)) & mask)
        span = min(m, _SPAN)
        flags = np.zeros(span, dtype=bool)
        for lo in range(0, m, span):  # a bool per bit for one span at a time, then packed
            flags[:] = False
            for pos in probes:
                flags[(pos[(pos >= lo) & (pos < lo + span)] - np.uint64(lo)).astype(np.int64)] = (
                    True
                )
            bits[lo // 8 : (lo + span) // 8] = np.packbits(flags, bitorder="little")
        self._bits = store
        self._count = len(live)

    def may_hold(self, h: int) -> bool:
        bits, mask = self._bits, self._mask
        a, b = h & mask, (h >> 32) & mask
        return bool(bits[a >> 3] >> (a & 7) & 1 and bits[b >> 3] >> (b & 7) & 1)

    def add(self, i: int, h: int, alive: Callable[[], np.ndarray]) -> None:
        """Id ``i`` now holds the key of hash ``h`` (``alive``: the index's live flags, asked
        for only when the filter is rebuilt larger)."""
        if i >= len(self.hashes):
            grown = np.zeros(max(i + 1, len(self.hashes) * 3 // 2), dtype=np.uint64)
            grown[: len(self.hashes)] = self.hashes
            self.hashes = grown
        self.hashes[i] = h
        self._count += 1
        if self._count * _BITS_PER_KEY > self._mask + 1:
            self._rebuild(np.asarray(alive(), dtype=bool))
            return
        bits, mask = self._bits, self._mask
        a, b = h & mask, (h >> 32) & mask
        bits[a >> 3] |= 1 << (a & 7)
        bits[b >> 3] |= 1 << (b & 7)
