"""WARC files as a batch input: each ``response`` record with an HTML payload is one page, read
with warcio (the optional extra ``nearduppipe[warc]``), streaming, one record at a time.

warcio's reading, here, is the reference. FastWARC (in the same extra) reads first the records
of a local file it can vouch for (:mod:`.warc_fast`: which, and where it hands the input over);
warcio reads the rest from the record fastwarc stopped at, so that the answers are warcio's
whatever is installed. URLs are read by warcio only, and so is everything with
``NEARDUP_WARC_READER=warcio`` in the environment. What the two readers must agree on (which
responses are pages, the offset's key, the charset) is :mod:`.warc_pages`'s.

A WARC record cannot be written back into a feed, so ``nearduppipe dedup -o`` names each kept
one instead (:func:`locator`): its URL, the WARC file, the record's offset in it (where
``warcio extract``, ``warcio index`` and CDX tools seek) and its fingerprints. Every other record
(``warcinfo``, ``request``, ``metadata``, ``revisit``, responses that are not HTML) is skipped
and counted by kind.
"""

from __future__ import annotations

import gzip
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from . import warc_fast
from .bounded import DEFAULT_MAX_RECORD_BYTES, OVERSIZED
from .compression import FeedError, IncompleteError, MissingExtraError
from .fs import AnyPath, as_path
from .splits import Bounds, Split, member_start
from .unicode_out import json_text
from .warc_pages import HTML_TYPES, NOT_HTML, OFFSET, declared_charset

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
        # (None: warcio reads it all; called through its module, where a test swaps it)
        self._fast_class = warc_fast.fastwarc_iterator()
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
        charset = declared_charset(content_type)
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
        if self._fast_class is not None and warc_fast.is_local(self._file):
            handover = yield from warc_fast.read_fast(self, self._fast_class, self._file, first)
            if handover is None:
                return  # (the split's records all read)
            at, n, start = handover
            if at < 0:  # (warcio reads the records fastwarc read again, giving none of them)
                at, again, n, start = first, n, 0, 0
            self._file.seek(at)
        yield from self._read_warcio(n, start, again)

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
    return json_text(line) + "\n"  # (a path of undecodable bytes: escaped)
