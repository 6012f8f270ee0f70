"""The local engine (the default): the fingerprint map in a process pool on this machine, the
join as one compiled self-join over every representative (:func:`.pairs.near_pairs`: exact,
so its pairs are those of the distributed engines' block-permutation join)."""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import Protocol

import numpy as np

from ..fingerprint.page import FingerprintParams
from ..fingerprint.rule import Rule
from .core import Fields
from .pairs import near_pairs, near_pairs_against
from .split_task import SplitResult, Wants, read_split
from .splits import Split

__all__ = ["Engine", "LocalEngine", "Side"]

# one side of a join against a stored set: 64-bit fingerprints, 512-bit words, has-wide flags
Side = tuple[np.ndarray, np.ndarray, np.ndarray]


class Engine(Protocol):
    """What :func:`.records.dedup_records` asks of an engine: the fingerprint map (each
    split of the inputs read by one task, :func:`.split_task.read_split`; results in input
    order; ``cores`` sizes the splits) and the join
    (near pairs ``(i, j, d, wide_d)`` of the given representatives, ``i < j``, sorted)."""

    name: str

    @property
    def cores(self) -> int: ...

    def read(
        self, splits: list[Split], fields: Fields, params: FingerprintParams, wants: Wants
    ) -> Iterator[SplitResult]: ...

    def search(
        self, fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, rule: Rule
    ) -> np.ndarray: ...

    def search_against(self, queries: Side, stored: Side, rule: Rule) -> np.ndarray: ...

    def close(self) -> None: ...


def _bounded_map(
    pool: ProcessPoolExecutor,
    splits: list[Split],
    fields: Fields,
    params: FingerprintParams,
    wants: Wants,
    window: int,
) -> Iterator[SplitResult]:
    """Results in input order with at most ``window`` splits in flight (each result holds its
    split's records: not all of them at once)."""
    pending: deque[Future[SplitResult]] = deque()
    todo = iter(splits)
    while True:
        for split in islice(todo, window - len(pending)):
            pending.append(pool.submit(read_split, split, fields, params, wants))
        if not pending:
            return
        yield pending.popleft().result()


class LocalEngine:
    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    @property
    def cores(self) -> int:
        return self.workers or os.cpu_count() or 1

    def read(
        self, splits: list[Split], fields: Fields, params: FingerprintParams, wants: Wants
    ) -> Iterator[SplitResult]:
        window = 2 * self.cores + 1
        # forkserver, not fork: the driver has threads by now (progress, a store's client),
        # and fork() under threads can deadlock a child (Python 3.12+ warns of it). Workers
        # get their jobs pickled either way, so results are the same.
        context = multiprocessing.get_context("forkserver")
        # (the server imports the fingerprint code once; each worker forks from it ready)
        context.set_forkserver_preload(["nearduppipe.batch.split_task"])
        workers = min(self.cores, len(splits)) or 1  # (no process for nothing to do)
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            yield from _bounded_map(pool, splits, fields, params, wants, window)

    def search(
        self, fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, rule: Rule
    ) -> np.ndarray:
        return near_pairs(fps, wides, has_wide, rule)

    def search_against(self, queries: Side, stored: Side, rule: Rule) -> np.ndarray:
        """Near pairs ``(q, s, d, wide_d)`` of queries and stored records, sorted: no pair of
        two stored records is computed (:func:`.pairs.near_pairs_against`)."""
        return near_pairs_against(queries, stored, rule)

    def close(self) -> None:
        pass
