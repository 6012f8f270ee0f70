"""Pass 2 (:func:`.records.dedup_records`, once the keep rule has run): each split read again
by a task of the engine (its own data: the split it read in pass 1), which writes the kept
records of its split as a *part* of the output and returns it with the keys of the records
the report names and the texts of the pairs it shows. The driver reads no input: it writes
the parts to ``-o`` in input order, as they are (:meth:`.feed_writer.FeedWriter.write_part`:
the format's header and end are its own, nothing is parsed), so ``-o`` is one file streamed
from the tasks, byte for byte what one pass over every input writes.

A part is held by its task until the driver takes it: the engines keep a few splits in
flight (the local pool a window of them; Spark and Dask all of them, on the executors), and
the driver one at a time.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

import numpy as np

from ..fingerprint.page import FingerprintParams
from ..index.words import words_to_int
from .compression import FeedError
from .core import Fields
from .feed_writer import FeedWriter
from .feeds import FeedReader
from .split_task import open_split
from .splits import Bounds, Split, renumber
from .warc import locator

__all__ = ["TEXT_SAMPLE_CHARS", "WriteResult", "WriteTask", "text_clusters", "write_split"]

TEXT_SAMPLE_CHARS = 5000
PAIRS_WITH_TEXTS = 100  # the HTML report shows at most this many pairs side by side


@dataclass(frozen=True)
class WriteTask:
    """What a split's task needs in pass 2 (picklable): its records' numbers (``first`` on,
    ``count`` of them) and, for each, whether it is kept, named (its key wanted) and shown
    (its text wanted); a WARC split's fingerprints (its kept records are written as
    locators that carry them)."""

    split: Split
    first: int
    count: int
    kept: np.ndarray
    named: np.ndarray
    shown: np.ndarray
    fields: Fields
    params: FingerprintParams
    out_fmt: str | None  # None: no -o (the keys and texts only)
    header: list[str]
    payload: bool  # a WARC record's page read (the texts of shown pairs)
    fingerprints: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (WARC: fp, wide, ok)


@dataclass
class WriteResult:
    part: str = ""
    kept: int = 0
    keys: dict[int, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    error: FeedError | None = None


def write_split(task: WriteTask) -> WriteResult:
    """The split's kept records written as a part; keys and texts of its named records."""
    split, fields = task.split, task.fields
    out = WriteResult()
    buf = io.StringIO(newline="")
    warc = split.source.is_warc
    writer = None
    if task.out_fmt is not None and not warc:
        writer = FeedWriter(buf, task.out_fmt, task.header, split.source.format, part=True)
    # (JSON lines written as read: only the lines whose keys are needed are parsed again)
    lazy = split.source.format == "jsonl" and task.out_fmt in (None, "jsonl", "json")
    texts_of = replace(fields, fingerprint=None)  # (the texts, even of records carrying fps)
    try:
        with open_split(split, fields, Bounds(), task.payload) as reader:
            if isinstance(reader, FeedReader):
                reader.lazy = lazy
            for k, (raw, record) in enumerate(reader):
                if k >= task.count:  # (an input that grew between the passes)
                    break
                if lazy and task.named[k] and isinstance(raw, str):
                    record = json.loads(raw)
                if task.kept[k]:
                    out.kept += 1
                    if task.out_fmt is not None and warc and task.fingerprints is not None:
                        fp, wide, ok = task.fingerprints
                        wide_k = words_to_int(wide[k]) if ok[k] else None
                        fp_k = int(fp[k]) if ok[k] else None
                        buf.write(locator(str(split.source), record, fields.key, fp_k, wide_k))
                    elif writer is not None:
                        writer.write(raw, record)
                if task.named[k]:
                    key = out.keys[task.first + k] = fields.key_of(record, task.first + k)
                    if task.shown[k]:
                        text, html, _, _ = texts_of.job(record, task.params)
                        body = text if text is not None else html
                        if isinstance(body, bytes):
                            body = body.decode("utf-8", "replace")
                        if body is not None:
                            out.texts[key] = body[:TEXT_SAMPLE_CHARS]
    except FeedError as e:
        out.error = e
    except OSError as e:  # (the line the driver would give: cli/dedup_cmd.py)
        out.error = FeedError(f"{e.filename or split.source}: cannot read: {e.strerror or e}")
    out.part = buf.getvalue()
    return out


def text_clusters(label: np.ndarray) -> set[int]:
    """Roots of the largest clusters holding the first PAIRS_WITH_TEXTS pairs: only their
    members' texts are kept (an HTML report shows no more pairs)."""
    n = len(label)
    sizes = np.bincount(label, minlength=n)
    roots = np.flatnonzero(sizes > 1)
    order = roots[np.lexsort((roots, -sizes[roots]))]
    chosen, pairs = set(), 0
    for root in order.tolist():
        if pairs >= PAIRS_WITH_TEXTS:
            break
        chosen.add(root)
        pairs += int(sizes[root]) - 1
    return chosen


def write_pass(
    run: Callable[[list[WriteTask]], Iterator[WriteResult]],
    splits: list[Split],
    spans: list[tuple[int, int, int]],
    what: dict[str, Any],
    output: TextIO | None,
    bar: Any,
) -> tuple[dict[int, str], dict[str, str], int]:
    """Pass 2 on the driver: a task per split with something to do (records to write or
    named), ``run`` by the engine; parts written to ``output`` in input order. ``what``:
    ``label, named, dropped, shown, fingerprints (fp, wide, ok), fields, params, out_fmt,
    header, keep_texts, first_format``. Returns the named records' keys, the shown texts and
    the number of records kept."""
    label, named, dropped = what["label"], what["named"], what["dropped"]
    n = len(label)
    kept_mask = (label == np.arange(n)) & ~dropped
    out_fmt = what["out_fmt"] if output is not None else None
    fp, wide, ok = what["fingerprints"]
    tasks: list[WriteTask] = []
    at: list[tuple[int, int, int]] = []
    for split, (lines, first, count) in zip(splits, spans, strict=True):
        end = min(first + count, n)
        if first >= end or not (named[first:end].any() or (out_fmt and kept_mask[first:end].any())):
            continue
        fps = None
        if out_fmt is not None and split.source.is_warc:
            fps = (fp[first:end], wide[first:end], np.asarray(ok[first:end], dtype=bool))
        tasks.append(
            WriteTask(
                split, first, end - first, kept_mask[first:end], named[first:end],
                what["shown"][first:end], what["fields"], what["params"], out_fmt,
                what["header"], what["keep_texts"], fps,
            )
        )  # fmt: skip
        at.append((lines, first, end - first))
    writer = None
    if output is not None and out_fmt is not None:
        writer = FeedWriter(output, out_fmt, what["header"], what["first_format"])
    keys: dict[int, str] = {}
    texts: dict[str, str] = {}
    for (lines, first, count), result in zip(at, run(tasks), strict=True):
        if result.error is not None:
            e = result.error
            raise type(e)(renumber(str(e), lines, first))
        if writer is not None:
            writer.write_part(result.part)
        keys.update(result.keys)
        texts.update(result.texts)
        bar.update(count)
    bar.update(n - bar.n)
    if writer is not None:
        writer.close()
    return keys, texts, int(kept_mask.sum())
