"""The shared core of every dedup engine: pure functions over numpy arrays that the local,
Spark and Dask engines run in the same order, so every engine gives the same answer.

1. **fingerprint map** (:func:`fingerprint_job`, in :func:`.split_task.read_split`: each split
   of the inputs read once, by one task): records → ``(fp, wide)``, with the same
   :mod:`nearduppipe.fingerprint.page` code wherever it runs;
2. **exact-copy collapse** (:func:`collapse`): records with equal fingerprints become one
   representative, so a page copied a thousand times is joined once;
3. **block-permutation join** (:func:`explode`, :func:`partition_pairs`): each representative
   goes under every table's key of :func:`join_tables` (Manku et al.'s pigeonhole tables with
   ``radius + 1`` blocks: two fingerprints within the radius agree on some whole block); rows
   sharing ``(table, key)`` are one group, whose pairs within the radius come from a compiled
   self-join (:class:`~nearduppipe.index.search.BlockIndex`) or, for small groups, from all of
   their pairs. A pair is reported only by the *first* table on which the two agree, so no
   distinct step is needed after the shuffle;
4. **512-bit verdict** (:func:`~.pairs.verdicts`) on each candidate, where it was found;
5. **groups and the keep rule**: :mod:`.keep`, on the driver.

:class:`.near.NearPairs` holds the pairs of representatives; it counts the pairs of records
they stand for and lists them only when asked (``--pairs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..fingerprint.page import Fingerprinted, FingerprintParams, fingerprint_html, fingerprint_text
from ..fingerprint.rule import Rule
from ..fingerprint.text import normalise_whitespace
from ..index.layout import Layout, Parts, table_keys
from ..index.search import BlockIndex
from .bounded import DEFAULT_MAX_RECORD_BYTES, OVERSIZED
from .pairs import _pairs_sharing_keys, verdicts
from .precomputed import precomputed

__all__ = [
    "Fields",
    "Job",
    "collapse",
    "explode",
    "fingerprint_job",
    "join_tables",
    "partition_pairs",
    "sort_pairs",
]

# text, HTML, parameters; or the fingerprints the record carries (then no text: nothing to do)
Job = tuple[str | None, str | bytes | None, FingerprintParams, Fingerprinted | None]
_U64 = np.uint64
TOO_LARGE = "record_too_large"  # the reason a record over --max-record-bytes has no fingerprint
SMALL_GROUP = 48  # groups up to this size: all their pairs, vectorised; larger: a self-join
MIN_SUB_BITS = 16  # keys of large groups (rest_parts): shorter ones narrow too little
SUB_GROUP = 8  # with sub-blocks, groups above this size go through them (k = 3: n / 65,536 rows)


def _as_text(value: Any) -> str | None:
    """A text field's value: a string, or a list of strings (paragraphs) joined by newlines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return None


@dataclass(frozen=True)
class Fields:
    """Which fields of a record hold its text, its HTML and its key (picklable: executors
    build their jobs with it)."""

    text: str
    html: str
    key: str
    fingerprint: str | None = None  # the field of fingerprints a crawl wrote (.precomputed)
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES  # larger records are not read (.bounded)

    def job(self, record: dict[str, Any], params: FingerprintParams, where: str = "") -> Job:
        """What fingerprints ``record``: its carried fingerprints when it has usable ones
        (:func:`.precomputed.precomputed`, which raises for fingerprints of other settings),
        else its text or HTML; nothing for a record over the size limit, not read."""
        if OVERSIZED in record:
            return None, None, params, Fingerprinted(None, TOO_LARGE, 0)
        raw = record.get(self.text)
        text = _as_text(raw)
        carried = precomputed(record, self.fingerprint, params, where or "a record")
        if carried is not None:
            # (the text's length, for --keep longest-text, when the record has its text)
            n = len(normalise_whitespace(text[: params.limits.max_text_chars])) if text else 0
            return None, None, params, Fingerprinted(carried, None, n)
        html = record.get(self.html) if raw is None else None
        return text, html if isinstance(html, bytes) else _as_text(html), params, None

    def key_of(self, record: dict[str, Any], i: int) -> str:
        value = record.get(self.key)
        return value if isinstance(value, str) and value else f"#{i + 1}"


def fingerprint_job(job: Job) -> Fingerprinted:
    text, html, params, carried = job
    if carried is not None:
        return carried
    if text is not None:
        return fingerprint_text(text, params)
    if html is not None:
        return fingerprint_html(html, None, params)
    return Fingerprinted(None, "no_text", 0)


def collapse(fps: np.ndarray, wides: np.ndarray, has_wide: np.ndarray) -> np.ndarray:
    """``rep[i]``: the first record with exactly ``i``'s fingerprints (and wide flag)."""
    n = len(fps)
    if not n:
        return np.zeros(0, dtype=np.int64)
    rows = np.column_stack([fps.astype(_U64), wides.astype(_U64), has_wide.astype(_U64)])
    view = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.dtype.itemsize * 10)))
    _, first, inverse = np.unique(view.ravel(), return_index=True, return_inverse=True)
    rep: np.ndarray = first[inverse.ravel()].astype(np.int64)
    return rep


def join_tables(radius: int, blocks: int | None = None) -> list[Parts]:
    """The join's tables: one per choice of ``blocks - radius`` of ``blocks`` blocks (default
    ``radius + 1``: one block per table, 9 tables of 7-bit keys at the default radius 8, 4 of
    16 bits at the paper's k = 3). More blocks give longer keys and smaller groups, at
    ``C(blocks, radius)`` rows per fingerprint."""
    b = blocks if blocks is not None else radius + 1
    if b <= radius:
        raise ValueError(f"the join needs more blocks than the radius ({radius}), not {b}")
    return Layout(distance=radius, blocks=b).tables()


def explode(
    ids: np.ndarray, fps: np.ndarray, tables: list[Parts]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(table, key, row)`` for every row under every table: the shuffle's input."""
    t = np.repeat(np.arange(len(tables), dtype=np.int64), len(ids))
    keys = np.concatenate([table_keys(fps.astype(_U64), parts) for parts in tables])
    rows = np.tile(np.arange(len(ids), dtype=np.int64), len(tables))
    return t, keys.astype(np.int64), rows


def rest_parts(parts: Parts, radius: int) -> list[Parts] | None:
    """Keys on the bits outside a table's key (each as parts for :func:`table_keys`): those
    bits cut into ``radius + 2`` sub-blocks, one key per pair of them. Two fingerprints of one
    group (equal table keys) within ``radius`` differ in at most ``radius`` sub-blocks, so
    they agree on two, that is on some key (pigeonhole again). Pairs of sub-blocks, not single
    ones: a template's pages share bits, and a sub-block made mostly of shared bits puts a
    large group's rows in a few buckets (a 200,000-row group at 10 M took a Spark worker to
    6 GB); two sub-blocks of ~10 bits keep ~16 free bits even then. ``None`` when a key would
    be shorter than :data:`MIN_SUB_BITS`: it would match too often to narrow anything."""
    used = {b for shift, width in parts for b in range(shift, shift + width)}
    free = [b for b in range(63, -1, -1) if b not in used]
    pieces = radius + 2
    base, extra = divmod(len(free), pieces)
    if 2 * base < MIN_SUB_BITS:
        return None
    subs: list[list[int]] = []
    at = 0
    for p in range(pieces):
        subs.append(free[at : at + base + (1 if p < extra else 0)])
        at += len(subs[-1])
    out: list[Parts] = []
    for x, first in enumerate(subs):
        for second in subs[x + 1 :]:
            runs: list[tuple[int, int]] = []
            for b in first + second:
                if runs and runs[-1][0] - 1 == b:  # (shift, width): extend the run downwards
                    runs[-1] = (b, runs[-1][1] + 1)
                else:
                    runs.append((b, 1))
            out.append(tuple(runs))
    return out


def _sub_block_candidates(
    pos: np.ndarray, group: np.ndarray, fps: np.ndarray, subs: list[Parts]
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(a, b)`` of positions ``pos`` (rows of large groups ``group``, one table)
    that share a group and one of the sub-blocks ``subs``: every pair of them within the
    radius, among few others, from one sort (no per-group loop). Each pair once."""
    m = len(pos)
    rank = np.unique(group, return_inverse=True)[1].astype(_U64).ravel()
    width = max(sum(w for _, w in parts) for parts in subs)
    s_bits = max(1, (len(subs) - 1).bit_length())
    g_bits = max(1, int(np.max(rank)).bit_length())
    head = rank << _U64(s_bits + width)
    keys = np.concatenate(
        [head | _U64(s << width) | table_keys(fps[pos], parts) for s, parts in enumerate(subs)]
    )
    i, j = _pairs_sharing_keys(keys, g_bits + s_bits + width)
    a, b = pos[i % m], pos[j % m]
    span = int(np.max(pos)) + 1
    code = np.unique(np.minimum(a, b) * span + np.maximum(a, b))
    return code // span, code % span


def _group_candidates(
    starts: np.ndarray,
    sizes: np.ndarray,
    group_table: np.ndarray,
    fps: np.ndarray,
    radius: int,
    tables: list[Parts],
) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(a, b)`` of pairs inside groups (rows sorted so groups are contiguous) that
    may be within ``radius``: every pair of a small group; in larger ones, the pairs that
    also share a sub-block of the bits outside their table's key (:func:`rest_parts`; at
    k = 3 groups hold ``n / 65,536`` rows, ~150 at 10 M, whose all pairs grow as ``n^2``:
    this is one sort per table instead), or a self-join per group (:class:`BlockIndex`)
    where sub-blocks would be too short to narrow (radius 5 and up: groups of ``n / 128``
    rows at the default radius 8)."""
    firsts: list[np.ndarray] = []
    seconds: list[np.ndarray] = []
    n = int(sizes.sum()) if len(sizes) else 0
    subs = [rest_parts(parts, radius) for parts in tables]
    limit = np.array([SMALL_GROUP if x is None else SUB_GROUP for x in subs])[group_table]
    small = (sizes >= 2) & (sizes <= limit)
    if small.any():
        group = np.repeat(np.arange(len(sizes)), sizes)
        in_small = np.repeat(small, sizes)
        for shift in range(1, min(SMALL_GROUP, n)):
            same = (group[shift:] == group[:-shift]) & in_small[shift:]
            if not same.any():
                break
            pos = np.flatnonzero(same)
            firsts.append(pos)
            seconds.append(pos + shift)
    large = sizes > limit
    for t in np.unique(group_table[large]).tolist():
        these = np.flatnonzero(large & (group_table == t))
        if subs[t] is None:
            for g in these.tolist():
                s, size = int(starts[g]), int(sizes[g])
                index = BlockIndex(Layout(distance=radius))
                index.add_many(fps[s : s + size])
                found = index.pairs()
                firsts.append(found[:, 0] + s)
                seconds.append(found[:, 1] + s)
            continue
        group = np.repeat(these, sizes[these])
        pos = np.repeat(starts[these] - np.cumsum(sizes[these]) + sizes[these], sizes[these])
        pos += np.arange(len(pos))
        a, b = _sub_block_candidates(pos.astype(np.int64), group, fps, subs[t])
        firsts.append(a)
        seconds.append(b)
    if not firsts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    return np.concatenate(firsts).astype(np.int64), np.concatenate(seconds).astype(np.int64)


def _group_order(table: np.ndarray, key: np.ndarray, tables: list[Parts]) -> np.ndarray:
    """An order of the rows that makes each ``(table, key)`` contiguous: one sort of packed
    ``(table, key, row)`` values where they fit 64 bits (a lexsort took half the join)."""
    n = len(table)
    t_bits = max(1, (len(tables) - 1).bit_length())
    k_bits = max(sum(w for _, w in parts) for parts in tables)
    i_bits = max(1, (n - 1).bit_length())
    if t_bits + k_bits + i_bits > 64:
        order: np.ndarray = np.lexsort((key, table))
        return order
    packed = (table.astype(_U64) << _U64(k_bits)) | key.astype(_U64)
    packed = np.sort((packed << _U64(i_bits)) | np.arange(n, dtype=_U64))
    rows: np.ndarray = (packed & _U64((1 << i_bits) - 1)).astype(np.int64)
    return rows


def partition_pairs(
    table: np.ndarray,
    key: np.ndarray,
    ids: np.ndarray,
    fps: np.ndarray,
    wides: np.ndarray,
    has_wide: np.ndarray,
    tables: list[Parts],
    rule: Rule,
    split: int | None = None,
) -> np.ndarray:
    """The near-duplicate pairs ``(i, j, d, wide_d)`` (global ids, ``i < j``) of the rows of
    one partition of the shuffle, which holds every row of each ``(table, key)`` it has.
    Each pair comes from the first table its two fingerprints agree on, so the partitions'
    results together hold every near pair within the radius exactly once. With ``split``
    (queries against a stored set: ids below it stored, from it on queries), only the pairs
    of a stored row and a query are verified and returned."""
    if not len(ids):
        return np.zeros((0, 4), dtype=np.int64)
    order = _group_order(table, key, tables)
    table, key, ids = table[order], key[order], ids[order]
    fps, wides, has_wide = fps[order].astype(_U64), wides[order].astype(_U64), has_wide[order]
    cut = np.flatnonzero((table[1:] != table[:-1]) | (key[1:] != key[:-1])) + 1
    starts = np.concatenate([[0], cut]).astype(np.int64)
    sizes = np.diff(np.concatenate([starts, [len(ids)]]))
    a, b = _group_candidates(starts, sizes, table[starts], fps, rule.radius, tables)
    if split is not None:
        cross = (ids[a] >= split) != (ids[b] >= split)
        a, b = a[cross], b[cross]
    d = np.bitwise_count(fps[a] ^ fps[b]).astype(np.int64)
    keep = d <= rule.radius
    t = table[a]
    for earlier, parts in enumerate(tables):  # reported by the first table that agrees
        agree = table_keys(fps[a], parts) == table_keys(fps[b], parts)
        keep &= ~((t > earlier) & agree)
    a, b, d = a[keep], b[keep], d[keep]
    near, dw = verdicts(np.stack([a, b, d], axis=1), wides, has_wide.astype(bool), rule)
    i, j = ids[a][near], ids[b][near]
    return np.stack([np.minimum(i, j), np.maximum(i, j), d[near], dw[near]], axis=1)


def sort_pairs(parts: list[np.ndarray]) -> np.ndarray:
    pairs = np.concatenate(parts) if parts else np.zeros((0, 4), dtype=np.int64)
    pairs = pairs.astype(np.int64).reshape(-1, 4)
    result: np.ndarray = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    return result
