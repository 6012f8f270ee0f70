"""``nearduppipe dedup --pairs FILE``: every near-duplicate pair found, for users who build their
own clusters, as JSON lines or (a name ending in ``.parquet``) Parquet through pyarrow (the
optional extra ``nearduppipe[parquet]``).

One row per pair ``a < b`` in input order (sorted by ``a``, then ``b``): both records' keys and
1-based record numbers over all inputs in order, the 64-bit distance, the 512-bit distance and
the cosine that distance implies (:func:`nearduppipe.fingerprint.rule.implied_similarity`).
A key holding a lone surrogate (a JSON feed's ``"\\udc80"``) is escaped: in a JSON line as
JSON escapes it (read back, the same key), in Parquet as the text ``\\udc80``
(:mod:`.unicode_out`), so two keys stay two.
Pairs are the rule's verdicts before groups are formed: a group joined through a chain holds
records that are not a pair.
"""

from __future__ import annotations

import importlib.util
import io
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..fingerprint.rule import WIDE_BITS
from .compression import MissingExtraError
from .unicode_out import escape_surrogates, json_text

__all__ = ["PAIR_COLUMNS", "check_pyarrow", "need_pyarrow", "pairs_format", "write_pairs"]

PAIR_COLUMNS = ("a", "b", "a_record", "b_record", "distance", "wide_distance", "similarity")


def pairs_format(path: str | Path) -> str:
    """``parquet`` for a name ending in ``.parquet``, else ``jsonl``."""
    return "parquet" if str(path).lower().endswith(".parquet") else "jsonl"


def check_pyarrow() -> None:
    """The error :func:`need_pyarrow` would raise, without importing pyarrow: its thread pools
    must not exist yet when the fingerprinting processes are forked."""
    try:
        found = importlib.util.find_spec("pyarrow") is not None
    except (ImportError, ValueError):  # (ValueError: sys.modules["pyarrow"] is None)
        found = False
    if not found:
        need_pyarrow()


def need_pyarrow() -> Any:
    try:
        import pyarrow  # type: ignore[import-untyped,import-not-found,unused-ignore]
        import pyarrow.parquet  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise MissingExtraError(
            "--pairs: writing Parquet needs the pyarrow package: "
            "pip install 'nearduppipe[parquet]' (or name a .jsonl file)"
        ) from None
    return pyarrow


def _similarity(wide_distance: np.ndarray) -> np.ndarray:
    sim = np.cos(math.pi * wide_distance.astype(np.float64) / WIDE_BITS)
    return np.where(wide_distance < 0, np.nan, sim)  # (no wide fingerprint on a side)


def _parquet_table(pa: Any, pairs: np.ndarray, keys: dict[int, str]) -> Any:
    return pa.table(
        {
            "a": pa.array([escape_surrogates(keys[i]) for i in pairs[:, 0].tolist()], pa.string()),
            "b": pa.array([escape_surrogates(keys[j]) for j in pairs[:, 1].tolist()], pa.string()),
            "a_record": pa.array(pairs[:, 0] + 1, pa.int64()),
            "b_record": pa.array(pairs[:, 1] + 1, pa.int64()),
            "distance": pa.array(pairs[:, 2], pa.int16()),
            "wide_distance": pa.array(pairs[:, 3], pa.int16()),
            "similarity": pa.array(_similarity(pairs[:, 3]), pa.float64(), from_pandas=True),
        }
    )


def _jsonl_lines(pairs: np.ndarray, keys: dict[int, str]) -> Iterator[str]:
    sim = _similarity(pairs[:, 3]).tolist()
    for (i, j, d, dw), s in zip(pairs.tolist(), sim, strict=True):
        line = {
            "a": keys[i],
            "b": keys[j],
            "a_record": i + 1,
            "b_record": j + 1,
            "distance": d,
            "wide_distance": dw if dw >= 0 else None,
            "similarity": s if not math.isnan(s) else None,
        }
        yield json_text(line) + "\n"


def write_pairs(
    out: IO[bytes], pairs: np.ndarray | Iterable[np.ndarray], keys: dict[int, str], fmt: str
) -> int:
    """Write ``pairs`` (rows ``(i, j, d, wide_d)``, record indices from 0: one array, or
    chunks of them such as :meth:`.near.NearPairs.chunks` gives, written as they come: memory
    is a chunk) to ``out``, naming records by ``keys[i]``; returns the number of rows."""
    chunks = [pairs] if isinstance(pairs, np.ndarray) else pairs
    n = 0
    if fmt == "parquet":
        pa = need_pyarrow()
        schema = _parquet_table(pa, np.zeros((0, 4), dtype=np.int64), keys).schema
        # (written as it goes: ParquetWriter only appends, so out need not seek)
        with pa.parquet.ParquetWriter(out, schema) as writer:
            for chunk in chunks:
                chunk = np.asarray(chunk, dtype=np.int64).reshape(-1, 4)
                if len(chunk):
                    writer.write_table(_parquet_table(pa, chunk, keys))
                    n += len(chunk)
        return n
    text = io.TextIOWrapper(out, encoding="utf-8", newline="\n", write_through=True)
    try:
        for chunk in chunks:
            chunk = np.asarray(chunk, dtype=np.int64).reshape(-1, 4)
            text.write("".join(_jsonl_lines(chunk, keys)))
            n += len(chunk)
        text.flush()
    finally:
        text.detach()
    return n
