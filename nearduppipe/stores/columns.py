"""A store's entries as columns (:meth:`~.base.Store.columns`): what a batch joins against
(``dedup --against``), without a round trip or a decoded record per entry where the backend
holds arrays."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from ..index.words import WIDE_WORDS, wide_words

__all__ = ["Columns", "columns_of"]


class Columns(NamedTuple):
    """Every live entry of a store at once, as the arrays a join takes (row ``r`` of each):
    64-bit fingerprints, 512-bit words (zeros where none), has-wide flags and times, all as
    stored (masked by their scope); ``keys(rows)`` reads the keys of some rows only (most
    stores read a key from disk or a server: a join names only the rows it matched)."""

    fp: np.ndarray  # uint64
    wide: np.ndarray  # uint64, (n, 8)
    has_wide: np.ndarray  # bool
    stored_at: np.ndarray  # float64
    keys: Callable[[np.ndarray], list[str]]


def columns_of(entries: Iterable[Any]) -> Columns:
    """Columns of ``entries`` (:class:`~.base.Entry` objects), read once."""
    keys: list[str] = []
    fps, wides, has, times = [], [], [], []
    for e in entries:
        keys.append(e.key)
        fps.append(e.fingerprint)
        wides.append(wide_words(e.wide))
        has.append(e.wide is not None)
        times.append(e.stored_at)
    return Columns(
        np.array(fps, dtype=np.uint64),
        np.stack(wides) if keys else np.zeros((0, WIDE_WORDS), dtype=np.uint64),
        np.array(has, dtype=bool),
        np.array(times, dtype=np.float64),
        lambda rows: [keys[int(r)] for r in rows],
    )
