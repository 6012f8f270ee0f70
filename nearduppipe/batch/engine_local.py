"""The local engine (the default): the fingerprint map in a process pool on this machine, the
join as one compiled self-join over every representative (:func:`.pairs.near_pairs`: exact,
so its pairs are those of the distributed engines' block-permutation join)."""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import Protocol

import numpy as np

from ..fingerprint.page import Fingerprinted, FingerprintParams
from ..fingerprint.rule import Rule
from .core import Fields, Job, fingerprint_job
from .inputs import Input
from .pairs import near_pairs, near_pairs_against

__all__ = ["Engine", "LocalEngine", "Side"]

# one side of a join against a stored set: 64-bit fingerprints, 512-bit words, has-wide flags
Side = tuple[np.ndarray, np.ndarray, np.ndarray]


class Engine(Protocol):
    """What :func:`.records.dedup_records` asks of an engine: the fingerprint map (results
    in input order, while the driver walks the same records for their keys) and the join
    (near pairs ``(i, j, d, wide_d)`` of the given representatives, ``i < j``, sorted)."""

    name: str

    def fingerprints(
        self, sources: list[Input], fields: Fields, params: FingerprintParams, jobs: Iterator[Job]
    ) -> Iterator[Fingerprinted]: ...

    def search(
        self, fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, rule: Rule
    ) -> np.ndarray: ...

    def search_against(self, queries: Side, stored: Side, rule: Rule) -> np.ndarray: ...

    def close(self) -> None: ...


def _fingerprint_chunk(jobs: list[Job]) -> list[Fingerprinted]:
    return [fingerprint_job(job) for job in jobs]


def _bounded_map(
    pool: ProcessPoolExecutor, jobs: Iterator[Job], chunk: int, window: int
) -> Iterator[Fingerprinted]:
    """Results in input order with at most ``window`` chunks in flight. (Executor.map submits
    every item at once, which would hold every text of the export in memory.)"""
    pending: deque[Future[list[Fingerprinted]]] = deque()
    while True:
        batch = list(islice(jobs, chunk))
        if batch:
            pending.append(pool.submit(_fingerprint_chunk, batch))
        if pending and (len(pending) >= window or not batch):
            yield from pending.popleft().result()
        if not batch and not pending:
            return


class LocalEngine:
    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def fingerprints(
        self, sources: list[Input], fields: Fields, params: FingerprintParams, jobs: Iterator[Job]
    ) -> Iterator[Fingerprinted]:
        window = 4 * (self.workers or 2) + 2
        # forkserver, not fork: the driver has threads by now (progress, a store's client),
        # and fork() under threads can deadlock a child (Python 3.12+ warns of it). Workers
        # get their jobs pickled either way, so results are the same.
        context = multiprocessing.get_context("forkserver")
        # (the server imports the fingerprint code once; each worker forks from it ready)
        context.set_forkserver_preload(["nearduppipe.batch.core"])
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=context) as pool:
            yield from _bounded_map(pool, jobs, chunk=64, window=window)

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
