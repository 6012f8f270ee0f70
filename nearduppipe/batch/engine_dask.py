"""The Dask engine (``dedup --engine dask``, extra ``nearduppipe[dask]``): the shared core on
a Dask cluster, a :class:`distributed.LocalCluster` of this machine by default or the
scheduler at ``--scheduler ADDRESS``.

- fingerprint map: one future per stripe of each input (:func:`.core.fingerprint_stripe`),
  so the inputs must be readable at the same path on every worker;
- join: a dask DataFrame of the representatives' fingerprints, exploded under every table's
  key, shuffled by ``(table, key)`` and joined in each partition with the 512-bit verdict
  (:func:`.engine_frames.pairs_frame`); the near pairs come back to the driver.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..fingerprint.page import Fingerprinted, FingerprintParams
from ..fingerprint.rule import Rule
from .compression import FeedError, MissingExtraError
from .core import (
    Fields,
    Job,
    StripeRow,
    fingerprint_stripe,
    in_order,
    join_tables,
    row_result,
    sort_pairs,
    stripe_tasks,
)
from .engine_frames import (
    PAIR_COLUMNS,
    FrameSearch,
    explode_frame,
    pairs_frame,
    shuffle_partitions,
)
from .inputs import Input

__all__ = ["DaskEngine"]


def _run_stripe(
    task: tuple[int, Input, int, int], fields: Fields, params: FingerprintParams
) -> tuple[int, list[StripeRow] | FeedError]:
    # the driver stops at an input's error (its one line) and the stripes still running are
    # cancelled: each would log a WARNING "Async instruction ... ended with CancelledError"
    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
    n, source, s, k = task
    return n, fingerprint_stripe(source, s, k, fields, params)


class DaskEngine(FrameSearch):
    """``scheduler``: a scheduler address (``tcp://host:8786``), or None for a LocalCluster
    of ``workers`` single-threaded worker processes (default 2), closed by :meth:`close`;
    ``memory_limit`` per worker (``"4GiB"``; default: the machine's memory over the workers),
    beyond which a worker spills and then restarts."""

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        workers: int | None = None,
        blocks: int | None = None,
        memory_limit: str | None = None,
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
            )
            self.client: Any = distributed.Client(self.cluster)
        else:
            self.client = distributed.Client(scheduler)
        self.cores = max(1, sum(self.client.nthreads().values()))
        self.blocks = blocks

    def fingerprints(
        self, sources: list[Input], fields: Fields, params: FingerprintParams, jobs: Iterator[Job]
    ) -> Iterator[Fingerprinted]:
        stripes = max(1, -(-2 * self.cores // len(sources)))
        tasks = list(stripe_tasks(sources, stripes))
        futures = self.client.map(_run_stripe, tasks, fields=fields, params=params, pure=False)
        # every task runs at once; results are gathered in task order, one input at a time
        rows = in_order(future.result() for future in futures)
        for row, _ in zip(rows, jobs, strict=True):  # (the driver's walk: keys, hosts)
            yield row_result(row)

    def _join(self, frame: Any, rule: Rule, split: int | None) -> np.ndarray:
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
