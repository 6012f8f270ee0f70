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


def _components(
    members: list[int], rep: np.ndarray, adjacent: dict[int, set[int]]
) -> list[list[int]]:
    """Components of the near graph among ``members`` (each list in input order)."""
    by_rep: dict[int, list[int]] = {}
    for m in members:
        by_rep.setdefault(int(rep[m]), []).append(m)
    seen: set[int] = set()
    out: list[list[int]] = []
    for r in by_rep:
        if r in seen:
            continue
        seen.add(r)
        stack, comp = [r], []
        while stack:
            x = stack.pop()
            comp.extend(by_rep[x])
            for y in adjacent.get(x, ()):
                if y in by_rep and y not in seen:
                    seen.add(y)
                    stack.append(y)
        out.append(sorted(comp))
    return out


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
    read by the rules that need them."""
    if rule not in KEEP_RULES:
        raise ValueError(f"keep must be one of {', '.join(KEEP_RULES)}, not {rule!r}")
    n = len(rep)
    keeper = np.arange(n, dtype=np.int64)
    kept = Kept(keeper)
    if not n:
        return kept
    text_lengths = lengths if lengths is not None else np.zeros(n, dtype=np.int64)
    first = np.ascontiguousarray(pairs[:, 0], dtype=np.int64)
    second = np.ascontiguousarray(pairs[:, 1], dtype=np.int64)
    label = kernels().components(n, first, second)[rep]
    adjacent: dict[int, set[int]] = {}
    for i, j in zip(first.tolist(), second.tolist(), strict=True):
        adjacent.setdefault(i, set()).add(j)
        adjacent.setdefault(j, set()).add(i)
    order = np.argsort(label, kind="stable")
    cuts = np.flatnonzero(np.diff(label[order])) + 1
    work = [g.tolist() for g in np.split(order, cuts) if len(g) > 1]
    while work:
        members = work.pop()
        if len(members) < 2:
            continue
        kept.groups += 1
        k = _choose(members, rule, keys, canonical, text_lengths)
        kept.by[rule if k != members[0] else "first"] += 1
        near = adjacent.get(int(rep[k]), set())
        rest = []
        for m in members:
            if m != k and (rep[m] == rep[k] or int(rep[m]) in near):
                keeper[m] = k
            elif m != k:
                rest.append(m)
        if len(rest) > 1:
            work.extend(_components(rest, rep, adjacent))
    return kept
