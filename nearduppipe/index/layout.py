"""Which tables an exact Hamming search keeps, and the keys they file fingerprints under.

A *layout* (blocks, and one table per block or per choice of blocks) is the whole of the
pigeonhole argument; :mod:`nearduppipe.index` holds the arrays. The Redis store and the batch
search use the same keys, so a table key is computed in one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np

__all__ = ["Layout", "Parts", "table_key", "table_keys"]

_U64 = np.uint64
Parts = tuple[tuple[int, int], ...]


def table_key(fp: int, parts: Parts) -> int:
    """A table's key of one fingerprint: its blocks ``(shift, width)`` concatenated."""
    key = 0
    for shift, width in parts:
        key = (key << width) | ((fp >> shift) & ((1 << width) - 1))
    return key


def table_keys(fps: np.ndarray, parts: Parts) -> np.ndarray:
    """:func:`table_key` of every fingerprint of a ``uint64`` array."""
    key = np.zeros(len(fps), dtype=_U64)
    for shift, width in parts:
        key = (key << _U64(width)) | ((fps >> _U64(shift)) & _U64((1 << width) - 1))
    return key


MAX_PROBE = 4  # a table probed at radius 5 over 21 bits reads 27,000 buckets per query
# tables a layout without explicit blocks may keep for one run (12 B/id each). 6 tables of
# 10-11 bits sped up no uniform query and slowed skewed ones (buckets of 10-bit keys crowd):
# 65 us against 39 median at 1 M skewed with small runs of 6 tables and of 5, measured.
MAX_TABLES = 5


def _ranges(bits: int, blocks: int) -> list[tuple[int, int]]:
    base, extra = divmod(bits, blocks)
    ranges = []
    top = bits
    for i in range(blocks):
        w = base + (1 if i < extra else 0)
        top -= w
        ranges.append((top, w))
    return ranges


@dataclass(frozen=True)
class Layout:
    """Which tables the index keeps for an exact search within ``distance`` bits.

    ``blocks=None`` lets each run of the index pick among :meth:`table_sets` (one table per
    block, probed at radii that add up to what the distance needs); :meth:`tables` and
    :attr:`probe` then describe the set of :attr:`n_blocks` blocks (3 from distance 2 on, 4
    from 15 on).
    ``blocks > distance`` gives Manku et al.'s tables: one per choice of ``blocks - distance``
    blocks, looked up exactly (``distance + 1`` blocks is the paper's pigeonhole scheme).
    ``blocks <= distance`` gives one table per block, probed at radius
    ``ceil((distance + 1) / blocks) - 1``.
    """

    distance: int = 3
    blocks: int | None = None
    bits: int = 64

    def __post_init__(self) -> None:
        if not 1 <= self.bits <= 64:
            raise ValueError(f"bits must be between 1 and 64, not {self.bits}")
        if not 0 <= self.distance < self.bits:
            raise ValueError(f"distance must be between 0 and {self.bits - 1}, not {self.distance}")
        b = self.n_blocks
        if not 1 <= b <= self.bits:
            raise ValueError(f"blocks must be between 1 and bits = {self.bits}, not {b}")
        if b > self.distance and math.comb(b, b - self.distance) > 1000:
            raise ValueError(f"{b} blocks at distance {self.distance} would need too many tables")
        if self.probe > MAX_PROBE:
            raise ValueError(
                f"{b} blocks at distance {self.distance} would probe each table at radius "
                f"{self.probe}; use more blocks"
            )

    @property
    def n_blocks(self) -> int:
        if self.blocks is not None:
            return self.blocks
        if self.distance < 2:
            return self.distance + 1
        # 3, or as many as keep each table's probe within MAX_PROBE (4 from distance 15 on:
        # the rule allows radii up to 16)
        return min(max(3, math.ceil((self.distance + 1) / (MAX_PROBE + 1))), self.bits)

    @property
    def probe(self) -> int:
        """Hamming radius at which each table's key is probed."""
        b = self.n_blocks
        if b > self.distance:
            return 0
        return math.ceil((self.distance + 1) / b) - 1

    def block_ranges(self) -> list[tuple[int, int]]:
        """(shift, width) of each block, most significant first; widths differ by at most 1."""
        return _ranges(self.bits, self.n_blocks)

    def table_sets(self) -> list[tuple[list[Parts], tuple[int, ...]]]:
        """Every way of filing fingerprints this layout allows, as (tables, the Hamming radius
        each table's key is probed at); each finds every fingerprint within ``distance``.

        An explicit ``blocks`` allows one: :meth:`tables`, each probed at :attr:`probe`.
        ``blocks=None`` allows every split into ``b <= distance + 1`` blocks (one table each)
        probed at radii ``r_t`` with ``sum(r_t + 1) = distance + 1``: two fingerprints that
        differ in more than ``r_t`` bits of every block ``t`` differ in at least
        ``sum(r_t + 1)`` bits, so within ``distance`` some block differs in at most its
        ``r_t`` (Norouzi et al.'s argument with unequal radii). The index picks one per run,
        by its size: narrow keys probed at small radii are cheaper for small runs, and 3 wide
        keys for large ones (:class:`nearduppipe.index.runs.Geometry`)."""
        if self.blocks is not None:
            tables = self.tables()
            return [(tables, (self.probe,) * len(tables))]
        sets: list[tuple[list[Parts], tuple[int, ...]]] = []
        for b in range(1, min(self.distance + 1, MAX_TABLES, self.bits) + 1):
            q, extra = divmod(self.distance + 1, b)
            # each radius + 1, added up over the tables, is distance + 1
            radii = tuple(q if i < extra else q - 1 for i in range(b))
            if max(radii) <= MAX_PROBE:
                sets.append(([(part,) for part in _ranges(self.bits, b)], radii))
        return sets

    def tables(self) -> list[tuple[tuple[int, int], ...]]:
        """Each table's key as the (shift, width) of its blocks, most significant first."""
        ranges = self.block_ranges()
        b = self.n_blocks
        keep = b - self.distance if b > self.distance else 1
        return [tuple(ranges[i] for i in combo) for combo in combinations(range(len(ranges)), keep)]
