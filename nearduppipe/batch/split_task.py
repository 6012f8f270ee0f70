"""Pass 1's task: one split of one input (:mod:`.splits`) read once, where the engine runs it
(a pool process, a Spark executor, a Dask worker), into what the driver keeps of its records:
fingerprints, and what the keep rule and the report read (key, host, scope, canonical link).
The driver reads no input for it.

A split's result is columns (arrays and lists), not a tuple per record: 1 M records' results
cross from the engine to the driver as a few large buffers. Numbers in its messages and keys
are counted within the split and marked (:func:`.splits.mark`); the driver renumbers them.
An input that cannot be read is *returned* as its error, not raised: an engine would wrap a
raised one in its own error and tracebacks, where the driver raises it as the local engine
does.
"""

from __future__ import annotations

import io
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

from ..fingerprint.page import Fingerprinted, FingerprintParams
from ..index.words import wide_words
from ..stores.report import host_of
from ..stores.scope import scope_of
from .bounded import OVERSIZED
from .compression import FeedError
from .core import Fields, fingerprint_job
from .feeds import FeedReader
from .inputs import open_input
from .keep import canonical_link
from .precomputed import MixedFingerprintsError
from .splits import Bounds, ChunkStream, Split, mark, plain_chunks, region, zstd_chunks
from .warc import WarcReader

__all__ = ["NAMED", "SplitResult", "Wants", "open_split", "read_split"]

NAMED = 10  # records over the size limit named (all are counted)
MAX_NAMES = 10_000  # fields noted (an output's header) while fewer are known


@dataclass(frozen=True)
class Wants:
    """What the driver keeps of each record besides its fingerprints (picklable)."""

    keys: bool = False  # every key (a keep rule other than first, --against)
    canonical: bool = False  # the canonical link (--keep canonical)
    scope: str = "global"  # the rule's scope: each record's scope name, beyond global


@dataclass
class SplitResult:
    """One split's records, in order, as columns; ``error`` when the input could not be
    read (the records before it are not used: the run stops)."""

    n: int
    part: int
    fps: array[int] = field(default_factory=lambda: array("Q"))
    wides: bytearray = field(default_factory=bytearray)
    ok: bytearray = field(default_factory=bytearray)
    lengths: array[int] = field(default_factory=lambda: array("q"))
    skipped: dict[int, str] = field(default_factory=dict)  # (a record without fingerprints)
    keys: list[str] = field(default_factory=list)
    hosts: dict[str, int] = field(default_factory=dict)
    host_ids: array[int] = field(default_factory=lambda: array("i"))
    scopes: dict[str, int] = field(default_factory=dict)
    scope_ids: array[int] = field(default_factory=lambda: array("i"))
    canonical: list[str | None] = field(default_factory=list)
    names: dict[str, None] = field(default_factory=dict)
    csv_header: list[str] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)
    with_text: int = 0
    carried: int = 0
    extracted: int = 0
    oversized: list[str] = field(default_factory=list)
    oversized_count: int = 0
    units: int = 0  # lines (JSON lines) or WARC records read: the next split's numbers
    first_at: int | None = None  # where its first record starts, and the next split's
    next_at: int | None = None
    read: int = 0  # bytes of the input read
    error: FeedError | MixedFingerprintsError | None = None

    @property
    def count(self) -> int:
        return len(self.fps)


_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
_PLAIN_NETLOC = re.compile(r"[^@\[\]:%\t\r\n/?#]*")


def _host(key: str) -> str:
    """:func:`~nearduppipe.stores.report.host_of` without urlsplit's cost for the usual
    ``scheme://host/…`` (a third of a split's time for records that carry fingerprints);
    anything else goes to ``host_of``."""
    start = key.find("://")
    if (
        start > 0
        and key[0].isascii()
        and key[0].isalpha()
        and _SCHEME_CHARS.issuperset(key[:start])
    ):
        netloc = _PLAIN_NETLOC.match(key, start + 3)
        end = netloc.end() if netloc else -1
        if end == len(key) or key[end] in "/?#":
            rest = key[end:]
            if "\t" not in rest and "\r" not in rest and "\n" not in rest:
                return key[start + 3 : end].lower() or "(no host)"
    return host_of(key)


def open_split(
    split: Split, fields: Fields, bounds: Bounds, payload: bool = True
) -> FeedReader | WarcReader:
    """A reader of the split's records only (``payload``: a WARC record's page too)."""
    source, limit = split.source, fields.max_record_bytes
    if split.how == "whole":
        return open_input(source, fields.key, fields.html, payload, limit)
    number = mark("L")
    if split.how == "members":
        warc = WarcReader(
            source.path, fields.key, fields.html, payload, limit, split=split, number=number
        )
        warc.bounds = bounds  # (noted as it reads: also when it stops at an error)
        return warc
    raw = source.path.open("rb")
    try:
        if split.how == "lines":
            chunks = plain_chunks(raw, split.start, split.end)
            bounds.first_at = split.start  # (lines: the regions tile the file by themselves)
        else:
            chunks = zstd_chunks(raw, split, str(source.path), bounds)
        stream: IO[bytes] = io.BufferedReader(ChunkStream(region(chunks, split.first)), 1 << 16)
        opened = (raw, stream)
        reader = FeedReader(source.path, "jsonl", None, limit, opened=opened, number=number)
    except BaseException:  # (the file's size asked after it was opened: it may fail)
        raw.close()
        raise
    reader.at_start = split.start == 0  # (the file's own first line: a BOM there is skipped)
    return reader


def read_split(
    split: Split, fields: Fields, params: FingerprintParams, wants: Wants
) -> SplitResult:
    """The split's records read once and fingerprinted (module doc)."""
    out = SplitResult(split.n, split.part)
    bounds = Bounds()
    record_no = mark("R")
    reader: FeedReader | WarcReader | None = None
    try:
        reader = open_split(split, fields, bounds)
        with reader:
            for i, (_, record) in enumerate(reader):
                _take(out, record, i, fields, params, wants, record_no, split.source.is_warc)
            out.csv_header = list(reader.fields)
            out.ignored.update(getattr(reader, "skipped", {}))
            out.units = getattr(reader, "lines", 0) or getattr(reader, "records", 0)
            out.read = reader.position()
    except (FeedError, MixedFingerprintsError) as e:
        out.error = e
    except OSError as e:  # (the line the driver would give: cli/dedup_cmd.py)
        out.error = FeedError(f"{e.filename or split.source}: cannot read: {e.strerror or e}")
    out.first_at, out.next_at = bounds.first_at, bounds.next_at
    return out


def _take(
    out: SplitResult,
    record: dict[str, Any],
    i: int,
    fields: Fields,
    params: FingerprintParams,
    wants: Wants,
    record_no: Any,
    warc: bool,
) -> None:
    """One record into the split's columns."""
    if not warc and len(out.names) < MAX_NAMES and OVERSIZED not in record:
        out.names.update(dict.fromkeys(record))
    value = record.get(fields.key)
    key = value if isinstance(value, str) and value else f"#{record_no(i + 1)}"
    job = fields.job(record, params, f"record {record_no(i + 1)} ({key})")
    if OVERSIZED in record:
        out.oversized_count += 1
        if len(out.oversized) < NAMED:
            out.oversized.append(str(record[OVERSIZED]))
    carried = job[3]
    out.carried += carried is not None and carried.fingerprints is not None
    out.extracted += job[0] is not None or job[1] is not None
    if carried is not None or fields.text in record or fields.html in record:
        out.with_text += 1
    out.host_ids.append(out.hosts.setdefault(_host(key), len(out.hosts)))
    if wants.scope != "global":
        name = scope_of(key, wants.scope)
        out.scope_ids.append(out.scopes.setdefault(name, len(out.scopes)))
    if wants.keys:
        out.keys.append(key)
    if wants.canonical:
        html = record.get(fields.html)
        ok = isinstance(html, (str, bytes))
        out.canonical.append(canonical_link(html, key) if ok else None)
    result: Fingerprinted = fingerprint_job(job)
    fps = result.fingerprints
    out.fps.append(fps.fp if fps is not None else 0)
    out.wides += wide_words(fps.wide if fps is not None else None).tobytes()
    out.ok.append(fps is not None)
    out.lengths.append(result.text_length)
    if fps is None:
        out.skipped[len(out.fps) - 1] = result.skipped or "no_text"
