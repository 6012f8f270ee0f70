"""Batch kernels, compiled by numba: the join of many queries with one run (the self-join
and ``--against``'s cross join) and connected components.

``nearduppipe dedup`` and the bulk paths (:meth:`nearduppipe.index.BlockIndex.pairs` and
``cross``, ``batch/``) call them once over a whole index; a crawl never does, so they are not
part of :func:`nearduppipe.index.compiled.warm` (compiled, or loaded from the disk cache, at
their first call). They are reached as ``kernels().cross_join`` and ``kernels().components``
(:func:`nearduppipe.index.runs.kernels`), like the per-call loops of :mod:`.compiled`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .compiled import _popcount, bucket

__all__ = ["components", "cross_groups", "cross_join"]

_U64 = np.uint64


@njit(cache=True, nogil=True)
def cross_groups(
    offsets: Any, shifts: Any, widths: Any, drops: Any, queries: Any
) -> tuple[Any, Any, Any]:
    """The queries' buckets in every table of a run (``qb[t, q]``) and, per table, the
    queries in bucket order (``orders[t]``, a counting sort) with each bucket's first
    position (``starts[t, b]``): :func:`cross_join`'s groups, made once for all its parts."""
    n_tables = offsets.shape[0]
    nb = offsets.shape[1] - 1
    nq = len(queries)
    qb = np.empty((n_tables, nq), dtype=np.int64)
    starts = np.zeros((n_tables, nb + 1), dtype=np.int64)
    orders = np.empty((n_tables, nq), dtype=np.int64)
    for t in range(n_tables):
        start = starts[t]
        for x in range(nq):
            b = bucket(queries[x], shifts, widths, t, drops[t])
            qb[t, x] = b
            start[b + 1] += 1
        for b in range(nb):
            start[b + 1] += start[b]
        fill = start[:nb].copy()
        for x in range(nq):
            b = qb[t, x]
            orders[t, fill[b]] = x
            fill[b] += 1
    return qb, starts, orders


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
    groups: tuple[Any, Any, Any],
    part: int = 0,
    parts: int = 1,
    upper: bool = False,
) -> tuple[Any, Any, Any]:
    """Every pair ``(q, j, d)`` of a query (``queries[q]``) and a live id of one run within
    ``radius`` (``dedup --against``: an export against a store, no pair of two stored ids
    looked at), the queries grouped by :func:`cross_groups`; with ``parts > 1``, only the
    buckets ``b`` with ``b % parts == part`` (one thread's share: the parts together give
    every pair once). ``upper``: the queries are the run's own ids (the self-join of batch
    dedup): only live ones, and pairs ``q < j``, count.

    Table by table, the queries are grouped by their bucket (a counting sort): the queries
    of a group probe the same buckets, so those are read once into one candidate list, and
    each query of the group is compared with the whole list in a loop the compiler
    vectorises (the smallest distance first; the rare query with a hit is looked at again).
    At 1 M queries against 1 M stored that is ~15 queries a group, and the bucket reads that
    bound a single query are shared. A pair is reported from the first table whose probed
    buckets hold it, as :func:`query_run` does."""
    n_tables = offsets.shape[0]
    nb = offsets.shape[1] - 1
    qb, starts, orders = groups
    cap = 1 << 16
    out_q = np.empty(cap, dtype=np.int64)
    out_j = np.empty(cap, dtype=np.int64)
    out_d = np.empty(cap, dtype=np.int64)
    m = 0
    cand = np.empty(1024, dtype=np.uint64)
    where = np.empty(1024, dtype=np.int64)
    for t in range(n_tables):
        start, order = starts[t], orders[t]
        for key in range(part, nb, parts):
            g0, g1 = start[key], start[key + 1]
            if g0 == g1:
                continue
            nc = 0
            for mi in range(n_masks[t]):
                b = key ^ masks[t, mi]
                lo, hi = offsets[t, b], offsets[t, b + 1]
                if nc + hi - lo > len(cand):
                    cand = _grown(cand, 2 * (nc + hi - lo))
                    where = _grown(where, len(cand))
                for j in range(lo, hi):
                    cand[nc] = tfps[t, j]
                    where[nc] = j
                    nc += 1
            for g in range(g0, g1):
                qi = order[g]
                if upper and not alive[qi]:
                    continue
                qx = queries[qi]
                low = _U64(64)
                for c in range(nc):
                    low = min(low, _popcount(cand[c] ^ qx))
                if low > radius:
                    continue
                for c in range(nc):
                    d = _popcount(cand[c] ^ qx)
                    if d > radius:
                        continue
                    seen = False
                    for t2 in range(t):
                        b2 = bucket(cand[c], shifts, widths, t2, drops[t2])
                        if _popcount(_U64(b2 ^ qb[t2, qi])) <= probes[t2]:
                            seen = True
                            break
                    i = tids[t, where[c]]
                    if seen or not alive[i] or (upper and i <= qi):
                        continue
                    if m == cap:
                        cap *= 2
                        out_q, out_j = _grown(out_q, cap), _grown(out_j, cap)
                        out_d = _grown(out_d, cap)
                    out_q[m], out_j[m], out_d[m] = qi, i, d
                    m += 1
    return out_q[:m], out_j[:m], out_d[:m]


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
