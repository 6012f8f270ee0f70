"""Aliases (``Rule.aliases``, docs/verdicts.md): a page dropped for a kept page stays in the
index as a candidate standing for it. The steps the in-process stores (memory, sqlite) take on
their columns; the Redis store takes the same ones in its Lua check (``redis_search.lua``).

A column ``root1`` holds, per index id, 0 for an entry and 1 + the kept page's id for an alias.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..fingerprint.rule import Fingerprints, distances

__all__ = ["dead", "loaded_roots", "resolve"]

Hit = tuple[int, int, int | None]  # (id, 64-bit distance, wide distance)


def resolve(
    found: list[Hit],
    root1: np.ndarray,
    live: Callable[[int], bool],
    fingerprints_of: Callable[[int], Fingerprints],
    fps: Fingerprints,
    bound: int | None,
    exclude: int | None,
) -> list[Hit]:
    """``found`` (nearest first) with each alias replaced by the entry it stands for, each
    entry once at its best place. The alias judged the query on its own fingerprints; the entry
    must be ``live``, not ``exclude`` (the query's own key), and within ``bound`` of the query
    on the wide fingerprint; it is reported with its own distances."""
    out: list[Hit] = []
    seen: set[int] = set()
    for i, d, w in found:
        r = int(root1[i]) - 1
        if r < 0:
            if i not in seen:
                seen.add(i)
                out.append((i, d, w))
            continue
        if r in seen or r == exclude or not live(r):
            continue
        dr, wr = distances(fingerprints_of(r), fps)
        if bound is None or wr is None or wr > bound:
            continue
        seen.add(r)
        out.append((r, dr, wr))
    return out


def dead(alive: np.ndarray, root1: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """The live aliases whose kept page is not live, or is ``gone`` (about to be removed)."""
    roots = root1 - 1
    aliases = alive & (roots >= 0)
    out = np.zeros(len(alive), dtype=bool)
    out[aliases] = ~alive[roots[aliases]] | gone[roots[aliases]]
    return out


def loaded_roots(
    rids: np.ndarray, roots: np.ndarray | None
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Rows loaded in ascending row id ``rids``, each with its kept page's row id in ``roots``
    (-1: an entry): which are live, and their ``root1`` column. An alias whose kept page's row
    is absent, or is itself an alias, stands for nothing: not loaded live."""
    if roots is None or not bool((roots >= 0).any()):
        return None, None
    at = np.minimum(np.searchsorted(rids, roots), max(len(rids) - 1, 0))
    found = (roots >= 0) & (rids[at] == roots) & (roots[at] < 0)
    return (roots < 0) | found, np.where(found, at + 1, 0)
