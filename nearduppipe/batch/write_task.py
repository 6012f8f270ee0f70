"""Pass 2 (:func:`.records.dedup_records`, once the keep rule has run): each split read again
by a task of the engine (its own data: the split it read in pass 1), which writes the kept
records of its split as a *part* of the output and returns it with the keys of the records
the report names and the texts of the pairs it shows. The driver reads no input: it writes
the parts to ``-o`` in input order, as they are (:meth:`.feed_writer.FeedWriter.write_part`:
the format's header and end are its own, nothing is parsed), so ``-o`` is one file streamed
from the tasks, byte for byte what one pass over every input writes.

Where the tasks share the driver's file system (the local pool; Spark ``local[N]``; Dask's own
LocalCluster: :func:`parts_dir`), a task writes its part to a file of a temporary folder and
returns its name; the driver copies each file into ``-o`` a chunk at a time and deletes it, so
no process holds a part in memory: the driver's peak no longer grows with the splits' size
(the local pool keeps ``2 × cores + 1`` splits in flight: their parts wait on disk). Elsewhere
(a cluster's executors) a part comes back as text, held by its task until the driver takes it
(Spark and Dask run every split's task at once, on the executors), the driver one at a time.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TextIO, cast

import numpy as np

from ..fingerprint.page import FingerprintParams
from ..index.words import words_to_int
from .compression import FeedError, OutputError
from .core import Fields
from .feed_writer import FeedWriter
from .feeds import FeedReader
from .split_task import open_split
from .splits import Bounds, Split, renumber
from .warc import locator

__all__ = [
    "TEXT_SAMPLE_CHARS",
    "WriteResult",
    "WriteTask",
    "parts_dir",
    "text_clusters",
    "write_split",
]

TEXT_SAMPLE_CHARS = 5000
PART_CHUNK = 1 << 20  # characters of a part file copied to -o at a time
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
    part_dir: str | None = None  # the part written to a file there (:func:`parts_dir`)


@dataclass
class WriteResult:
    part: str = ""
    part_file: str | None = None  # (the part, written there: the driver copies and deletes it)
    kept: int = 0
    keys: dict[int, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    error: FeedError | None = None


def write_split(task: WriteTask) -> WriteResult:
    """The split's kept records written as a part; keys and texts of its named records."""
    split, fields = task.split, task.fields
    out = WriteResult()
    buf: TextIO | None = None
    warc = split.source.is_warc
    writer = None
    lazy = split.source.format == "jsonl" and task.out_fmt in (None, "jsonl", "json")
    texts_of = replace(fields, fingerprint=None)  # (the texts, even of records carrying fps)
    try:
        if task.part_dir is not None and task.out_fmt is not None:
            out.part_file = os.path.join(task.part_dir, f"part-{split.n:06d}-{split.part:06d}")
            buf = cast(TextIO, _PartFile(out.part_file))
        else:
            buf = io.StringIO(newline="")
        if task.out_fmt is not None and not warc:
            writer = FeedWriter(buf, task.out_fmt, task.header, split.source.format, part=True)
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
    finally:
        if isinstance(buf, io.StringIO):
            out.part = buf.getvalue()
        try:
            if buf is not None:
                buf.close()
        except FeedError as e:  # (the part's last bytes: the disk full)
            out.error = out.error or e
    return out


class _PartFile(io.TextIOBase):
    """A part's file, written by its task: a failure to write it (the temporary folder's disk
    full) is a :class:`FeedError` naming the folder, not an input that cannot be read."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self._file = self._call(_part_file, name, "w")

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        try:
            return method(*args)
        except OSError as e:
            folder = os.path.dirname(self.name)
            raise OutputError(
                f"cannot write a part of the output in {folder} (the temporary folder: set "
                f"TMPDIR to one with room): {e.strerror or e}"
            ) from None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return int(self._call(self._file.write, text))

    def close(self) -> None:
        if not self.closed and hasattr(self, "_file"):  # (not when it could not be opened)
            try:
                self._call(self._file.close)
            finally:
                super().close()


def _part_file(name: str, mode: str) -> TextIO:
    """A part file's text: the characters ``-o`` takes (a lone surrogate passes through, to
    fail in ``-o`` as it did when parts were text)."""
    return cast(TextIO, open(name, mode, encoding="utf-8", errors="surrogatepass", newline=""))


@contextlib.contextmanager
def parts_dir(engine: object, output: object) -> Iterator[str | None]:
    """A temporary folder for the parts of ``-o`` when the engine's tasks share this machine's
    file system (its ``shares_files``), removed with what is left in it; None otherwise, or
    without ``-o`` (the parts' text then comes back with the results)."""
    if output is None or not getattr(engine, "shares_files", False):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="nearduppipe-parts-") as folder:
        yield folder


def _copy_part(writer: FeedWriter, name: str) -> None:
    """A part file into ``-o``, a chunk at a time, then deleted."""
    with _part_file(name, "r") as f:
        while chunk := f.read(PART_CHUNK):
            writer.write_part(chunk)
    os.unlink(name)


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
    part_dir: str | None = None,
) -> tuple[dict[int, str], dict[str, str], int]:
    """Pass 2 on the driver: a task per split with something to do (records to write or
    named), ``run`` by the engine; parts written to ``output`` in input order. ``what``:
    ``label, named, dropped, shown, fingerprints (fp, wide, ok), fields, params, out_fmt,
    header, keep_texts, first_format``. ``part_dir``: the tasks write their parts there
    (:func:`parts_dir`). Returns the named records' keys, the shown texts and the number of
    records kept."""
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
                what["header"], what["keep_texts"], fps, part_dir,
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
        if writer is not None and result.part_file is not None:
            _copy_part(writer, result.part_file)
        elif writer is not None:
            writer.write_part(result.part)
        keys.update(result.keys)
        texts.update(result.texts)
        bar.update(count)
    bar.update(n - bar.n)
    if writer is not None:
        writer.close()
    return keys, texts, int(kept_mask.sum())
