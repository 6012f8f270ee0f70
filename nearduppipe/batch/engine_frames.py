"""The shared core's join on pandas frames: what a Spark ``mapInPandas`` and a Dask
``map_partitions`` run on each partition (pandas comes with both extras)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from ..fingerprint.rule import Rule
from ..index.layout import Parts
from .core import explode, partition_pairs

__all__ = ["FP_COLUMNS", "PAIR_COLUMNS", "explode_frame", "fingerprint_frame", "pairs_frame"]

WIDE_COLUMNS = [f"w{k}" for k in range(8)]
FP_COLUMNS = ["id", "fp", *WIDE_COLUMNS, "hw"]  # 64-bit values as int64 (Spark has no uint64)
PAIR_COLUMNS = ["i", "j", "d", "dw"]


def fingerprint_frame(fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray) -> Any:
    pd: Any = importlib.import_module("pandas")

    data: dict[str, Any] = {"id": np.arange(len(fps), dtype=np.int64)}
    data["fp"] = np.asarray(fps, dtype=np.uint64).view(np.int64)
    for k, name in enumerate(WIDE_COLUMNS):
        data[name] = np.ascontiguousarray(wides[:, k], dtype=np.uint64).view(np.int64)
    data["hw"] = np.asarray(has_wide, dtype=bool)
    return pd.DataFrame(data)


def explode_frame(frame: Any, tables: list[Parts]) -> Any:
    """Each row under every table's key: columns ``table, key`` then :data:`FP_COLUMNS`."""
    pd: Any = importlib.import_module("pandas")

    fps = frame["fp"].to_numpy(dtype=np.int64).view(np.uint64)
    t, key, rows = explode(np.arange(len(frame)), fps, tables)
    out = {"table": t, "key": key}
    for name in FP_COLUMNS:
        out[name] = frame[name].to_numpy()[rows]
    return pd.DataFrame(out)


def pairs_frame(frame: Any, tables: list[Parts], rule: Rule) -> Any:
    """The near pairs of one shuffled partition (:func:`.core.partition_pairs`)."""
    pd: Any = importlib.import_module("pandas")

    wides = np.stack([frame[c].to_numpy(dtype=np.int64) for c in WIDE_COLUMNS], axis=1)
    pairs = partition_pairs(
        frame["table"].to_numpy(dtype=np.int64),
        frame["key"].to_numpy(dtype=np.int64),
        frame["id"].to_numpy(dtype=np.int64),
        frame["fp"].to_numpy(dtype=np.int64).view(np.uint64),
        wides.view(np.uint64).reshape(len(frame), 8),
        frame["hw"].to_numpy(dtype=bool),
        tables,
        rule,
    )
    return pd.DataFrame(pairs.reshape(-1, 4), columns=PAIR_COLUMNS).astype(np.int64)
