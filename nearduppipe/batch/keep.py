"""Which copy a group keeps (``dedup --keep``), and which records it drops.

A group is a connected component of the near-duplicate graph; near-duplicacy is not
transitive, so a component can chain A ~ B ~ C with A and C far apart. Dropping every member
but one would then drop C for being near B, a page that is itself dropped. So a record is
dropped only when it is near the record *kept* for its group: the rule picks a keeper among
the group's members, the members near the keeper (the same rule: 64-bit candidates, 512-bit
verdict, or an exact copy) are dropped, and the rest form new groups (the components of the
near graph among them), each picking its own keeper, until none is left. Every dropped record
is a near-duplicate of a kept one.

Rules (ties: the first in input order, which is also the default rule):

- ``first``: the first record (the order of the inputs, then of their records);
- ``canonical``: a record whose URL is its own ``<link rel=canonical>``, or the canonical
  URL another member points to (the HTML is needed; without it the rule falls back to first);
- ``shortest-url``: the shortest key (URL);
- ``https``: the first ``https://`` key;
- ``longest-text``: the longest extracted text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urldefrag, urljoin

import numpy as np

from ..index.search import kernels
from .near import csr, gather

__all__ = ["KEEP_RULES", "Kept", "canonical_link", "keep_groups"]

KEEP_RULES = ("first", "canonical", "shortest-url", "https", "longest-text")
HEAD_CHARS = 100_000  # a canonical link is in the head: look no further

_LINK = re.compile(r"<link\b[^>]*>", re.IGNORECASE)
_REL = re.compile(r"""\brel\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)
_HREF = re.compile(r"""\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)


def _attr(pattern: re.Pattern[str], tag: str) -> str | None:
    m = pattern.search(tag)
    if m is None:
        return None
    return next(g for g in m.groups() if g is not None)


def canonical_link(html: str | bytes | None, url: str) -> str | None:
    """The absolute URL of a page's ``<link rel=canonical href=...>`` (fragment dropped), or
    None. A regular expression over the head: the HTML is not parsed twice."""
    if html is None:
        return None
    head = html[:HEAD_CHARS]
    if isinstance(head, bytes):
        head = head.decode("utf-8", "replace")
    for tag in _LINK.findall(head):
        rel = _attr(_REL, tag)
        if rel is None or "canonical" not in rel.lower().split():
            continue
        href = _attr(_HREF, tag)
        if href:
            return urldefrag(urljoin(url, href.strip()))[0]
    return None


@dataclass
class Kept:
    """``keeper[i]``: the record kept in ``i``'s place (``i`` itself when kept); ``by``:
    groups whose keeper the rule chose over the group's first record, and groups where it
    fell back to the first (a tie, or nothing for the rule to go by)."""

    keeper: np.ndarray
    groups: int = 0
    by: Counter[str] = field(default_factory=Counter)


def _choose(
    members: list[int],
    rule: str,
    keys: Sequence[str],
    canonical: Sequence[str | None],
    lengths: np.ndarray,
) -> int:
    if rule == "canonical":
        targets = {canonical[m] for m in members if canonical[m]}
        hits = [m for m in members if keys[m] == canonical[m] or keys[m] in targets]
        return hits[0] if hits else members[0]
    if rule == "shortest-url":
        return min(members, key=lambda m: (len(keys[m]), m))
    if rule == "https":
        return next((m for m in members if keys[m].startswith("https://")), members[0])
    if rule == "longest-text":
        return min(members, key=lambda m: (-int(lengths[m]), m))
    return members[0]


def keep_groups(
    rep: np.ndarray,
    pairs: np.ndarray,
    rule: str = "first",
    keys: Sequence[str] = (),
    canonical: Sequence[str | None] = (),
    lengths: np.ndarray | None = None,
) -> Kept:
    """Keepers of ``n = len(rep)`` records (``rep``: :func:`.core.collapse`) from the near
    pairs of representatives ``(i, j, ...)``. ``keys``, ``canonical`` and ``lengths`` are
    read by the rules that need them. The groups are split over the representatives, never
    over pairs of records: a group of 200,000 exact copies is one representative."""
    if rule not in KEEP_RULES:
        raise ValueError(f"keep must be one of {', '.join(KEEP_RULES)}, not {rule!r}")
    n = len(rep)
    keeper = np.arange(n, dtype=np.int64)
    kept = Kept(keeper)
    if not n:
        return kept
    text_lengths = lengths if lengths is not None else np.zeros(n, dtype=np.int64)
    # representatives numbered 0..R-1 in input order (a representative is its first copy)
    reps, rid = np.unique(rep, return_inverse=True)
    rid = rid.ravel().astype(np.int64)
    size = len(reps)
    copies = np.bincount(rid, minlength=size)
    members_start, members = csr(rid, np.arange(n, dtype=np.int64), size)
    first = np.searchsorted(reps, np.asarray(pairs[:, 0], dtype=np.int64))
    second = np.searchsorted(reps, np.asarray(pairs[:, 1], dtype=np.int64))
    nbr_start, nbr = csr(np.concatenate([first, second]), np.concatenate([second, first]), size)
    label = kernels().components(size, np.ascontiguousarray(first), np.ascontiguousarray(second))
    group_start, group_reps = csr(label, np.arange(size, dtype=np.int64), size)
    records = np.bincount(label, weights=copies, minlength=size)
    work = [group_reps[group_start[g] : group_start[g + 1]] for g in np.flatnonzero(records > 1)]
    while work:
        current = work.pop()  # (representative numbers, ascending: input order)
        if int(copies[current].sum()) < 2:
            continue
        kept.groups += 1
        head = int(reps[current[0]])  # the group's first record
        if rule == "first":
            k = head
        else:
            group = np.sort(gather(members_start, members, current)).tolist()
            k = _choose(group, rule, keys, canonical, text_lengths)
        kept.by[rule if k != head else "first"] += 1
        own = int(rid[k])
        dropped = np.isin(current, nbr[nbr_start[own] : nbr_start[own + 1]]) | (current == own)
        keeper[gather(members_start, members, current[dropped])] = k
        rest = current[~dropped]
        if len(rest) > 1:
            work.extend(_components(rest, nbr_start, nbr))
        elif len(rest) == 1:
            work.append(rest)
    return kept


def _components(reps: np.ndarray, nbr_start: np.ndarray, nbr: np.ndarray) -> list[np.ndarray]:
    """Components of the near graph among representatives ``reps`` (ascending), each
    ascending."""
    sizes = nbr_start[reps + 1] - nbr_start[reps]
    src = np.repeat(np.arange(len(reps), dtype=np.int64), sizes)
    dst = gather(nbr_start, nbr, reps)
    inside = np.isin(dst, reps)
    local = np.searchsorted(reps, dst[inside])
    label = kernels().components(len(reps), np.ascontiguousarray(src[inside]), local)
    start, order = csr(label, np.arange(len(reps), dtype=np.int64), len(reps))
    return [reps[order[start[g] : start[g + 1]]] for g in np.flatnonzero(np.diff(start))]
