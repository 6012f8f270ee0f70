"""Pass 1 on the driver (:func:`.records.dedup_records`): the splits' results
(:mod:`.split_task`), taken in input order, into what the driver keeps of every record. The
driver reads no input here: the engine's tasks read each split once."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

import numpy as np

from ..fingerprint.rule import Rule
from .split_task import NAMED, SplitResult, Wants
from .splits import Split, SplitBoundaryError, renumber

__all__ = ["Walk", "read_splits"]

MAX_NAMES = 10_000


class Walk:
    """Every record's fingerprints and what the driver keeps of it (host, scope, and what the
    keep rule reads: key, canonical link), gathered split by split in input order
    (:meth:`add`), with the splits' numbers made the inputs' and their errors raised."""

    def __init__(self, rule: Rule, keep: str, keys: bool = False) -> None:
        # (--against reads every key; a keep rule other than first reads them too)
        self.wants = Wants(keys or keep != "first", keep == "canonical", rule.scope)
        self.fps = array("Q")
        self.wides = bytearray()
        self.ok = bytearray()
        self.lengths = array("q")
        self.skipped: Counter[str] = Counter()
        self.hosts: dict[str, int] = {}
        self.host_ids = array("i")
        self.scopes: dict[str, int] = {}  # (under a scope narrower than global: stores/scope.py)
        self.scope_ids = array("i")
        self.keys: list[str] = []  # (only for a keep rule or --against, which read them)
        self.canonical: list[str | None] = []
        self.names: dict[str, None] = {}  # every field seen, in order (an output's CSV header)
        self.csv_header: dict[str, None] = {}
        self.ignored: Counter[str] = Counter()
        self.with_text = 0
        self.carried = 0  # records whose fingerprints came with them (--fingerprint-field)
        self.extracted = 0  # records whose text or HTML is fingerprinted
        self.oversized: list[str] = []  # the first records over the size limit, named
        self.oversized_count = 0
        self.read = 0  # bytes of the inputs read by the tasks
        self._input = -1
        self._lines = 0  # lines (or WARC records) of the current input's earlier splits
        self._next_at: int | None = None  # where the previous split said the next begins
        # each split's (lines before it in its input, its first record, its records): pass 2
        self.spans: list[tuple[int, int, int]] = []

    def add(self, split: Split, result: SplitResult) -> None:
        if split.n != self._input:
            self._input, self._lines, self._next_at = split.n, 0, None
        lines, records = self._lines, len(self.fps)
        if result.error is not None:
            e = result.error
            raise type(e)(renumber(str(e), lines, records))
        self._check_bounds(split, result)
        self.spans.append((lines, records, result.count))
        self._lines += result.units
        self.read += result.read
        self.fps.extend(result.fps)
        self.wides += result.wides
        self.ok += result.ok
        self.lengths.extend(result.lengths)
        self.skipped.update(result.skipped.values())
        self.host_ids.extend(_merged(result.host_ids, result.hosts, self.hosts))
        self.scope_ids.extend(_merged(result.scope_ids, result.scopes, self.scopes))
        if self.wants.keys:
            self.keys += [renumber(k, lines, records) if "\0" in k else k for k in result.keys]
        self.canonical += result.canonical
        if len(self.names) < MAX_NAMES:
            self.names.update(result.names)
        self.csv_header.update(dict.fromkeys(result.csv_header))
        self.ignored.update(result.ignored)
        self.with_text += result.with_text
        self.carried += result.carried
        self.extracted += result.extracted
        self.oversized_count += result.oversized_count
        for name in result.oversized[: NAMED - len(self.oversized)]:
            self.oversized.append(renumber(name, lines, records))

    def restart(self, split: Split, result: SplitResult) -> Split | None:
        """The split to read again, from where the split before said the next record starts,
        when its task found another first record (a zstd frame's or gzip member's magic number
        inside another's data: an archived ``.warc.gz`` in a ``.warc.gz``, or no first
        record there); None when it agrees. The split before was read from a true start (the
        first from the file's), so its word is taken; the split read again stops the run if it
        disagrees still (:meth:`add`)."""
        if split.how not in ("zstd", "members") or split.n != self._input:
            return None
        expected = self._next_at
        if expected is None or expected == split.start or result.first_at == expected:
            return None
        if result.first_at is None and not split.start <= expected < split.end:
            return None  # (no record starts in it: the one before runs past it)
        return replace(split, start=min(expected, split.end))

    def _check_bounds(self, split: Split, result: SplitResult) -> None:
        """Each split starts where the one before said the next record starts (.splits)."""
        if split.how not in ("zstd", "members"):
            return
        expected = self._next_at
        if result.first_at is not None:
            if expected is not None and expected != result.first_at:
                raise SplitBoundaryError(
                    f"{split.source}: its splits disagree on where a record starts (offset "
                    f"{expected:,} or {result.first_at:,}): read it as one split "
                    "(docs/batch.md)"
                )
            self._next_at = result.next_at
        elif expected is not None and split.start <= expected < split.end:
            raise SplitBoundaryError(
                f"{split.source}: no record found at offset {expected:,}, where one starts"
            )


def _merged(ids: array[int], names: dict[str, int], table: dict[str, int]) -> array[int]:
    """A split's ids of ``names`` as the ids of ``table`` (extended with new names)."""
    if not names:
        return array("i")
    to = np.array([table.setdefault(name, len(table)) for name in names], dtype=np.int32)
    mapped = to[np.frombuffer(ids, dtype=np.int32)] if len(ids) else np.zeros(0, np.int32)
    out = array("i")
    out.frombytes(mapped.tobytes())
    return out


def read_splits(
    run: Callable[[list[Split]], Iterable[SplitResult]], splits: list[Split], walk: Walk
) -> Iterator[tuple[Split, SplitResult]]:
    """Each split with its result, in order, as :meth:`Walk.add` takes them: ``run`` is the
    engine's map; a split whose task started at a false first record (:meth:`Walk.restart`)
    is run again, alone, and replaces its entry in ``splits``: pass 2 reads what pass 1 read.
    The caller adds each result to ``walk`` before taking the next."""
    for k, (split, result) in enumerate(zip(splits, run(list(splits)), strict=True)):
        again = walk.restart(split, result)
        if again is not None:
            split = splits[k] = again
            (result,) = list(run([again]))
        yield split, result
