"""Batch near-duplicate detection over exported records: one or several inputs, each a Scrapy
feed (JSON lines, JSON array, CSV or XML; plain, gzip or zstd: :mod:`nearduppipe.batch.feeds`)
or a WARC file (its HTML responses: :mod:`nearduppipe.batch.warc`), in the order given.

The job is four steps, each a seam (:func:`dedup_records`): (1) the engine's fingerprint
map: each split of the inputs (:mod:`.splits`) read once by one task, which returns its
records' fingerprints and keys, gathered in input order (:class:`.walk.Walk`); (2) the
search: exact copies collapsed (:func:`.core.collapse`), then the engine's join, every near
pair under the crawl's rule (64-bit candidates, wide verdict); (3) groups and the ``--keep``
rule (:mod:`.keep`: a record is dropped only when it is near its group's kept record); (4)
the output. The engine is local (:mod:`.engine_local`, a process pool), Spark
(:mod:`.engine_spark`) or Dask (:mod:`.engine_dask`); all give the same answer. "First" is
the inputs' order, then each input's record order. Records without usable text are kept and
counted.

Two streaming passes over the inputs keep memory independent of the texts' size: the first,
in the engine's tasks, keeps 77 bytes per record on the driver (both fingerprints, host
number, a flag); the second, in the tasks again, reads each split once more (its own data),
writes its kept records as a part of the output and collects the keys of group members and the
texts of the few pairs an HTML report shows (:mod:`.write_task`); the driver writes the parts
to the output in input order, reading no input.

Written kept records keep their input's form: a feed record as it was read (its raw JSON text
when both sides are JSON), a WARC record as a JSON line naming it (:func:`.warc.locator`): so
an output with a WARC input is JSON lines.
"""

from __future__ import annotations

import io
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, TextIO

import numpy as np

from ..errors import NearDupError
from ..fingerprint.page import FingerprintParams
from ..fingerprint.rule import Rule
from ..index.words import wide_words
from ..stores.checks import clean_text
from ..stores.report import Report, build_report
from ..stores.scope import mask_of
from .against import (
    Against,
    AgainstMatch,
    AgainstResult,
    add_kept_records,
    against_rule,
    judge_records,
)
from .bounded import DEFAULT_MAX_RECORD_BYTES
from .compression import FeedError
from .core import Fields, collapse
from .engine_local import Engine, LocalEngine
from .inputs import Input, check_extras, sources_of
from .keep import KEEP_RULES, keep_groups
from .near import NearPairs
from .pairs_out import write_pairs
from .precomputed import DEFAULT_FIELD
from .source import anchored
from .split_task import SplitResult
from .splits import Split, plan_splits
from .unicode_out import escape_surrogates
from .walk import Walk, read_splits
from .write_task import parts_dir, text_clusters, write_pass

__all__ = ["DedupResult", "MissingFieldError", "dedup_records"]


class MissingFieldError(NearDupError, ValueError):
    """No record has the text field (nor the HTML field): almost surely a wrong field name."""


@dataclass
class DedupResult:
    report: Report
    kept: int  # records written (or that would be written) to the output
    skipped: dict[str, int]
    total: int
    fields: list[str] = field(default_factory=list)
    # WARC records that are not pages (not a response, or not HTML), by kind: not in ``total``
    ignored: dict[str, int] = field(default_factory=dict)
    inputs: list[Input] = field(default_factory=list)
    # the near pairs, held by representatives (.near): .chunks() lists them, len() counts
    near: NearPairs = field(default_factory=NearPairs)
    keys: dict[int, str] = field(default_factory=dict)  # (of every record in a pair)
    keep: str = "first"  # the --keep rule
    # keeper[i]: the record kept in record i's place (i itself when i is kept)
    keeper: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # groups whose keeper the rule chose over their first record, and groups that kept the first
    chosen_by: dict[str, int] = field(default_factory=dict)
    engine: str = "local"
    carried: int = 0  # records whose fingerprints came with them (--fingerprint-field)
    extracted: int = 0  # records whose text or HTML was fingerprinted here
    against: AgainstResult | None = None  # --against: kept records near a stored page
    # records over max_record_bytes (not read; kept): how many, and the first ones named
    oversized: int = 0
    oversized_named: list[str] = field(default_factory=list)
    pairs_written: int = 0  # rows written to ``pairs`` (dedup_records' argument)

    @property
    def pairs(self) -> np.ndarray:
        """Every near pair of records ``(a, b, d, wide_d)`` at once (:meth:`NearPairs.array`:
        ``c(c-1)/2`` rows for ``c`` exact copies; stream ``near.chunks()`` for large sets)."""
        return self.near.array()


Progress = Callable[..., Any]  # tqdm-like: Progress(total=, desc=, unit=, ...) -> bar


def _no_bar(**_: Any) -> Any:
    class Bar:
        n = 0

        def update(self, k: int = 1) -> None:
            self.n += k

        def close(self) -> None:
            pass

    return Bar()


def _output_format(sources: list[Input], given: str | None) -> str:
    warc = any(s.is_warc for s in sources)
    formats = {s.format for s in sources}
    fmt = given or (formats.pop() if len(formats) == 1 and not warc else "jsonl")
    if warc and fmt != "jsonl":
        raise FeedError(f"with a WARC input the kept records are written as JSON lines, not {fmt}")
    return fmt


def dedup_records(
    path: str | Path | Input | Sequence[str | Path | Input],
    text_field: str = "text",
    html_field: str = "html",
    key_field: str = "url",
    rule: Rule | None = None,
    params: FingerprintParams | None = None,
    output: TextIO | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    input_format: str | None = None,
    output_format: str | None = None,
    keep_texts: bool = True,
    keep: str = "first",
    engine: Engine | None = None,
    fingerprint_field: str | None = DEFAULT_FIELD,
    against: Against | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    pairs: IO[bytes] | None = None,
    pairs_format: str = "jsonl",
) -> DedupResult:
    """Deduplicate the inputs at ``path`` (a file, glob or :class:`Input`, or a sequence of
    them: the order decides which copy is first); write kept records to ``output`` (in
    ``output_format``, default the inputs' if they share one, else JSON lines). ``keep``: the
    rule choosing each group's kept record (:mod:`.keep`). ``engine``: where the fingerprint
    map and the join run (default a :class:`LocalEngine` of ``workers`` processes; the caller
    closes an engine it passes). ``progress`` makes progress bars (e.g. tqdm). Raises
    :class:`MissingFieldError` when no record has the text or HTML field,
    :class:`~.feeds.FeedError` for an input that cannot be read. ``fingerprint_field``: the
    field of fingerprints a crawl wrote (``NEARDUP_FINGERPRINT_FIELD``), used instead of
    extracting when made under ``params`` (:mod:`.precomputed`; other settings raise
    :class:`~.precomputed.MixedFingerprintsError`). ``against``: kept records near a page of
    its store are dropped too, and named (:mod:`.against`); its ``add`` runs last, once
    ``output`` and ``pairs`` are written, so a run that fails before it adds nothing (a record
    the store then refuses, another writer having stored a near copy meanwhile, is dropped:
    ``output`` is written again; one that cannot be emptied, a FIFO or a device, keeps it:
    ``against.result.refused_written``). ``pairs``: every near pair written there in
    ``pairs_format`` (:func:`.pairs_out.write_pairs`), before the adds.
    ``max_record_bytes``: a record larger than this is not read (:mod:`.bounded`): a JSON
    line or WARC record is kept unfingerprinted (``record_too_large``), counted and named;
    in a JSON array, CSV or XML it stops the job (:class:`~.bounded.RecordTooLargeError`)."""
    if keep not in KEEP_RULES:
        raise ValueError(f"keep must be one of {', '.join(KEEP_RULES)}, not {keep!r}")
    bar_of = progress or _no_bar
    params = params or FingerprintParams()
    if against is not None:  # (the store's rule and scope: its fingerprints answer no other)
        given = rule
        rule = against_rule(
            against.store, scope=(given or against.store.rule).scope,
            extractor=params.extractor, rule=given,
        )  # fmt: skip
        # and its extraction version: its pages' texts were extracted so (fingerprint.versions;
        # after against_rule, which refuses another extractor, whose versions are others)
        params = replace(params, extraction=against.store.rule.extraction)
    rule = rule or Rule()
    engine = engine or LocalEngine(workers)
    fields = Fields(text_field, html_field, key_field, fingerprint_field, max_record_bytes)
    sources = sources_of(path, input_format)
    if not getattr(engine, "shares_files", False):  # (its tasks may run in other folders)
        sources = [anchored(s) for s in sources]
    check_extras(sources)
    out_fmt = _output_format(sources, output_format) if output is not None else None
    walk = Walk(rule, keep, keys=against is not None)

    # 1. fingerprints of every record, in input order: each split of the inputs read once by
    # one of the engine's tasks (the driver reads none)
    splits = plan_splits(sources, engine.cores)
    total_size = sum(s.path.stat().st_size for s in sources)
    bar = bar_of(total=total_size, desc="fingerprinting", unit="B", unit_scale=True)

    def run(todo: list[Split]) -> Iterator[SplitResult]:
        return engine.read(todo, fields, params, walk.wants)

    for split, result in read_splits(run, splits, walk):
        walk.add(split, result)
        bar.update(min(walk.read, total_size) - bar.n)
    bar.update(total_size - bar.n)
    bar.close()
    fps, wides, ok, lengths, skipped = walk.fps, walk.wides, walk.ok, walk.lengths, walk.skipped
    feeds = [s for s in sources if not s.is_warc]
    all_csv = bool(feeds) and all(s.format == "csv" for s in feeds)
    header = list(walk.csv_header) if all_csv else list(walk.names)
    n = len(fps)
    if n and not walk.with_text:
        found = ", ".join(list(walk.names)[:20]) or "none"
        raise MissingFieldError(
            f"no record has the field --text-field {text_field!r} nor --html-field "
            f"{html_field!r} (fields found: {found})"
        )
    fp = np.frombuffer(fps, dtype=np.uint64) if n else np.zeros(0, dtype=np.uint64)
    index = np.flatnonzero(np.frombuffer(bytes(ok), dtype=np.uint8))
    wide_fps = np.frombuffer(bytes(wides), dtype="<u8").reshape(n, 8).astype(np.uint64)
    query, query_wide = fp[index], wide_fps[index]
    has_wide = np.ones(len(index), dtype=bool)
    if walk.scopes:  # each record's fingerprints XORed with its scope's masks: distances kept
        masks = [mask_of(name) for name in walk.scopes]
        sid = np.frombuffer(walk.scope_ids, dtype=np.int32)[index]
        query = query ^ np.array([m.fp for m in masks], dtype=np.uint64)[sid]
        query_wide = query_wide ^ np.stack([wide_words(m.wide) for m in masks])[sid]

    # 1b. --against: every record against the store first (a key's last record only), so
    # that a record dropped later is near a record this run keeps or a stored page
    by_store: dict[int, AgainstMatch] = {}
    if against is not None:
        by_store, live = judge_records(
            against, engine, rule, index, (query, query_wide, has_wide), walk.keys
        )
        index, query, query_wide = index[live], query[live], query_wide[live]
        has_wide = has_wide[live]

    # 2. the search: exact copies collapsed, then the join among their representatives
    matching = bar_of(total=len(index), desc=f"matching ({engine.name})", unit="rec")
    rep = collapse(query, query_wide, has_wide)
    reps = np.flatnonzero(rep == np.arange(len(index)))
    joined = engine.search(query[reps], query_wide[reps], has_wide[reps], rule)
    rep_pairs = joined  # (in place: the engine's array is this job's own)
    rep_pairs[:, 0], rep_pairs[:, 1] = reps[joined[:, 0]], reps[joined[:, 1]]
    matching.update(len(index))
    matching.close()

    # 3. groups and the keep rule (on the query records, then back to record numbers)
    kept_by = keep_groups(
        rep,
        rep_pairs,
        keep,
        [walk.keys[i] for i in index.tolist()] if walk.keys else (),
        [walk.canonical[i] for i in index.tolist()] if walk.canonical else (),
        np.frombuffer(lengths, dtype=np.int64)[index] if n else None,
    )
    label = np.arange(n, dtype=np.int64)
    label[index] = index[kept_by.keeper]

    near = NearPairs(index, rep, rep_pairs, has_wide)  # (pairs of records: never listed here)

    # 4. output: each split read again by its task (pass 2, .write_task), which writes its
    # kept records as a part; the parts written to -o in input order (the driver reads none);
    # then the pairs; then (--add) the store's adds, last: a run that fails before them adds
    # nothing (a re-run gives the same output), and -o holds what the store took (a record
    # another writer stored a near copy of meanwhile is dropped: -o written again)
    def pass2(target: TextIO | None) -> tuple[dict[int, str], dict[str, str], int]:
        what = _write_plan(label, by_store, near, keep_texts, n)
        what.update(
            fingerprints=(fp, wide_fps, ok), fields=fields, params=params, out_fmt=out_fmt,
            header=header, keep_texts=keep_texts, first_format=sources[0].format,
        )  # fmt: skip
        bar = bar_of(total=n, desc="writing" if target else "reading keys", unit="rec")
        with parts_dir(engine, target) as part_dir:  # (the parts on disk, not in memory)
            got = write_pass(engine.write, splits, walk.spans, what, target, bar, part_dir)
        bar.close()
        return got

    adding = against is not None and against.add
    start = _rewind_point(output) if adding and output is not None else None
    keys, texts, kept = pass2(output)
    if output is not None:
        output.flush()  # (a write's error, a full disk, raised here: before any add)
    pairs_written = 0
    if pairs is not None:
        pairs_written = write_pairs(pairs, near.chunks(), keys, pairs_format)
        pairs.flush()
    if against is not None and against.add:
        before = len(by_store)
        again = output is None or start is not None  # (-o can be written again)
        ok_mask = np.frombuffer(bytes(ok), dtype=bool)
        add_kept_records(against, label, by_store, walk.keys, fp, wide_fps, ok_mask, regroup=again)
        against.store.flush()
        refused = len(by_store) - before
        if refused and again:  # (labels moved: pass 2 again, -o emptied first)
            if output is not None and start is not None:
                output.seek(start)
                output.truncate()
            keys, texts, kept = pass2(output)
            if output is not None:
                output.flush()
        elif refused:  # (written to a FIFO or a device: there they stay, and are named)
            against.result.refused_written = refused
    against_result = None
    if against is not None:
        against_result = against.result
        against_result.matches = sorted(by_store.values(), key=lambda m: m.record)
    dropped = np.zeros(n, dtype=bool)
    dropped[list(by_store)] = True
    alive = (label == np.arange(n)) & ~dropped
    host_names = list(walk.hosts)
    ids = np.frombuffer(walk.host_ids, dtype=np.int32) if n else np.zeros(0, dtype=np.int32)
    per_host = np.bincount(ids[alive], minlength=len(host_names))
    unique_by_host = Counter(
        {escape_surrogates(host_names[h]): int(c) for h, c in enumerate(per_host) if c}
    )
    decisions = [
        (keys[i], keys[int(label[i])], int(np.bitwise_count(fp[i] ^ fp[label[i]])))
        for i in np.flatnonzero(label != np.arange(n)).tolist()
    ]
    if against_result is not None:  # (the stored page each one matched)
        decisions += [
            (m.key, m.matched_key, m.distance)
            for m in against_result.matches
            if m.status != "superseded"  # (not a copy: an older version of its key's page)
        ]
    name = str(sources[0]) if len(sources) == 1 else f"{len(sources)} inputs"
    # (names as a report can write them: a key's lone surrogate escaped, a text's U+FFFD)
    report = build_report(
        escape_surrogates(name),
        unique_by_host,
        [(escape_surrogates(a), escape_surrogates(b), d) for a, b, d in decisions],
        {escape_surrogates(k): clean_text(t) for k, t in texts.items()},
    )
    return DedupResult(
        report,
        kept,
        dict(skipped),
        n,
        header,
        dict(walk.ignored),
        sources,
        near,
        keys,
        keep,
        label,
        dict(kept_by.by),
        engine.name,
        walk.carried,
        walk.extracted,
        against_result,
        walk.oversized_count,
        walk.oversized,
        pairs_written,
    )


def _write_plan(
    label: np.ndarray,
    by_store: dict[int, AgainstMatch],
    near: NearPairs,
    keep_texts: bool,
    n: int,
) -> dict[str, Any]:
    """What pass 2 does with each record: ``label``, ``named`` (its key wanted: groups'
    members and keepers, records dropped by the store, both ends of every near pair),
    ``dropped`` (by the store: --against) and ``shown`` (its text wanted: an HTML report's
    pairs)."""
    named = label != np.arange(n)
    named[label[named]] = True  # keepers of groups too
    dropped = np.zeros(n, dtype=bool)  # (by the store: --against)
    dropped[list(by_store)] = True
    named |= dropped
    named[near.in_pairs()] = True  # (and both ends of every near pair)
    shown = np.zeros(n, dtype=bool)  # (the texts of the pairs an HTML report shows)
    if keep_texts:
        shown = named & np.isin(label, np.array(sorted(text_clusters(label)), dtype=np.int64))
    return dict(label=label, named=named, dropped=dropped, shown=shown)


def _rewind_point(out: TextIO) -> int | None:
    """Where ``out`` can be emptied back to, to be written again: an in-memory text, or a
    regular file (the temporary file of an atomic output); None for a FIFO, a device, a
    terminal."""
    try:
        if not out.seekable():
            return None
        fd = out.fileno()
    except (OSError, ValueError):  # (io.UnsupportedOperation: a StringIO has no file)
        return out.tell() if isinstance(out, io.StringIO) else None
    return out.tell() if stat.S_ISREG(os.fstat(fd).st_mode) else None
