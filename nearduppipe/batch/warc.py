"""WARC files as a batch input: each ``response`` record with an HTML payload is one page, read
with warcio (the optional extra ``nearduppipe[warc]``), streaming, one record at a time.

FastWARC (in the same extra; C++, 2.2-2.9x faster to read a page than warcio:
docs/batch.md) reads the records it can vouch for, warcio the rest, so that the answers are
warcio's whatever is installed. fastwarc reads a local file's records one ahead (a record is
given once the next one's offset shows where it ended); a payload with a ``Content-Encoding``
or ``Transfer-Encoding`` is decoded by warcio's own readers, a URI rewritten as warcio rewrites
it (``<…>``, spaces). The input is handed over to warcio (seeking back to a record's offset)
at the first record fastwarc cannot vouch for: a response whose HTTP headers fastwarc does not
parse or that are not HTTP/1.x, with two Content-Types or encodings, a length past the end of
an uncompressed file, content shorter than its length, anything fastwarc raises; and at its
last record (warcio reads it again and what follows: the end of the file, empty gzip members,
which stop fastwarc, a file cut short). A ``.warc.gz`` that is not one gzip member per record
(an offset that starts no member, two records at one) is read again from the start by warcio,
which tells such a file only some records later; the records fastwarc gave are not given
twice. URLs are read by warcio only, and so is everything with
``NEARDUP_WARC_READER=warcio`` in the environment.

A WARC record cannot be written back into a feed, so ``nearduppipe dedup -o`` names each kept
one instead (:func:`locator`): its URL, the WARC file, the record's offset in it (where
``warcio extract``, ``warcio index`` and CDX tools seek) and its fingerprints. Every other record
(``warcinfo``, ``request``, ``metadata``, ``revisit``, responses that are not HTML) is skipped
and counted by kind.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import zlib
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import IO, Any

from .bounded import DEFAULT_MAX_RECORD_BYTES, OVERSIZED
from .compression import FeedError, IncompleteError, MissingExtraError
from .fs import AnyPath, as_path
from .splits import Bounds, Split, member_start

__all__ = [
    "HTML_TYPES",
    "OFFSET",
    "WARC_SUFFIXES",
    "WarcReader",
    "is_warc",
    "locator",
    "need_warcio",
]

WARC_SUFFIXES = (".warc", ".warc.gz")
HTML_TYPES = ("text/html", "application/xhtml+xml")
OFFSET = "\0warc-offset"  # the record dict's key for the record's offset (no feed has it)
NOT_HTML = "response not HTML"
READER_ENV = "NEARDUP_WARC_READER"  # "warcio": every WARC read by warcio only
_HTTP_SCHEMES = ("http:", "https:")  # (warcio parses HTTP headers for these URIs only)
_HTTP_STATUS = (b"HTTP/1.0 ", b"HTTP/1.1 ")
_ENCODINGS = ("Content-Encoding", "Transfer-Encoding")
_GZIP_MAGIC = b"\x1f\x8b\x08"


def is_warc(path: str | Path) -> bool:
    """Named as a WARC file (`.warc`, or `.warc.gz`: gzip per record, as crawlers write)."""
    return str(path).lower().endswith(WARC_SUFFIXES)


def need_warcio(path: object) -> Any:
    try:
        from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise MissingExtraError(
            f"{path}: reading WARC files needs the warcio package: pip install 'nearduppipe[warc]'"
        ) from None
    return ArchiveIterator


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


def _charset(content_type: str) -> str | None:
    """The ``charset=`` of a Content-Type, if Python knows that codec."""
    for part in content_type.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "charset":
            value = value.strip().strip("\"'")
            try:
                return codecs.lookup(value).name
            except LookupError:
                return None
    return None


class WarcReader:
    """One streaming pass over a WARC file, yielding ``(None, record)`` for each HTML response
    as a feed reader would: ``record`` has the URL under ``key_field``, the decoded payload
    under ``html_field`` (only with ``payload=True``) and the offset under :data:`OFFSET`.
    Records skipped are counted in :attr:`skipped`. Use as a context manager."""

    format = "warc"
    compression = None

    def __init__(
        self,
        path: AnyPath,
        key_field: str,
        html_field: str,
        payload: bool = True,
        limit: int = DEFAULT_MAX_RECORD_BYTES,
        split: Split | None = None,
        number: Callable[[int], str] = str,
    ) -> None:
        """``split``: a split's task reads the records whose gzip member starts in it
        (:mod:`.splits`), noting where they start in :attr:`bounds`; ``number`` writes a
        record number in messages."""
        self.path = as_path(path)  # (a URL: .fs)
        self.split, self.number = split, number
        self.bounds = Bounds()
        self.records = 0  # (WARC records read, of every kind: a split's count)
        self.limit = limit  # the largest payload read (decoded); larger ones: OVERSIZED
        self.gzip = False
        self._iterator_class = need_warcio(self.path)
        self._fast_class = fastwarc_iterator()
        self.fast_records = 0  # (records read by fastwarc; the rest, if any, by warcio)
        self.key_field = key_field
        self.html_field = html_field
        self.payload = payload
        self.fields: list[str] = []
        self.skipped: Counter[str] = Counter()
        self._file: IO[bytes] = self.path.open("rb")
        try:
            self.size = self.path.stat().st_size
            if split is None or split.start == 0:
                self._check_start()
        except BaseException:  # (a file deleted once opened, a URL's connection dropped)
            self.close()
            raise

    def _check_start(self) -> None:
        """A file that does not start as a WARC does (``WARC/1.x``, plain or in a gzip member)
        is refused: warcio would read on, printing warnings, and find nothing."""
        head = self._file.read(2)
        self._file.seek(0)
        try:
            if head == b"\x1f\x8b":
                self.gzip = True
                with gzip.GzipFile(fileobj=self._file, mode="rb") as member:
                    head = member.read(5)
            else:
                head = self._file.read(5)
        except (OSError, EOFError):
            head = b""
        self._file.seek(0)
        if head and head != b"WARC/":
            self.close()
            raise FeedError(f"{self.path}: not a WARC file (it does not start with WARC/)")

    def position(self) -> int:
        try:
            return self._file.tell()
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> WarcReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ended_early(self, record: Any, n: int, last: bool) -> None:
        """A record read through whose content stopped short of its Content-Length: the
        file was cut short inside it (the last), or its length is wrong."""
        missing = getattr(record.raw_stream, "limit", 0) if record is not None else 0
        if not missing:
            return
        if last:
            raise IncompleteError(
                f"{self.path}: incomplete: the file ends inside record {self.number(n)}, "
                f"{missing:,} bytes short of its Content-Length (the file was cut short?)"
            )
        raise FeedError(
            f"{self.path}: record {self.number(n)}: its content ends {missing:,} bytes before its "
            "Content-Length: an impossible length"
        )

    def _check_length(self, archive: Any, record: Any, n: int) -> None:
        """An uncompressed WARC: a record whose Content-Length runs past the end of the file
        is refused before it is read (warcio would take every record after it as its
        content)."""
        if self.gzip:
            return
        at = self._file.tell() - archive.reader.rem_length()
        wanted = getattr(record.raw_stream, "limit", 0)
        if at + wanted > self.size:
            length = record.rec_headers.get_header("Content-Length")
            raise FeedError(
                f"{self.path}: record {n} (offset {archive.offset:,}): Content-Length {length} "
                f"runs past the end of the file ({self.size:,} bytes): the file was cut short, "
                "or the length is wrong"
            )

    def _check_tail(self, offset: int, n: int) -> None:
        """A gzip WARC: from the last record read on, the file must be whole gzip members
        (warcio stops without a word at one cut short)."""
        with self.path.open("rb") as f:
            try:
                f.seek(offset)
            except OSError:  # (a stream that seeks only to its start, http(s): read up to it)
                left = offset
                while left > 0 and (skipped := f.read(min(left, 1 << 20))):
                    left -= len(skipped)
            member: Any = None
            while True:
                data = member.unused_data if member is not None and member.eof else b""
                data = data or f.read(1 << 16)
                if not data:
                    break
                if member is None or member.eof:
                    member = zlib.decompressobj(31)
                while data:  # (the output is dropped: a bounded amount at a time)
                    member.decompress(data, 1 << 16)
                    data = member.unconsumed_tail
        if member is not None and not member.eof:
            raise IncompleteError(
                f"{self.path}: incomplete: the file ends inside a gzip member (that of record "
                f"{self.number(n)} or one after it; the file was cut short?)"
            )

    def _payload(self, record: Any, content_type: str) -> Any:
        """The decoded payload, or None when it is over the limit (not read further)."""
        length = record.rec_headers.get_header("Content-Length") or ""
        if length.isdigit() and int(length) > self.limit:
            return None
        body = record.content_stream().read(self.limit + 1)  # de-chunked, content-decoded
        if len(body) > self.limit:
            return None
        charset = _charset(content_type)
        # bytes without a declared charset: the extractor detects the encoding
        return body.decode(charset, "replace") if charset else body

    def __iter__(self) -> Iterator[tuple[None, dict[str, Any]]]:
        first = 0
        if self.split is not None:
            found = member_start(self._file, self.split)
            if found is None:
                return  # (no member starts in the split)
            first = self.bounds.first_at = found
            self._file.seek(first)
            self.gzip = True
        n, start, again = 0, 0, 0
        if self._fast_class is not None and self._local():
            handover = yield from self._read_fast(first)
            if handover is None:
                return  # (the split's records all read)
            at, n, start = handover
            if at < 0:  # (warcio reads the records fastwarc read again, giving none of them)
                at, again, n, start = first, n, 0, 0
            self._file.seek(at)
        yield from self._read_warcio(n, start, again)

    def _local(self) -> bool:
        """A local file (fastwarc reads local files only: read ahead with os.pread, which
        Windows lacks)."""
        if not hasattr(os, "pread"):
            return False
        try:
            self._file.fileno()
            return bool(self._file.seekable())
        except (OSError, ValueError, AttributeError):
            return False

    def _read_fast(
        self, first: int
    ) -> Generator[tuple[None, dict[str, Any]], None, tuple[int, int, int] | None]:
        """The records fastwarc reads as warcio would (module doc), each yielded once the one
        after it is read (its start: the record before has ended there); then where warcio
        reads on from, the records read and the last one's offset (None: the split is read).
        An offset of -1: a gzip file that is not one member per record (warcio reads it from
        the start again: it tells such a file only some records later)."""
        records = iter(self._fast_class(self._file, parse_http=True))
        fd = self._file.fileno()
        held: tuple[int, str | None, dict[str, Any] | None] | None = None
        n, start = 0, 0
        while True:
            try:
                record = next(records)
                pos = record.stream_pos
            except Exception:  # (StopIteration too: warcio reads the last record again)
                return (first if held is None else held[0]), n, start
            if self.gzip and os.pread(fd, 3, pos) != _GZIP_MAGIC:
                return -1, n, start  # (a record inside a member: not one member per record)
            if held is not None:
                if pos <= held[0]:  # (two records in one gzip member)
                    return -1, n, start
                n += 1
                self.records = self.fast_records = n
                start, kind, item = held
                if item is None:
                    self.skipped[str(kind)] += 1
                else:
                    yield None, item
                held = None
            if self.split is not None and pos >= self.split.end:  # (the next split's)
                self.bounds.next_at = pos
                return None
            try:
                held = self._fast_record(record, pos, n + 1)
            except Exception:
                held = None
            if held is None:
                return pos, n, start

    def _fast_record(
        self, record: Any, pos: int, n: int
    ) -> tuple[int, str | None, dict[str, Any] | None] | None:
        """Record ``n``, read through by fastwarc: its offset and the kind it is skipped as, or
        the item it yields; None when warcio must read it (module doc)."""
        headers = record.headers
        length = headers.get("Content-Length") or ""
        kind = headers.get("WARC-Type")
        if not length.isdigit() or not kind or (not self.gzip and pos + int(length) > self.size):
            return None
        if kind != "response":
            return (pos, kind, None) if self._read_through(record, 0) else None
        url = headers.get("WARC-Target-URI")
        if url is None:
            return None
        if url.startswith("<") and url.endswith(">"):  # (as warcio rewrites it)
            url = url[1:-1]
        url = url.replace(" ", "%20")
        if int(length) == 0 or not url.startswith(_HTTP_SCHEMES):  # (warcio: no HTTP headers)
            return (pos, NOT_HTML, None) if self._read_through(record, 0) else None
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
            return (pos, NOT_HTML, None) if self._read_through(record, 0) else None
        item: dict[str, Any] = {self.key_field: url}
        got = 0
        if self.payload:
            body = None
            if int(length) <= self.limit:  # (the raw payload: at most the length)
                body = record.reader.read(self.limit + 1)
                got = len(body)
                if any(encodings):  # (decoded as warcio decodes it: its own readers)
                    encoding, transfer = (values[0] if values else None for values in encodings)
                    body = _decoded(body, encoding, transfer, self.limit)
            if body is None or len(body) > self.limit:
                item[OVERSIZED] = f"{self.path}: record {self.number(n)} ({url})"
            else:
                charset = _charset(content_type)
                item[self.html_field] = body.decode(charset, "replace") if charset else body
        if not self._read_through(record, got):
            return None
        item[OFFSET] = pos
        return pos, None, item

    @staticmethod
    def _read_through(record: Any, got: int) -> bool:
        """The rest of the record's content skipped: whether it was all there."""
        return bool(got + record.reader.consume() == record.content_length)

    def _read_warcio(
        self, n: int, start: int, again: int = 0
    ) -> Iterator[tuple[None, dict[str, Any]]]:
        """warcio's reading from where the file is (records ``n + 1`` on); the first ``again``
        records read through and checked only (fastwarc gave them)."""
        archive = self._iterator_class(self._file)
        records = iter(archive)
        previous: Any = None
        while True:
            try:
                record = next(records)
            except StopIteration:
                self._ended_early(previous, n, True)
                if self.gzip:  # (from the last record's member: its own end is checked too)
                    self._check_tail(start, n)
                self.bounds.next_at = self.size
                return
            except FeedError:
                raise
            except Exception as e:  # warcio's ArchiveLoadFailed, a bad gzip member, ...
                raise FeedError(
                    f"{self.path}: not a readable WARC after record {self.number(n)}: {e}"
                ) from None
            self._ended_early(previous, n, False)
            if self.split is not None and archive.offset >= self.split.end:  # (the next split's
                # first record; a whole file is read to its end, also when its size is unknown)
                self.bounds.next_at = archive.offset
                return
            n += 1
            previous, start = record, archive.offset
            self._check_length(archive, record, n)
            if n <= again:
                continue
            self.records = n
            if record.rec_type != "response":
                self.skipped[str(record.rec_type)] += 1
                continue
            content_type = ""
            if record.http_headers is not None:
                content_type = record.http_headers.get_header("Content-Type") or ""
            if content_type.split(";")[0].strip().lower() not in HTML_TYPES:
                self.skipped[NOT_HTML] += 1
                continue
            url = record.rec_headers.get_header("WARC-Target-URI") or ""
            item: dict[str, Any] = {self.key_field: url}
            if self.payload:
                try:
                    body = self._payload(record, content_type)
                except Exception as e:
                    raise FeedError(
                        f"{self.path}: record {self.number(n)} ({url}): cannot read: {e}"
                    ) from None
                if body is None:
                    item = {
                        self.key_field: url,
                        OVERSIZED: f"{self.path}: record {self.number(n)} ({url})",
                    }
                else:
                    item[self.html_field] = body
            # (the offset is known once the record is read through: warcio reads on to its end)
            item[OFFSET] = archive.get_record_offset()
            yield None, item


def locator(
    path: str, record: dict[str, Any], key_field: str, fp: int | None, wide: int | None
) -> str:
    """The JSON line ``-o`` writes for a kept WARC record."""
    line = {
        "url": record.get(key_field),
        "warc": path,
        "offset": record.get(OFFSET),
        "fingerprint": None if fp is None else f"{fp:016x}",
        "fingerprint_wide": None if wide is None else f"{wide:0128x}",
    }
    return json.dumps(line, ensure_ascii=False) + "\n"
