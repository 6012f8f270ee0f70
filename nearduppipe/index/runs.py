"""The runs of :class:`nearduppipe.index.BlockIndex`: immutable tables over a range of ids.

A run files the live ids of ``lo .. hi - 1`` in every table of its table set: per table, the ids
and their fingerprints grouped by the top ``dir_bits`` bits of the table key (a counting sort),
with a directory of offsets. Runs never change once built, so a merged run can be built a slice
at a time (:mod:`.merge`) while queries keep reading the old ones. :func:`kernels` and
:func:`bind` are how the index and the stores get at the compiled code.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import math
import os
import shutil
import stat
import tempfile
import threading
from itertools import combinations
from typing import Any

import numpy as np

from .layout import Layout

__all__ = ["Geometry", "Run", "TableSet", "bind", "kernels", "probe_masks", "run_shape"]

logger = logging.getLogger("nearduppipe")

_KERNELS: Any = None
_IMPORTING = threading.Lock()


def kernels() -> Any:
    """The compiled kernels, imported on first use: importing numba costs about a second,
    which processes that never search (extraction workers, most CLI commands) do not pay.
    One object with every kernel as an attribute (those of :mod:`.compiled` and
    :mod:`.joins`) and their ``warm()``."""
    global _KERNELS
    if _KERNELS is None:
        with _IMPORTING:
            if _KERNELS is None:
                _KERNELS = _Kernels(*_import_compiled())
    return _KERNELS


class _Kernels:
    """The functions named in the ``__all__`` of each module (but ``warm``), and
    :meth:`warm`, which warms what :func:`nearduppipe.index.compiled.warm` does."""

    def __init__(self, compiled: Any, *others: Any) -> None:
        for module in (compiled, *others):
            for name in module.__all__:
                if name != "warm":
                    setattr(self, name, getattr(module, name))
        self.warm = compiled.warm


def _import_compiled() -> tuple[Any, Any]:
    """:mod:`.compiled` and :mod:`.joins`, whose functions numba caches on disk
    (``cache=True``).

    numba takes the first folder it can write a file to: ``NUMBA_CACHE_DIR``, the package's
    ``__pycache__``, the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``); with none
    (a package installed by root, a service user whose HOME is /nonexistent) it raises at the
    first ``cache=True`` function. Then the modules are imported again with a private folder in
    the temporary directory as ``NUMBA_CACHE_DIR``, and one warning."""
    try:
        # (steps: imported here for the same cache folder)
        from . import compiled, joins, steps
    except RuntimeError as e:
        if "no locator available" not in str(e):
            raise
        from numba.core import config as _config

        config: Any = _config  # (untyped)

        try:
            folder = _private_cache_dir()
        except OSError as err:
            raise RuntimeError(
                f"numba cannot cache the compiled index anywhere ({e}; the temporary folder: "
                f"{err}); set NUMBA_CACHE_DIR to a writable folder"
            ) from err
        logger.warning(
            "nearduppipe: numba cannot cache the compiled index beside %s nor in the user's "
            "cache folder (not writable here); caching it in %s instead. Set NUMBA_CACHE_DIR "
            "to a writable folder to choose where",
            os.path.dirname(os.path.abspath(__file__)),
            folder,
        )
        saved = config.CACHE_DIR
        config.CACHE_DIR = folder
        try:
            from . import compiled, joins, steps  # noqa: F401
        finally:
            config.CACHE_DIR = saved  # (each function located its cache at decoration)
    return compiled, joins


def _private_cache_dir() -> str:
    """``<temp>/nearduppipe-numba-<uid>``, reused by later runs if it is this user's alone:
    numba loads cached code with pickle, so a folder someone else made or may write is never
    used; a new one is made instead (removed at exit)."""
    uid = getattr(os, "getuid", lambda: None)()
    if uid is not None:
        path = os.path.join(tempfile.gettempdir(), f"nearduppipe-numba-{uid}")
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077:
            return path
    path = tempfile.mkdtemp(prefix="nearduppipe-numba-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def bind(kernel: Any, *args: Any) -> Any:
    """``kernel``'s compiled code for the types of ``args``, to be called directly.

    A call through numba's dispatcher first types every argument (~0.15-0.2 µs each): 2-3 µs
    per radius-8 query of one run (14 arguments) and as much for a check's verdict, against
    15-40 µs for the whole query at 1 M stored, measured. The index and the stores pass
    arrays whose dtype, dimensions and layout are fixed by construction, so they bind once
    and skip that. The bound code does not check types: arguments of other types would be
    misread, not converted (bind again for them)."""
    from numba import typeof

    types: Any = typeof  # (untyped)
    return kernel.compile(tuple(types(a) for a in args))


@functools.cache
def probe_masks(width: int, radius: int) -> np.ndarray:
    """Every ``width``-bit mask of at most ``radius`` set bits (the probe offsets)."""
    masks = [0]
    for r in range(1, min(radius, width) + 1):
        for combo in combinations(range(width), r):
            m = 0
            for bit in combo:
                m |= 1 << bit
            masks.append(m)
    out = np.array(masks, dtype=np.int64)
    out.flags.writeable = False
    return out


# The cost of one run's query, measured with the compiled search on this project's 2-core
# host (single runs of 30 k to 10 M uniform fingerprints, radius 8): each probed bucket costs
# about 40 ns (a directory read and a line of fingerprints, mostly cache misses) and each
# fingerprint in it 2.5 ns (a popcount). The model picked the fastest table set at every size
# measured (see Geometry); it only chooses, so an error costs speed, never results.
PROBE_NS = 40.0
CANDIDATE_NS = 2.5
PREFER_FEWER = 1.1  # a set with fewer tables (less memory) wins unless 10 % slower


def _ball(width: int, radius: int) -> int:
    return sum(math.comb(width, i) for i in range(min(radius, width) + 1))


class TableSet:
    """One way of filing a run (:meth:`Layout.table_sets`) as arrays the kernels read: each
    table's key as blocks ``(shift, width)`` and the radius its key is probed at."""

    def __init__(self, tables: list[tuple[tuple[int, int], ...]], radii: tuple[int, ...]):
        width = max(len(parts) for parts in tables)
        self.shifts = np.zeros((len(tables), width), dtype=np.int64)
        self.widths = np.zeros((len(tables), width), dtype=np.int64)
        for t, parts in enumerate(tables):
            for p, (shift, w) in enumerate(parts):
                self.shifts[t, p], self.widths[t, p] = shift, w
        self.tables = tables
        self.key_bits = [sum(w for _, w in parts) for parts in tables]
        self.probes = np.array(radii, dtype=np.int64)
        self.probes.flags.writeable = False
        self._masks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def dir_bits(self, n: int) -> int:
        # About 1 id per group (measured with the compiled search: at 1 M and 10 M, each bit
        # less doubles the candidates and costs more than the smaller directory saves); at
        # most 24 bits (a 64 MiB directory per table).
        want = max(4, min(24, math.ceil(math.log2(max(n, 1) + 1))))
        return min(want, *self.key_bits)

    def drops(self, dir_bits: int) -> np.ndarray:
        return np.array([kb - dir_bits for kb in self.key_bits], dtype=np.int64)

    def masks(self, dir_bits: int) -> tuple[np.ndarray, np.ndarray]:
        """Each table's probe offsets (a row each, padded) and how many each row holds."""
        if dir_bits not in self._masks:
            rows = [probe_masks(dir_bits, int(r)) for r in self.probes]
            masks = np.zeros((len(rows), max(len(r) for r in rows)), dtype=np.int64)
            for t, row in enumerate(rows):
                masks[t, : len(row)] = row
            counts = np.array([len(r) for r in rows], dtype=np.int64)
            masks.flags.writeable = counts.flags.writeable = False
            self._masks[dir_bits] = masks, counts
        return self._masks[dir_bits]

    def cost(self, n: int) -> float:
        """Modelled nanoseconds of one query of a run of ``n`` ids."""
        d = self.dir_bits(n)
        probes = sum(_ball(d, int(r)) for r in self.probes)
        return probes * (PROBE_NS + CANDIDATE_NS * n / (1 << d))


class Geometry:
    """The layout's table sets; each run is filed in the one cheapest for its size.

    Measured (single runs, radius 8, median query; ``/tmp`` script comparing the sets on the
    same fingerprints): 5 tables of 12-13 bits probed at radii 1,1,1,1,0 took 3.3 us at 30 k
    against 8.3 for 3 tables at radius 2; 4 tables of 16 bits at radii 2,1,1,1 took 15 us at
    1 M against 25-31 (skewed 22 against 28, text-like 19 against 26); at 10 M the 3 wide
    tables win (58 us against 80). All return the same ids: the choice is speed only."""

    def __init__(self, layout: Layout) -> None:
        self.sets = [TableSet(tables, radii) for tables, radii in layout.table_sets()]

    def for_size(self, n: int) -> TableSet:
        costs = [ts.cost(n) for ts in self.sets]
        best = min(costs)
        fit = [ts for ts, c in zip(self.sets, costs, strict=True) if c <= best * PREFER_FEWER]
        return min(fit, key=lambda ts: len(ts.tables))


class Run:
    """The live ids of ``lo .. hi - 1`` filed in every table (immutable)."""

    __slots__ = (
        "args",
        "dead",
        "dir_bits",
        "drops",
        "hi",
        "lo",
        "masks",
        "offsets",
        "size",
        "tables",
        "tfps",
        "tids",
    )

    def __init__(self, geo: Geometry, fps: np.ndarray, alive: np.ndarray, lo: int, hi: int):
        K = kernels()
        ids = K.live_ids(alive, lo, hi)
        ts, dir_bits, drops = run_shape(geo, len(ids))
        arrays = K.build_run(fps, ids, ts.shifts, ts.widths, drops, dir_bits)
        self._fill(lo, hi, len(ids), ts, dir_bits, arrays)

    @classmethod
    def built(
        cls,
        lo: int,
        hi: int,
        size: int,
        ts: TableSet,
        dir_bits: int,
        arrays: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> Run:
        """A run of arrays built elsewhere (:class:`Merge`)."""
        run = cls.__new__(cls)
        run._fill(lo, hi, size, ts, dir_bits, arrays)
        return run

    def _fill(
        self,
        lo: int,
        hi: int,
        size: int,
        ts: TableSet,
        dir_bits: int,
        arrays: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> None:
        self.lo, self.hi, self.size, self.dead = lo, hi, size, 0
        self.tables, self.dir_bits = ts, dir_bits
        self.drops = ts.drops(dir_bits)
        self.masks, counts = ts.masks(dir_bits)
        self.offsets, self.tfps, self.tids = arrays
        # what every query passes first, in query_run's order (one tuple, not 9 lookups)
        self.args = (
            self.offsets, self.tfps, self.tids, ts.shifts, ts.widths, self.drops,
            self.masks, counts, ts.probes,
        )  # fmt: skip

    @property
    def nbytes(self) -> int:
        return int(self.offsets.nbytes + self.tfps.nbytes + self.tids.nbytes)

    def recount(self, alive: np.ndarray) -> None:
        """Count the ids removed since the run was built (compiled: numpy's sum of tens of
        millions of flags is slower)."""
        self.dead = self.size - int(kernels().count_live(alive, self.lo, self.hi))


def run_shape(geo: Geometry, n: int) -> tuple[TableSet, int, np.ndarray]:
    """The table set, directory bits and per-table drops of a run of ``n`` live ids."""
    if n >= 1 << 31:
        raise ValueError("a run holds fewer than 2**31 ids")
    ts = geo.for_size(n)
    dir_bits = ts.dir_bits(n)
    return ts, dir_bits, ts.drops(dir_bits)
