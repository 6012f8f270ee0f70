"""Streaming readers and writers for the feed formats Scrapy's exporters write: JSON lines,
JSON arrays (``scrapy crawl -O items.json``), CSV and XML (``<items><item><field>…``).

Every reader streams: memory stays the size of one record (plus a read buffer) whatever the
file's size, and :meth:`FeedReader.position` tells how many bytes were consumed, for progress
bars whose total is the file size. Readers yield each record with its raw JSON text when the
format has one, so JSON records can be written back byte for byte.

JSON arrays are decoded incrementally with :meth:`json.JSONDecoder.raw_decode` over chunks of
the file (no third-party streaming parser needed); XML is read with
:func:`xml.etree.ElementTree.iterparse` (expat: no external entities are fetched, and entity
expansion is bounded), each item being dropped from the tree once read.

A feed may be compressed: gzip (``.gz``, standard library) or zstd (``.zst``, the optional
``zstandard`` package: ``nearduppipe[zstd]``), named by the last extension; the format is then
named by the one before (``items.jsonl.gz``). Progress is counted in compressed bytes.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .bounded import (
    DEFAULT_MAX_RECORD_BYTES,
    OVERSIZED,
    Capped,
    Oversized,
    RecordTooLargeError,
    bounded_lines,
)
from .compression import (
    COMPRESSIONS,
    FeedError,
    IncompleteError,
    MissingExtraError,
    compression_of,
    decompressed,
    need_zstandard,
)
from .feed_writer import FeedWriter, neutralise_formula
from .fs import AnyPath, as_path

__all__ = [
    "COMPRESSIONS",
    "FEED_FORMATS",
    "FeedError",
    "FeedReader",
    "FeedWriter",
    "MissingExtraError",
    "compression_of",
    "feed_format",
    "neutralise_formula",
]

FEED_FORMATS = ("jsonl", "json", "csv", "xml")
_EXTENSIONS = {
    ".jsonl": "jsonl",
    ".jl": "jsonl",
    ".jsonlines": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".xml": "xml",
}
_CHUNK = 1 << 16
_WS = " \t\r\n"


def _not_json(e: Exception) -> str:
    """What is wrong with a record that Python's json module refuses, in one line."""
    if isinstance(e, json.JSONDecodeError):
        return f"not JSON: {e.msg}"
    if isinstance(e, RecursionError):
        return "JSON nested too deeply to read"
    return f"JSON that cannot be read: {e}"  # e.g. a number of more than 4,300 digits


def feed_format(path: str | Path, given: str | None = None) -> str:
    """The format named by ``given`` (``--input-format``), else by the file's extension (the
    one before a compression extension: ``items.jsonl.gz`` is JSON lines)."""
    if given:
        if given not in FEED_FORMATS:
            raise FeedError(f"unknown feed format {given!r}: use {', '.join(FEED_FORMATS)}")
        return given
    named = Path(path)
    if compression_of(named):
        named = named.with_suffix("")
    suffix = named.suffix.lower()
    if suffix not in _EXTENSIONS:
        raise FeedError(
            f"{path}: cannot tell the feed format from the extension {suffix or '(none)'!r}; "
            f"name it .jsonl/.jl, .json, .csv or .xml, or pass the format"
        )
    return _EXTENSIONS[suffix]


# (raw JSON text or None, the record); a JSON line over the limit: (Oversized, {OVERSIZED: …})
Record = tuple[str | Oversized | None, dict[str, Any]]
MAX_XML_DEPTH = 256  # an item's fields nest a few levels; 200,000 made a RecursionError


class FeedReader:
    """One streaming pass over a feed file. Iterate once; use as a context manager.
    ``compression``: ``gzip``, ``zstd`` or ``None`` (see :func:`compression_of`). ``limit``:
    the largest record read, in bytes (a JSON line over it is yielded as an
    :class:`~.bounded.Oversized`, unread; in other formats it is a
    :class:`~.bounded.RecordTooLargeError`)."""

    def __init__(
        self,
        path: AnyPath,
        fmt: str,
        compression: str | None = None,
        limit: int = DEFAULT_MAX_RECORD_BYTES,
        opened: tuple[IO[bytes], IO[bytes]] | None = None,
        number: Callable[[int], str] = str,
    ) -> None:
        """``opened``: the file and the stream of its records, opened by a split's task
        (:mod:`.splits`: its lines only); ``number`` writes a line number in messages."""
        self.path = as_path(path)  # (a URL: .fs)
        self.number = number
        self.at_start = opened is None
        # JSON lines yielded unparsed (an empty record), for a pass that parses only the
        # records it needs (the output's: every line was parsed, and checked, before)
        self.lazy = False
        self.format = fmt
        self.compression = compression
        self.limit = limit
        if compression is not None and compression not in COMPRESSIONS.values():
            raise FeedError(f"{path}: unknown compression {compression!r}")
        if compression == "zstd":
            need_zstandard(self.path)  # (before the file is opened)
        if opened is None:
            self._raw: IO[bytes] = self.path.open("rb")
        else:
            self._raw, self._file = opened
        try:
            if opened is None:
                self._file = decompressed(self._raw, compression, self.path)
            self.size = self.path.stat().st_size
        except BaseException:  # (a file deleted once opened, a URL's connection dropped)
            self._raw.close()
            raise
        self.fields: list[str] = []  # CSV: the header; others: filled as records are read

    def position(self) -> int:
        """Bytes of the file consumed so far (read-ahead included; compressed bytes)."""
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return 0

    def _rewind(self) -> None:
        """Back to the file's first byte (a decompressing stream cannot seek back: reopened)."""
        if self.compression is None:
            self._raw.seek(0)
            return
        if self._file is not self._raw:
            self._file.close()
        self._raw.seek(0)
        self._file = decompressed(self._raw, self.compression, self.path)

    def close(self) -> None:
        if self._file is not self._raw:
            self._file.close()
        self._raw.close()

    def __enter__(self) -> FeedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Record]:
        readers = {"jsonl": self._jsonl, "json": self._json, "csv": self._csv, "xml": self._xml}
        if self.compression is None:
            return readers[self.format]()
        return self._decompressing(readers[self.format]())

    def _decompressing(self, records: Iterator[Record]) -> Iterator[Record]:
        """A corrupt or truncated compressed stream is a :class:`FeedError` naming the file."""
        try:
            yield from records
        except FeedError:
            raise
        except EOFError:  # (gzip: "Compressed file ended before the end-of-stream marker …")
            raise IncompleteError(
                f"{self.path}: incomplete: the {self.compression} stream ends early "
                "(the file was cut short?)"
            ) from None
        except OSError as e:  # gzip.BadGzipFile is an OSError
            raise FeedError(f"{self.path}: cannot decompress ({self.compression}): {e}") from None
        except Exception as e:
            if type(e).__name__ != "ZstdError":
                raise
            raise FeedError(f"{self.path}: cannot decompress ({self.compression}): {e}") from None

    def _object(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise FeedError(f"{self.path}: {where}: a record must be a JSON object")
        return value

    def _too_large(self, where: str) -> RecordTooLargeError:
        return RecordTooLargeError(
            f"{self.path}: {where}: a record of more than {self.limit:,} bytes "
            f"(--max-record-bytes); not read: a {self.format} record cannot be skipped unparsed"
        )

    def _jsonl(self) -> Iterator[Record]:
        lines = bounded_lines(self._file, self.limit, str(self.path), self.number)
        self.lines = 0  # (read so far, blank ones too: a split's count)
        for n, raw_line in enumerate(lines, 1):
            self.lines = n
            if isinstance(raw_line, Oversized):
                yield raw_line, {OVERSIZED: raw_line.where}
                continue
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as e:
                where = f"line {self.number(n)}"
                raise FeedError(f"{self.path}: {where}: not UTF-8: {e.reason}") from None
            if not line.strip():
                continue
            if n == 1 and self.at_start and line.startswith("\ufeff"):
                line = line[1:]
            if self.lazy:
                yield line, {}
                continue
            try:
                value = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise FeedError(f"{self.path}: line {self.number(n)}: {_not_json(e)}") from None
            yield line, self._object(value, f"line {self.number(n)}")

    def _json(self) -> Iterator[Record]:
        """A JSON array of objects, decoded element by element. A file whose first character
        is ``{`` is read as JSON lines (exports named .json that are really JSON lines)."""
        decoder = json.JSONDecoder()
        utf8 = codecs.getincrementaldecoder("utf-8-sig")()
        buf, pos, eof, want = "", 0, False, _CHUNK

        def more() -> bool:
            nonlocal buf, pos, eof, want
            if eof:
                return False
            chunk = self._file.read(want)
            try:
                text = utf8.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                raise FeedError(f"{self.path}: not UTF-8: {e.reason}") from None
            if not chunk:
                eof = True
            buf, pos = buf[pos:] + text, 0
            return bool(chunk) or bool(text)

        def skip_ws() -> str:
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in _WS:
                    pos += 1
                if pos < len(buf):
                    return buf[pos]
                if not more():
                    return ""

        first = skip_ws()
        if first == "{":
            self._rewind()
            yield from self._jsonl()
            return
        if first != "[":
            raise FeedError(f"{self.path}: not a JSON array of records (starts with {first!r})")
        pos += 1
        n = 0
        while True:
            c = skip_ws()
            if c == "]" and n == 0:
                pos += 1
                break
            if c == "":
                raise FeedError(f"{self.path}: the JSON array ends early after record {n}")
            if c != "{":
                raise FeedError(f"{self.path}: record {n + 1}: a record must be a JSON object")
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                    break
                except json.JSONDecodeError as e:
                    if eof:
                        raise FeedError(f"{self.path}: record {n + 1}: {_not_json(e)}") from None
                    if len(buf) - pos > self.limit:
                        raise self._too_large(f"record {n + 1}") from None
                    want = max(_CHUNK, len(buf))  # grow: a long record is re-parsed O(log) times
                    more()
                except (ValueError, RecursionError) as e:  # (more text cannot mend these)
                    raise FeedError(f"{self.path}: record {n + 1}: {_not_json(e)}") from None
            if end - pos > self.limit:  # (decoded within a chunk read ahead: refused all the same)
                raise self._too_large(f"record {n + 1}")
            n += 1
            raw = buf[pos:end]
            pos = end
            yield raw, self._object(value, f"record {n}")
            want = _CHUNK
            c = skip_ws()
            pos += 1
            if c == "]":
                break
            if c != ",":
                raise FeedError(f"{self.path}: after record {n}: expected ',' or ']', not {c!r}")
        if skip_ws():
            raise FeedError(f"{self.path}: text after the end of the JSON array")

    def _csv(self) -> Iterator[Record]:
        csv.field_size_limit(sys.maxsize)
        text = io.TextIOWrapper(self._file, encoding="utf-8-sig", newline="")
        row = [0, 0]  # (characters read since the last record; records read)

        def lines() -> Iterator[str]:  # (each read bounded: a record over the limit is refused)
            while line := text.readline(self.limit + 2):
                row[0] += len(line)
                if row[0] > self.limit + 2 or (len(line) > self.limit and line[-1] != "\n"):
                    raise self._too_large(f"record {row[1] + 1}")
                yield line

        try:
            reader = csv.DictReader(lines())
            self.fields = list(reader.fieldnames or [])
            row[0] = 0
            for record in reader:
                row[0], row[1] = 0, row[1] + 1
                yield None, {k: v for k, v in record.items() if k is not None}
        except UnicodeDecodeError as e:
            raise FeedError(f"{self.path}: not UTF-8: {e.reason}") from None
        except csv.Error as e:
            raise FeedError(f"{self.path}: line {reader.line_num}: {e}") from None
        finally:
            text.detach()

    def _xml(self) -> Iterator[Record]:
        root: ET.Element | None = None
        depth, n = 0, 0
        capped = Capped(self._file, self.limit, lambda: self._too_large(f"item {n + 1}"))
        try:
            for event, elem in ET.iterparse(io.BufferedReader(capped), events=("start", "end")):
                if event == "start":
                    depth += 1
                    if depth > MAX_XML_DEPTH:
                        raise FeedError(
                            f"{self.path}: item {n + 1}: XML nested more than {MAX_XML_DEPTH} "
                            "levels deep; not read"
                        )
                    if root is None:
                        root = elem
                    continue
                depth -= 1
                if depth == 1:  # an item
                    n += 1
                    yield None, {child.tag: _xml_value(child) for child in elem}
                    assert root is not None
                    root.clear()  # drop the item from the tree: memory stays one item
                    capped.reset()
        except ET.ParseError as e:
            raise FeedError(f"{self.path}: not XML after item {n}: {e}") from None


def _xml_value(elem: ET.Element) -> Any:
    """Scrapy's XmlItemExporter writes lists as ``<value>`` children and dicts as child fields."""
    children = list(elem)
    if not children:
        return elem.text or ""
    if all(child.tag == "value" for child in children):
        return [_xml_value(child) for child in children]
    return {child.tag: _xml_value(child) for child in children}
