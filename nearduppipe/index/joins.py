"""Batch kernels, compiled by numba: the self-join of one run and connected components.

``nearduppipe dedup`` and the bulk paths (:meth:`nearduppipe.index.BlockIndex.pairs`,
``batch/``) call them once over a whole index; a crawl never does, so they are not part of
:func:`nearduppipe.index.compiled.warm` (compiled, or loaded from the disk cache, at their first
call). They are reached as ``kernels().self_join`` and ``kernels().components``
(:func:`nearduppipe.index.runs.kernels`), like the per-call loops of :mod:`.compiled`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .compiled import query_run

__all__ = ["components", "cross_join", "self_join"]

# one run's arrays, as query_run takes them (offsets, fps, ids, shifts, widths, drops, masks,
# mask counts, probes)
_Run = tuple[Any, Any, Any, Any, Any, Any, Any, Any, Any]


@njit(cache=True, nogil=True)
def self_join(
    offsets: Any,
    tfps: Any,
    tids: Any,
    shifts: Any,
    widths: Any,
    drops: Any,
    masks: Any,
    n_masks: Any,
    probes: Any,
    fps: Any,
    radius: int,
    alive: Any,
) -> tuple[Any, Any, Any]:
    """Every pair ``(i, j, d)``, ``i < j``, of live ids of one run holding all of ``fps``
    within ``radius``: :func:`query_run` for each id, in one compiled loop (batch dedup)."""
    run = (offsets, tfps, tids, shifts, widths, drops, masks, n_masks, probes)
    return _join(run, fps, radius, alive, True)


@njit(cache=True, nogil=True)
def cross_join(
    offsets: Any,
    tfps: Any,
    tids: Any,
    shifts: Any,
    widths: Any,
    drops: Any,
    masks: Any,
    n_masks: Any,
    probes: Any,
    queries: Any,
    radius: int,
    alive: Any,
) -> tuple[Any, Any, Any]:
    """Every pair ``(q, j, d)`` of a query (``queries[q]``) and a live id of one run within
    ``radius`` (``dedup --against``: an export against a store, no pair of two stored ids
    looked at)."""
    run = (offsets, tfps, tids, shifts, widths, drops, masks, n_masks, probes)
    return _join(run, queries, radius, alive, False)


@njit(cache=True, nogil=True)
def _join(run: _Run, queries: Any, radius: int, alive: Any, upper: bool) -> tuple[Any, Any, Any]:
    """:func:`query_run` for each query; ``upper``: the queries are the run's own ids, and
    only live ones, and pairs ``i < j``, count."""
    cap = 1 << 16
    out_i = np.empty(cap, dtype=np.int64)
    out_j = np.empty(cap, dtype=np.int64)
    out_d = np.empty(cap, dtype=np.int64)
    buf_ids = np.empty(4096, dtype=np.int64)
    buf_d = np.empty(4096, dtype=np.int64)
    m = 0
    for i in range(len(queries)):
        if upper and not alive[i]:
            continue
        args = (*run, queries[i], radius, alive)
        k = query_run(*args, buf_ids, buf_d, 0)
        if k > len(buf_ids):
            buf_ids = np.empty(2 * k, dtype=np.int64)
            buf_d = np.empty(2 * k, dtype=np.int64)
            k = query_run(*args, buf_ids, buf_d, 0)
        for x in range(k):
            j = buf_ids[x]
            if upper and j <= i:
                continue
            if m == cap:
                cap *= 2
                out_i, out_j, out_d = _grown(out_i, cap), _grown(out_j, cap), _grown(out_d, cap)
            out_i[m], out_j[m], out_d[m] = i, j, buf_d[x]
            m += 1
    return out_i[:m], out_j[:m], out_d[:m]


@njit(cache=True, nogil=True)
def _grown(a: Any, cap: int) -> Any:
    out = np.empty(cap, dtype=a.dtype)
    out[: len(a)] = a
    return out


@njit(cache=True, nogil=True)
def _root(parent: Any, x: int) -> int:
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@njit(cache=True, nogil=True)
def components(n: int, first: Any, second: Any) -> Any:
    """Union-find over the pairs ``(first[k], second[k])``: ``label[i]`` is the smallest index
    of i's connected component."""
    parent = np.arange(n)
    for k in range(len(first)):
        a = _root(parent, first[k])
        b = _root(parent, second[k])
        if a != b:
            # the smaller index becomes the root, so a component's label is its first item
            if a < b:
                parent[b] = a
            else:
                parent[a] = b
    for i in range(n):
        parent[i] = _root(parent, i)
    return parent
