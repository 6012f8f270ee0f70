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
import mmap
from collections.abc import Callable

import numpy as np

from ...index.columns import Column

__all__ = ["KeyFilter", "key_hash", "key_hashes"]

_BITS_PER_KEY = 16  # two probes: about 1.4 % false positives when full
_MIN_BITS = 1 << 16
_SPAN = 1 << 26  # bits built at once when the filter is rebuilt (a 64 MB bool array)
_ONE = np.uint8(1)
_ZERO = np.uint8(0)
_STEP = 4096  # ids filed into a larger filter per add (~0.1 ms), while it is being filled
# bytes of a larger filter whose pages are mapped per add before ids are filed in it
_TOUCH = 1 << 20
_PAGE = mmap.PAGESIZE


def key_hash(key: str) -> int:
    """A stable 64-bit hash of a key (the same in every process, unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


def key_hashes(keys: list[str]) -> np.ndarray:
    return np.fromiter((key_hash(k) for k in keys), dtype=np.uint64, count=len(keys))


class KeyFilter:
    """The filter, and per id its key's hash.

    When it fills up it is rebuilt twice as large from the hashes, and a rebuild at once
    froze the check that filled it (275 ms at 2**20 keys, doubling with every rebuild; issue
    33). So the larger filter is filled in steps of ``step`` ids, one step per add, while the
    full one keeps answering (it holds every key; only its false positives rise, and those
    cost a sqlite lookup, never a wrong answer). Keys added meanwhile go into both. The hashes
    live in a :class:`~nearduppipe.index.columns.Column`, which grows without copying.

    The larger filter is an anonymous memory map, not a ``bytearray``: a bytearray is zeroed
    when made, all at once (19 ms of CPU for the 32 MB filter made at 4.2 M keys, 39 ms for
    64 MB, measured; 128 MB at 16.8 M keys). A map's pages are zero until written, and are
    mapped :data:`_TOUCH` bytes per add before the first id is filed, so no add faults in more
    than 256 pages."""

    def __init__(self, step: int | None = None) -> None:
        self.step = _STEP if step is None else step
        if self.step < 1:
            raise ValueError("step must be positive")
        self._column = Column(np.uint64)
        self.hashes = self._column.array  # per id (take it again after a reserve)
        # a bytearray or (once grown) a map: indexing either costs ~30 ns
        self._bits: bytearray | mmap.mmap = bytearray(_MIN_BITS // 8)
        self._mask = _MIN_BITS - 1
        self._count = 0  # keys set in the filter since it was built
        # the larger filter being filled: its bits, mask and keys set; ids below ``_done``
        # are in it, and ids from ``_end`` on were added to it directly
        self._next: tuple[mmap.mmap, int] | None = None
        self._next_count = self._done = self._end = self._touched = 0

    def load(self, hashes: np.ndarray, alive: np.ndarray, saved: bytes | None = None) -> None:
        """Every id's key hash at open (``alive``: which ids hold a key); ``saved``: the bits
        of :meth:`saved` for these keys, used as they are if their size is right."""
        self.hashes = self._column.reserve(len(hashes))
        self.hashes[: len(hashes)] = hashes
        self._next = None
        live = int(np.count_nonzero(alive))
        m = len(saved) * 8 if saved is not None else 0
        if m >= _MIN_BITS and m & (m - 1) == 0 and live * _BITS_PER_KEY <= m:
            self._bits = bytearray(saved)  # type: ignore[arg-type]
            self._mask = m - 1
            self._count = live
        else:
            self._rebuild(alive)

    def saved(self) -> bytes:
        if self._next is not None:  # (at close: finish the larger filter, then save that)
            self._fill(self._end, lambda: np.ones(self._end, dtype=bool))
        return bytes(self._bits)

    @staticmethod
    def _size(keys: int) -> int:
        m = _MIN_BITS
        while m < 2 * _BITS_PER_KEY * max(keys, 1):  # room to double before the next
            m *= 2
        return m

    def _rebuild(self, alive: np.ndarray) -> None:
        """Build the filter at once (at open)."""
        live = self.hashes[: len(alive)][alive]
        m = self._size(len(live))
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
        for only while a larger filter is being filled; id ``i`` is live in them)."""
        if i >= len(self.hashes):
            self.hashes = self._column.reserve(i + 1)
        self.hashes[i] = h
        self._count += 1
        bits, mask = self._bits, self._mask
        a, b = h & mask, (h >> 32) & mask
        bits[a >> 3] |= 1 << (a & 7)
        bits[b >> 3] |= 1 << (b & 7)
        if self._next is None:
            if self._count * _BITS_PER_KEY <= self._mask + 1:
                return
            m = self._size(self._count)
            self._next = (mmap.mmap(-1, m // 8), m - 1)  # (zero pages, mapped when written)
            self._next_count, self._done, self._end, self._touched = 0, 0, i, 0
        bits, mask = self._next
        a, b = h & mask, (h >> 32) & mask
        bits[a >> 3] |= 1 << (a & 7)
        bits[b >> 3] |= 1 << (b & 7)
        self._next_count += 1
        if self._touched < len(bits):  # map a slice of its pages first: a write per page
            hi = min(self._touched + _TOUCH, len(bits))  # (an or: keeps the bits added since)
            np.frombuffer(bits, dtype=np.uint8)[self._touched : hi : _PAGE] |= _ZERO
            self._touched = hi
            return
        self._fill(min(self._done + self.step, self._end), alive)

    def _fill(self, hi: int, alive: Callable[[], np.ndarray]) -> None:
        """File the live ids ``_done .. hi - 1`` in the larger filter; swap it in when every
        id below ``_end`` is."""
        assert self._next is not None
        store, m = self._next
        lo = self._done
        if hi > lo:
            live = self.hashes[lo:hi][np.asarray(alive()[lo:hi], dtype=bool)]
            mask = np.uint64(m)
            pos = np.concatenate((live & mask, (live >> np.uint64(32)) & mask))
            bits = np.frombuffer(store, dtype=np.uint8)
            np.bitwise_or.at(
                bits, pos >> np.uint64(3), _ONE << (pos & np.uint64(7)).astype(np.uint8)
            )
            self._next_count += len(live)
            self._done = hi
        if self._done >= self._end:
            self._bits, self._mask = store, m
            self._count, self._next = self._next_count, None
