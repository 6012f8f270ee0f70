"""The shared core's join on pandas frames: what a Spark ``mapInPandas`` and a Dask
``map_partitions`` run on each partition (pandas comes with both extras)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..fingerprint.rule import Rule
from ..index.layout import Parts
from .core import explode, partition_pairs
from .engine_local import Side

__all__ = [
    "FP_COLUMNS",
    "PAIR_COLUMNS",
    "FrameSearch",
    "against_pairs",
    "explode_frame",
    "fingerprint_frame",
    "pairs_frame",
    "shuffle_partitions",
    "wide_distances",
]

# of the shuffle: ~100 MB of frame per task (97 B a row with the 512-bit words), a few times
# that while it is joined; 2 M rows overran a 3 GiB Dask worker at 2 M fingerprints, k = 3
ROWS_PER_PARTITION = 1_000_000

WIDE_COLUMNS = [f"w{k}" for k in range(8)]
FP_COLUMNS = ["id", "fp", *WIDE_COLUMNS, "hw"]  # 64-bit values as int64 (Spark has no uint64)


PAIR_COLUMNS = ["i", "j", "d", "dw"]


def fingerprint_frame(
    fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, words: bool = True
) -> Any:
    """The join's input frame. ``words=False`` leaves the 512-bit words out, for a rule
    without the 512-bit verdict (the paper's): rows of 33 bytes instead of 97, a third of the
    shuffle; the engine then takes the pairs' wide distances from its own arrays
    (:func:`wide_distances`)."""
    pd: Any = importlib.import_module("pandas")

    data: dict[str, Any] = {"id": np.arange(len(fps), dtype=np.int64)}
    data["fp"] = np.asarray(fps, dtype=np.uint64).view(np.int64)
    for k, name in enumerate(WIDE_COLUMNS if words else []):
        data[name] = np.ascontiguousarray(wides[:, k], dtype=np.uint64).view(np.int64)
    data["hw"] = np.asarray(has_wide, dtype=bool)
    return pd.DataFrame(data)


def explode_frame(frame: Any, tables: list[Parts]) -> Any:
    """Each row under every table's key: columns ``table, key`` then the frame's own."""
    pd: Any = importlib.import_module("pandas")

    fps = frame["fp"].to_numpy(dtype=np.int64).view(np.uint64)
    t, key, rows = explode(np.arange(len(frame)), fps, tables)
    out = {"table": t, "key": key}
    for name in frame.columns:
        out[name] = frame[name].to_numpy()[rows]
    return pd.DataFrame(out)


def pairs_frame(frame: Any, tables: list[Parts], rule: Rule, split: int | None = None) -> Any:
    """The near pairs of one shuffled partition (:func:`.core.partition_pairs`; ``split``:
    ids from it on are queries against the stored ids below it)."""
    pd: Any = importlib.import_module("pandas")

    if "w0" in frame.columns:
        wides = np.stack([frame[c].to_numpy(dtype=np.int64) for c in WIDE_COLUMNS], axis=1)
    else:  # (a rule without the 512-bit verdict: the words are never read)
        wides = np.zeros((len(frame), 8), dtype=np.int64)
    pairs = partition_pairs(
        frame["table"].to_numpy(dtype=np.int64),
        frame["key"].to_numpy(dtype=np.int64),
        frame["id"].to_numpy(dtype=np.int64),
        frame["fp"].to_numpy(dtype=np.int64).view(np.uint64),
        wides.view(np.uint64).reshape(len(frame), 8),
        frame["hw"].to_numpy(dtype=bool),
        tables,
        rule,
        split,
    )
    return pd.DataFrame(pairs.reshape(-1, 4), columns=PAIR_COLUMNS).astype(np.int64)


def shuffle_partitions(rows: int, at_least: int) -> int:
    """Partitions of the shuffle for ``rows`` exploded rows: ``at_least`` (twice the cores),
    more when partitions would exceed :data:`ROWS_PER_PARTITION` (10 M fingerprints at k = 3
    are 40 M rows: 4 partitions of 10 M each would need GBs per task)."""
    return max(at_least, -(-rows // ROWS_PER_PARTITION))


def against_pairs(pairs: np.ndarray, split: int) -> np.ndarray:
    """Pairs ``(i, j, d, dw)`` of a join over stored ids ``< split`` then query ids →
    ``(query, stored, d, dw)`` sorted by ``(query, stored)``."""
    out = np.stack([pairs[:, 1] - split, pairs[:, 0], pairs[:, 2], pairs[:, 3]], axis=1)
    result: np.ndarray = out[np.lexsort((out[:, 1], out[:, 0]))].reshape(-1, 4)
    return result


def concat_sides(queries: Side, stored: Side, words: bool = True) -> Any:
    """One frame of the stored records (ids ``0..len(stored)-1``) then the queries."""
    return fingerprint_frame(
        np.concatenate([np.asarray(stored[0]), np.asarray(queries[0])]),
        np.concatenate([np.asarray(stored[1]), np.asarray(queries[1])]),
        np.concatenate([np.asarray(stored[2], dtype=bool), np.asarray(queries[2], dtype=bool)]),
        words,
    )


def wide_distances(pairs: np.ndarray, wides: np.ndarray, has_wide: np.ndarray) -> np.ndarray:
    """``pairs`` ``(i, j, d, dw)`` with ``dw`` from the driver's 512-bit words: a join that
    did not ship them (:func:`fingerprint_frame`) reports the distances one that did would."""
    i, j = pairs[:, 0], pairs[:, 1]
    counts = np.bitwise_count(wides[i] ^ wides[j]).sum(axis=1, dtype=np.int64)
    out: np.ndarray = pairs.copy()
    out[:, 3] = np.where(has_wide[i] & has_wide[j], counts, np.int64(-1))
    return out


class FrameSearch:
    """The searches of an engine that joins a frame of fingerprints (Spark, Dask): the same
    steps around the engine's own :meth:`_join`. Under the paper's rule the frame carries no
    512-bit words (33 B a row instead of 97): their distances are filled in on the driver."""

    def _join(self, frame: Any, rule: Rule, split: int | None) -> np.ndarray:
        """Near pairs ``(i, j, d, dw)`` of ``frame``'s rows, sorted; with ``split``, only
        pairs of a stored row (id ``< split``) and a query row."""
        raise NotImplementedError

    def search(
        self, fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, rule: Rule
    ) -> np.ndarray:
        if len(fps) < 2:
            return np.zeros((0, 4), dtype=np.int64)
        if rule.wide_threshold is not None:
            return self._join(fingerprint_frame(fps, wides, has_wide), rule, None)
        pairs = self._join(fingerprint_frame(fps, wides, has_wide, False), rule, None)
        return wide_distances(pairs, np.asarray(wides, dtype=np.uint64), has_wide)

    def search_against(self, queries: Side, stored: Side, rule: Rule) -> np.ndarray:
        """Near pairs ``(q, s, d, wide_d)`` of queries and stored records, sorted by
        ``(q, s)``: one join of both sets in which only pairs across them are verified."""
        if not len(queries[0]) or not len(stored[0]):
            return np.zeros((0, 4), dtype=np.int64)
        split = len(stored[0])
        words = rule.wide_threshold is not None
        pairs = self._join(concat_sides(queries, stored, words), rule, split)
        if not words:  # (the 512-bit distances, from the driver's words)
            both = np.concatenate([np.asarray(stored[1]), np.asarray(queries[1])])
            has = np.concatenate([np.asarray(stored[2]), np.asarray(queries[2])]).astype(bool)
            pairs = wide_distances(pairs, both.astype(np.uint64), has)
        return against_pairs(pairs, split)
