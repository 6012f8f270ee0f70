"""WARC files as a batch input: each ``response`` record with an HTML payload is one page, read
with warcio (the optional extra ``nearduppipe[warc]``), streaming, one record at a time.

A WARC record cannot be written back into a feed, so ``nearduppipe dedup -o`` names each kept
one instead (:func:`locator`): its URL, the WARC file, the record's offset in it (where
``warcio extract``, ``warcio index`` and CDX tools seek) and its fingerprints. Every other record
(``warcinfo``, ``request``, ``metadata``, ``revisit``, responses that are not HTML) is skipped
and counted by kind.
"""

from __future__ import annotations

import codecs
import gzip
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .compression import FeedError, MissingExtraError
from .fs import AnyPath, as_path

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
        self, path: AnyPath, key_field: str, html_field: str, payload: bool = True
    ) -> None:
        self.path = as_path(path)  # (a URL: .fs)
        self._iterator_class = need_warcio(self.path)
        self.key_field = key_field
        self.html_field = html_field
        self.payload = payload
        self._file: IO[bytes] = self.path.open("rb")
        self.size = self.path.stat().st_size
        self.fields: list[str] = []
        self.skipped: Counter[str] = Counter()
        self._check_start()

    def _check_start(self) -> None:
        """A file that does not start as a WARC does (``WARC/1.x``, plain or in a gzip member)
        is refused: warcio would read on, printing warnings, and find nothing."""
        head = self._file.read(2)
        self._file.seek(0)
        try:
            if head == b"\x1f\x8b":
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

    def __iter__(self) -> Iterator[tuple[None, dict[str, Any]]]:
        archive = self._iterator_class(self._file)
        records = iter(archive)
        n = 0
        while True:
            try:
                record = next(records)
            except StopIteration:
                return
            except Exception as e:  # warcio's ArchiveLoadFailed, a bad gzip member, ...
                raise FeedError(f"{self.path}: not a readable WARC after record {n}: {e}") from None
            n += 1
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
                    body = record.content_stream().read()  # de-chunked, content-decoded
                except Exception as e:
                    raise FeedError(f"{self.path}: record {n} ({url}): cannot read: {e}") from None
                charset = _charset(content_type)
                # bytes without a declared charset: the extractor detects the encoding
                item[self.html_field] = body.decode(charset, "replace") if charset else body
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
