"""The Dask engine (``dedup --engine dask``, extra ``nearduppipe[dask]``): the shared core on
a Dask cluster, a :class:`distributed.LocalCluster` of this machine by default or the
scheduler at ``--scheduler ADDRESS``.

- fingerprint map: one future per split of each input (:func:`.split_task.read_split`),
  so the inputs must be readable under the same name on every worker;
- join: up to ``broadcast_bytes`` of representatives (default 1 GiB, as Spark's: 14 M with
  their 512-bit words, 119 M without), their arrays scattered to every worker once
  (``broadcast=True``) and one task per slice of rows running the local engine's exact search
  for its rows (:mod:`.sliced`); beyond, a dask DataFrame of them, exploded under every
  table's key, shuffled by ``(table, key)`` and joined in each partition with the 512-bit
  verdict (:func:`.engine_frames.pairs_frame`); the near pairs come back to the driver;
- output: one future per split again (:func:`.write_task.write_split`), whose part of ``-o``
  the driver writes in input order.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..fingerprint.page import FingerprintParams
from ..fingerprint.rule import Rule
from .compression import MissingExtraError
from .core import Fields, join_tables, sort_pairs
from .engine_frames import (
    PAIR_COLUMNS,
    FrameSearch,
    explode_frame,
    pairs_frame,
    shuffle_partitions,
)
from .sliced import BROADCAST_BYTES, frame_arrays, slice_pairs
from .split_task import SplitResult, Wants, read_split
from .splits import Split
from .write_task import WriteResult, WriteTask, write_split

__all__ = ["DaskEngine"]


def _read_split(
    split: Split, fields: Fields, params: FingerprintParams, wants: Wants
) -> SplitResult:
    # the driver stops at an input's error (its one line) and the splits still running are
    # cancelled: each would log a WARNING "Async instruction ... ended with CancelledError"
    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
    return read_split(split, fields, params, wants)


class DaskEngine(FrameSearch):
    """``scheduler``: a scheduler address (``tcp://host:8786``), or None for a LocalCluster
    of ``workers`` single-threaded worker processes (default 2), closed by :meth:`close`;
    ``memory_limit`` per worker (``"4GiB"``; default: the machine's memory over the workers),
    beyond which a worker spills and then restarts. ``broadcast_bytes``: the largest join
    sent whole to every worker (:mod:`.sliced`); larger ones shuffle (0: always)."""

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        workers: int | None = None,
        blocks: int | None = None,
        memory_limit: str | None = None,
        broadcast_bytes: int = BROADCAST_BYTES,
    ) -> None:
        try:
            importlib.import_module("dask.dataframe")
            distributed: Any = importlib.import_module("distributed")
        except ImportError:
            raise MissingExtraError(
                "--engine dask needs Dask: pip install 'nearduppipe[dask]'"
            ) from None
        # (p2p shuffles log each start and end at WARNING on the scheduler)
        logging.getLogger("distributed.shuffle._scheduler_plugin").setLevel(logging.ERROR)
        self.cluster: Any = None
        if scheduler is None:
            self.cluster = distributed.LocalCluster(
                n_workers=workers or 2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                memory_limit=memory_limit or "auto",
                # the driver says what went wrong in one line; the processes' own logs are
                # noise to it, e.g. a worker's heartbeat traceback when the scheduler closes
                # first after an input's error (one run in a few on a loaded machine)
                silence_logs=logging.CRITICAL,
            )
            self.client: Any = distributed.Client(self.cluster)
        else:
            self.client = distributed.Client(scheduler)
        # (its own LocalCluster's workers write -o's parts to files the driver reads)
        self.shares_files = self.cluster is not None
        self.cores = max(1, sum(self.client.nthreads().values()))  # (sizes the splits)
        self.blocks = blocks
        self.broadcast_bytes = broadcast_bytes

    def read(
        self, splits: list[Split], fields: Fields, params: FingerprintParams, wants: Wants
    ) -> Iterator[SplitResult]:
        futures = self.client.map(
            _read_split, splits, fields=fields, params=params, wants=wants, pure=False
        )
        # every task runs at once; results are gathered in split order
        for future in futures:
            yield future.result()
            future.release()

    def write(self, tasks: list[WriteTask]) -> Iterator[WriteResult]:
        futures = self.client.map(write_split, tasks, pure=False)
        for future in futures:  # (parts in input order; all run at once)
            yield future.result()
            future.release()

    def _join(self, frame: Any, rule: Rule, split: int | None) -> np.ndarray:
        size = int(frame.memory_usage(index=False).sum())
        if size <= self.broadcast_bytes:
            return self._sliced(frame, rule, split)
        return self._shuffled(frame, rule, split)

    def _sliced(self, frame: Any, rule: Rule, split: int | None) -> np.ndarray:
        """The frame's arrays scattered to every worker, one task per slice of rows
        (:mod:`.sliced`), as Spark's broadcast join."""
        # (one future for the three arrays: a list is scattered element by element; not
        # hashed: tokenizing a GB of arrays costs more than sending them)
        (shared,) = self.client.scatter([frame_arrays(frame)], broadcast=True, hash=False)
        rows = len(frame) if split is None else len(frame) - split
        parts = max(1, min(rows, 2 * self.cores))
        futures = [
            self.client.submit(slice_pairs, shared, rule, part, parts, split, pure=False)
            for part in range(parts)
        ]
        try:
            found = self.client.gather(futures)
        finally:
            for future in (*futures, shared):
                future.release()
        return sort_pairs(found)

    def _shuffled(self, frame: Any, rule: Rule, split: int | None) -> np.ndarray:
        dd: Any = importlib.import_module("dask.dataframe")
        pd: Any = importlib.import_module("pandas")

        tables = join_tables(rule.radius, self.blocks)
        partitions = shuffle_partitions(len(frame) * len(tables), 2 * self.cores)
        parts = max(1, min(partitions, len(frame)))  # (each explodes into len(tables) rows)
        ddf = dd.from_pandas(frame, npartitions=parts)
        meta = explode_frame(frame.iloc[:0], tables)
        exploded = ddf.map_partitions(explode_frame, tables, meta=meta)
        shuffled = exploded.shuffle(on=["table", "key"], npartitions=partitions)
        empty = pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in PAIR_COLUMNS})
        found = shuffled.map_partitions(pairs_frame, tables, rule, split, meta=empty)
        result = self.client.compute(found).result()
        return sort_pairs([result[PAIR_COLUMNS].to_numpy(dtype=np.int64)])

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()
