"""The FastWARC fast path of :class:`.warc.WarcReader`. FastWARC (in the extra
``nearduppipe[warc]``; C++, 2.2-2.9x faster to read a page than warcio: docs/batch.md) reads
the records it can vouch for, warcio (:mod:`.warc`) the rest, so that the answers are warcio's
whatever is installed.

fastwarc reads a local file's records one ahead (a record is given once the next one's offset
shows where it ended); a payload with a ``Content-Encoding`` or ``Transfer-Encoding`` is decoded
by warcio's own readers, a URI rewritten as warcio rewrites it (``<…>``, spaces). The input is
handed over to warcio (seeking back to a record's offset) at the first record fastwarc cannot
vouch for: a response whose HTTP headers fastwarc does not parse or that are not HTTP/1.x, with
two Content-Types or encodings, a length past the end of an uncompressed file, content shorter
than its length, anything fastwarc raises; and at its last record (warcio reads it again and
what follows: the end of the file, empty gzip members, which stop fastwarc, a file cut short).
A ``.warc.gz`` that is not one gzip member per record (an offset that starts no member, two
records at one) is read again from the start by warcio, which tells such a file only some
records later; the records fastwarc gave are not given twice. URLs are read by warcio only, and
so is everything with ``NEARDUP_WARC_READER=warcio`` in the environment
(:func:`fastwarc_iterator`).

A module of its own so that warcio's reader reads as the reference it is: this one reads for it
(:func:`read_fast`, given the reader as a :class:`ReaderState`) and imports nothing of it; what
both must agree on is :mod:`.warc_pages`'s.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Callable, Generator
from pathlib import Path
from typing import IO, Any, Protocol

from .bounded import OVERSIZED
from .fs import UrlPath
from .splits import Bounds, Split
from .warc_pages import HTML_TYPES, NOT_HTML, OFFSET, declared_charset

__all__ = ["READER_ENV", "ReaderState", "fastwarc_iterator", "is_local", "read_fast"]

READER_ENV = "NEARDUP_WARC_READER"  # "warcio": every WARC read by warcio only
_HTTP_SCHEMES = ("http:", "https:")  # (warcio parses HTTP headers for these URIs only)
_HTTP_STATUS = (b"HTTP/1.0 ", b"HTTP/1.1 ")
_ENCODINGS = ("Content-Encoding", "Transfer-Encoding")
_GZIP_MAGIC = b"\x1f\x8b\x08"

# a record fastwarc read through: its offset and the kind it is skipped as, or the item it yields
_Held = tuple[int, str | None, dict[str, Any] | None]


class ReaderState(Protocol):
    """What the fast path reads of the :class:`.warc.WarcReader` it reads for (read when it
    reads: a split's task gives the reader its own :attr:`bounds`), and what it counts there
    (:attr:`records`, :attr:`fast_records`, :attr:`skipped`, :attr:`bounds`)."""

    path: Path | UrlPath
    number: Callable[[int], str]
    split: Split | None
    gzip: bool
    size: int
    limit: int
    key_field: str
    html_field: str
    payload: bool
    records: int
    fast_records: int
    skipped: Counter[str]
    bounds: Bounds


def fastwarc_iterator() -> Any:
    """FastWARC's ArchiveIterator, or None: not installed, or ``NEARDUP_WARC_READER=warcio``."""
    if os.environ.get(READER_ENV, "").strip().lower() == "warcio":
        return None
    try:
        from fastwarc.warc import ArchiveIterator  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    return ArchiveIterator


def _decoded(raw: bytes, encoding: str | None, transfer: str | None, limit: int) -> bytes:
    """A payload de-chunked and content-decoded as warcio's ``content_stream()`` does it, by
    warcio's readers (at most ``limit + 1`` bytes)."""
    from warcio.bufferedreaders import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        BufferedReader,
        ChunkedDataReader,
    )

    if encoding:
        encoding = encoding.lower()
        if encoding not in BufferedReader.get_supported_decompressors():
            encoding = None
    stream: Any = io.BytesIO(raw)
    if transfer == "chunked":
        stream = ChunkedDataReader(stream, decomp_type=encoding)
    elif encoding:
        stream = BufferedReader(stream, decomp_type=encoding)
    return bytes(stream.read(limit + 1))


def is_local(file: IO[bytes]) -> bool:
    """A local file (fastwarc reads local files only: read ahead with os.pread, which
    Windows lacks)."""
    if not hasattr(os, "pread"):
        return False
    try:
        file.fileno()
        return bool(file.seekable())
    except (OSError, ValueError, AttributeError):
        return False


def read_fast(
    reader: ReaderState, archive_iterator: Any, file: IO[bytes], first: int
) -> Generator[tuple[None, dict[str, Any]], None, tuple[int, int, int] | None]:
    """The records fastwarc (``archive_iterator``, :func:`fastwarc_iterator`'s) reads from
    ``file`` as warcio would (module doc), each yielded once the one after it is read (its
    start: the record before has ended there); then where warcio reads on from, the records
    read and the last one's offset (None: the split is read). An offset of -1: a gzip file that
    is not one member per record (warcio reads it from the start again: it tells such a file
    only some records later)."""
    records = iter(archive_iterator(file, parse_http=True))
    fd = file.fileno()
    held: _Held | None = None
    n, start = 0, 0
    while True:
        try:
            record = next(records)
            pos = record.stream_pos
        except Exception:  # (StopIteration too: warcio reads the last record again)
            return (first if held is None else held[0]), n, start
        if reader.gzip and os.pread(fd, 3, pos) != _GZIP_MAGIC:
            return -1, n, start  # (a record inside a member: not one member per record)
        if held is not None:
            if pos <= held[0]:  # (two records in one gzip member)
                return -1, n, start
            n += 1
            reader.records = reader.fast_records = n
            start, kind, item = held
            if item is None:
                reader.skipped[str(kind)] += 1
            else:
                yield None, item
            held = None
        if reader.split is not None and pos >= reader.split.end:  # (the next split's)
            reader.bounds.next_at = pos
            return None
        try:
            held = _fast_record(reader, record, pos, n + 1)
        except Exception:
            held = None
        if held is None:
            return pos, n, start


def _fast_record(reader: ReaderState, record: Any, pos: int, n: int) -> _Held | None:
    """Record ``n``, read through by fastwarc: its offset and the kind it is skipped as, or
    the item it yields; None when warcio must read it (module doc)."""
    headers = record.headers
    length = headers.get("Content-Length") or ""
    kind = headers.get("WARC-Type")
    if not length.isdigit() or not kind or (not reader.gzip and pos + int(length) > reader.size):
        return None
    if kind != "response":
        return (pos, kind, None) if _read_through(record, 0) else None
    url = headers.get("WARC-Target-URI")
    if url is None:
        return None
    if url.startswith("<") and url.endswith(">"):  # (as warcio rewrites it)
        url = url[1:-1]
    url = url.replace(" ", "%20")
    if int(length) == 0 or not url.startswith(_HTTP_SCHEMES):  # (warcio: no HTTP headers)
        return (pos, NOT_HTML, None) if _read_through(record, 0) else None
    if not record.is_http:
        return None
    http = record.http_headers
    if not (http.status_line_bytes or b"").startswith(_HTTP_STATUS):
        return None
    content_types = http.get_multiple("Content-Type")
    encodings = [http.get_multiple(name) for name in _ENCODINGS]
    if len(content_types) > 1 or any(len(values) > 1 for values in encodings):
        return None
    content_type = content_types[0] if content_types else ""
    if content_type.split(";")[0].strip().lower() not in HTML_TYPES:
        return (pos, NOT_HTML, None) if _read_through(record, 0) else None
    item: dict[str, Any] = {reader.key_field: url}
    got = 0
    if reader.payload:
        body = None
        if int(length) <= reader.limit:  # (the raw payload: at most the length)
            body = record.reader.read(reader.limit + 1)
            got = len(body)
            if any(encodings):  # (decoded as warcio decodes it: its own readers)
                encoding, transfer = (values[0] if values else None for values in encodings)
                body = _decoded(body, encoding, transfer, reader.limit)
        if body is None or len(body) > reader.limit:
            item[OVERSIZED] = f"{reader.path}: record {reader.number(n)} ({url})"
        else:
            charset = declared_charset(content_type)
            item[reader.html_field] = body.decode(charset, "replace") if charset else body
    if not _read_through(record, got):
        return None
    item[OFFSET] = pos
    return pos, None, item


def _read_through(record: Any, got: int) -> bool:
    """The rest of the record's content skipped: whether it was all there."""
    return bool(got + record.reader.consume() == record.content_length)
