"""Per-key maps that grow without a pause: what the memory store keeps beside its index.

A Python dict grows by building a table three times its size and re-inserting every entry,
on the thread that inserts: about 40 ns an entry, so a 10 M-key dict froze its caller for
~0.5 s and the memory store, which kept four of them (key → id, and per id the key, job and
text), for 1.1 s near 2.8 M entries (measured, issue 33). Here the key → id map is many small
dicts chosen by the key's hash, so no single resize holds more than a small share of the keys,
and the per-id values are fixed-size chunks indexed by id (ids count up from 0): growing one is
appending a chunk, and no entry is ever copied.

Neither is walked by the cyclic garbage collector, which matters as much: a full collection
(started by anyone's garbage, e.g. the crawler's) visits every reference held by a tracked
container. With the slots in Python lists, one at 4.8 M entries took 318 ms inside a
``check_and_add`` (growth benchmark, issue 33). The shard dicts hold only ``str`` keys and
``int`` values, so CPython leaves them untracked; the chunks are numpy object arrays, which the
collector never tracks (they hold only strings or ``None``, so no cycle can pass through them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

import numpy as np

__all__ = ["KeyMap", "Slots"]

V = TypeVar("V")

# 4096 dicts: at 10 M keys ~2,400 each (a resize ~0.1 ms), at 100 M ~24,000 (~1 ms), measured
# at ~40 ns an entry; empty, they cost ~0.3 MB and ~0.1 ms to make.
SHARD_BITS = 12
_SHARD_SHIFT = 40  # shard by hash bits 40.. (a dict's own slots use the low bits)


class KeyMap:
    """``str`` → ``int``, as a dict, split into ``2**shard_bits`` dicts by the key's hash
    (values must be ``int`` so the dicts stay untracked by the garbage collector)."""

    __slots__ = ("_mask", "_shards")

    def __init__(self, shard_bits: int = SHARD_BITS) -> None:
        if not 0 <= shard_bits <= 20:
            raise ValueError("shard_bits must be between 0 and 20")
        self._mask = (1 << shard_bits) - 1
        self._shards: list[dict[str, int]] = [{} for _ in range(1 << shard_bits)]

    def _shard(self, key: str) -> dict[str, int]:
        return self._shards[(hash(key) >> _SHARD_SHIFT) & self._mask]

    def get(self, key: str) -> int | None:
        return self._shards[(hash(key) >> _SHARD_SHIFT) & self._mask].get(key)

    def __setitem__(self, key: str, value: int) -> None:
        self._shards[(hash(key) >> _SHARD_SHIFT) & self._mask][key] = value

    def __delitem__(self, key: str) -> None:
        del self._shard(key)[key]

    def __len__(self) -> int:
        return sum(len(s) for s in self._shards)

    def items(self) -> Iterator[tuple[str, int]]:
        for shard in self._shards:
            yield from shard.items()


class Slots(Generic[V]):
    """A growable list of values indexed by id (``None`` where unset), in chunks of
    ``2**chunk_bits`` slots: growth appends a chunk, nothing already held is copied. The
    chunks are numpy object arrays, untracked by the garbage collector, so values must not be
    containers that could be part of a reference cycle (``str`` and ``None`` are what the
    store keeps). Indexing one costs ~50 ns against ~20 ns for a list, measured."""

    __slots__ = ("_bits", "_chunks", "_low")

    def __init__(self, chunk_bits: int = 14) -> None:
        if not 0 <= chunk_bits <= 24:
            raise ValueError("chunk_bits must be between 0 and 24")
        self._bits = chunk_bits
        self._low = (1 << chunk_bits) - 1
        self._chunks: list[np.ndarray] = []

    def __getitem__(self, i: int) -> V | None:
        value: V | None = self._chunks[i >> self._bits][i & self._low]
        return value

    def __setitem__(self, i: int, value: V | None) -> None:
        c = i >> self._bits
        chunks = self._chunks
        while c >= len(chunks):
            chunks.append(np.full(self._low + 1, None, dtype=object))
        chunks[c][i & self._low] = value

    def __len__(self) -> int:
        """Slots allocated (a multiple of the chunk size)."""
        return len(self._chunks) << self._bits
