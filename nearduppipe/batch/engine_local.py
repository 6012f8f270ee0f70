"""The local engine (the default): the fingerprint map in a process pool on this machine, the
join as one compiled self-join over every representative (:func:`.pairs.near_pairs`: exact,
so its pairs are those of the distributed engines' block-permutation join)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from functools import partial
from itertools import islice
from typing import Protocol, TypeVar

import numpy as np

from ..fingerprint.cpus import usable_cpus
from ..fingerprint.page import FingerprintParams
from ..fingerprint.rule import Rule
from .core import Fields
from .pairs import near_pairs, near_pairs_against
from .split_task import SplitResult, Wants, read_split
from .splits import Split
from .write_task import WriteResult, WriteTask, write_split

__all__ = ["Engine", "LocalEngine", "Side"]

# one side of a join against a stored set: 64-bit fingerprints, 512-bit words, has-wide flags
Side = tuple[np.ndarray, np.ndarray, np.ndarray]
T = TypeVar("T")
R = TypeVar("R")


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

    def write(self, tasks: list[WriteTask]) -> Iterator[WriteResult]:
        """Pass 2: each task run where its split is read (:func:`.write_task.write_split`),
        results in the tasks' order (``-o``'s parts: input order)."""
        ...

    def search(
        self, fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, rule: Rule
    ) -> np.ndarray: ...

    def search_against(self, queries: Side, stored: Side, rule: Rule) -> np.ndarray: ...

    def close(self) -> None: ...


def _bounded_map(
    pool: ProcessPoolExecutor, run: Callable[[T], R], items: list[T], window: int
) -> Iterator[R]:
    """Results in input order with at most ``window`` splits in flight (each result holds its
    split's records, or its part of the output: not all of them at once)."""
    pending: deque[Future[R]] = deque()
    todo = iter(items)
    while True:
        for item in islice(todo, window - len(pending)):
            pending.append(pool.submit(run, item))
        if not pending:
            return
        yield pending.popleft().result()


class LocalEngine:
    name = "local"
    shares_files = True  # (its tasks write -o's parts to files the driver reads: .write_task)

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    @property
    def cores(self) -> int:
        return self.workers or usable_cpus()

    def read(
        self, splits: list[Split], fields: Fields, params: FingerprintParams, wants: Wants
    ) -> Iterator[SplitResult]:
        run = partial(read_split, fields=fields, params=params, wants=wants)
        yield from self._map(run, splits)

    def write(self, tasks: list[WriteTask]) -> Iterator[WriteResult]:
        yield from self._map(write_split, tasks)

    def _map(self, run: Callable[[T], R], items: list[T]) -> Iterator[R]:
        window = 2 * self.cores + 1
        # forkserver, not fork: the driver has threads by now (progress, a store's client),
        # and fork() under threads can deadlock a child (Python 3.12+ warns of it). Workers
        # get their jobs pickled either way, so results are the same.
        _short_socket_folder()
        context = multiprocessing.get_context("forkserver")
        # (the server imports the fingerprint code once; each worker forks from it ready)
        context.set_forkserver_preload(["nearduppipe.batch.write_task"])
        if not items:
            return
        workers = min(self.cores, len(items))
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            yield from _bounded_map(pool, run, items, window)

    def search(
        self, fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray, rule: Rule
    ) -> np.ndarray:
        return near_pairs(fps, wides, has_wide, rule, workers=self.cores)

    def search_against(self, queries: Side, stored: Side, rule: Rule) -> np.ndarray:
        """Near pairs ``(q, s, d, wide_d)`` of queries and stored records, sorted: no pair of
        two stored records is computed (:func:`.pairs.near_pairs_against`, one thread a core)."""
        return near_pairs_against(queries, stored, rule, self.cores)

    def close(self) -> None:
        pass


# A Unix socket's path holds at most 107 bytes on Linux (103 on macOS). The forkserver's socket
# is made in multiprocessing's folder for the process, itself made in TMPDIR: a TMPDIR over ~70
# characters failed every dedup with "AF_UNIX path too long" (before Python 3.14, which falls
# back to /tmp in the same way; the parts of pass 2 stay in TMPDIR).
SOCKET_PATH_MAX = 103
_SOCKET_NAME = len("/pymp-xxxxxxxx/listener-xxxxxxxx")


def _short_socket_folder() -> None:
    """Make multiprocessing's folder for this process in /tmp (or /var/tmp, /usr/tmp) when
    TMPDIR is too long for a socket in it, before anything makes it in TMPDIR."""
    config: dict[str, object] = getattr(multiprocessing.process.current_process(), "_config", {})
    if "tempdir" in config or len(tempfile.gettempdir()) + _SOCKET_NAME <= SOCKET_PATH_MAX:
        return
    for base in ("/tmp", "/var/tmp", "/usr/tmp"):
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            folder = tempfile.mkdtemp(prefix="pymp-", dir=base)
            multiprocessing.util.Finalize(
                None, shutil.rmtree, args=(folder, True), exitpriority=-100
            )
            config["tempdir"] = folder  # (where multiprocessing.util.get_temp_dir looks first)
            return
