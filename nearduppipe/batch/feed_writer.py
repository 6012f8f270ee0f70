"""Writing kept records in the feed formats Scrapy's exporters write (JSON lines, JSON, CSV,
XML), as they lay them out: records read from JSON keep their raw text when written to JSON
(byte for byte), and a JSON line over the read limit is copied a chunk at a time. A lone
surrogate (a JSON feed's ``"\\udc80"``), which UTF-8 cannot encode, is escaped in JSON and
made U+FFFD in CSV and XML (:mod:`.unicode_out`)."""

from __future__ import annotations

import csv
import json
import re
from typing import Any, TextIO, cast
from xml.sax.saxutils import XMLGenerator

from ..stores.checks import clean_text
from .bounded import Oversized
from .compression import FeedError
from .unicode_out import json_text

__all__ = ["FeedWriter", "neutralise_formula"]

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise_formula(value: str) -> str:
    """OWASP's CSV-injection defence: a cell a spreadsheet would run as a formula (starting
    with ``= + - @``, tab or CR) is prefixed with ``'``. Plain numbers (``-12.5``) are left."""
    if value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def _csv_cell(value: Any) -> str:
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    elif isinstance(value, (list, tuple)):  # as Scrapy's CsvItemExporter joins multivalued
        text = ",".join(
            v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value
        )
    elif isinstance(value, (dict, bool)) or value is None:
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    return neutralise_formula(clean_text(text))


class FeedWriter:
    """Writes records in one of the feed formats, as Scrapy's exporters lay them out. Records
    read from JSON keep their raw text when written to JSON (byte for byte).

    ``part``: one split's records only (a task's share of the output, :mod:`.write_task`):
    no header nor end, and each JSON record after a separator; the driver joins the parts
    in input order with :meth:`write_part`, which drops the first part's first separator."""

    def __init__(
        self, out: TextIO, fmt: str, fields: list[str], source_format: str, part: bool = False
    ) -> None:
        self.out = out
        self.format = fmt
        self.fields = fields
        self.source_format = source_format
        self._n = 1 if part else 0  # (a part's records each follow a separator)
        self.part = part
        self._csv: Any = None
        self._xml: XMLGenerator | None = None
        if part:
            if fmt == "csv":
                self._csv = csv.writer(out, lineterminator="\r\n")
            elif fmt == "xml":
                self._xml = XMLGenerator(
                    cast(Any, out), encoding="utf-8", short_empty_elements=False
                )
        elif fmt == "json":
            out.write("[")
        elif fmt == "csv":
            self._csv = csv.writer(out, lineterminator="\r\n")
            self._csv.writerow([neutralise_formula(clean_text(f)) for f in fields])
        elif fmt == "xml":
            self._xml = XMLGenerator(cast(Any, out), encoding="utf-8", short_empty_elements=False)
            self._xml.startDocument()
            self._xml.startElement("items", {})  # type: ignore[arg-type]
            out.write("\n")

    def write(self, raw: str | Oversized | None, record: dict[str, Any]) -> None:
        self._n += 1
        if isinstance(raw, Oversized):  # (a JSON line not read: copied through, when it can be)
            if self.format not in ("jsonl", "json") or self.source_format != "jsonl":
                raise FeedError(
                    f"{raw.where}: a record over --max-record-bytes is kept but cannot be "
                    f"written as {self.format} without being read; write JSON lines"
                )
            self.out.write("" if self.format == "jsonl" else "\n" if self._n == 1 else ",\n")
            raw.copy(self.out.write)
            self.out.write("\n" if self.format == "jsonl" else "")
            return
        if self.format == "jsonl":
            if raw is not None and self.source_format == "jsonl":
                self.out.write(raw if raw.endswith("\n") else raw + "\n")
            else:
                self.out.write(json_text(record) + "\n")
        elif self.format == "json":
            text = raw.rstrip("\r\n") if raw is not None else json_text(record)
            self.out.write(("\n" if self._n == 1 else ",\n") + text)
        elif self.format == "csv":
            self._csv.writerow([_csv_cell(record.get(f)) for f in self.fields])
        else:
            assert self._xml is not None
            self._xml.startElement("item", {})  # type: ignore[arg-type]
            for name, value in record.items():
                self._xml_field(name, value)
            self._xml.endElement("item")
            self.out.write("\n")

    def _xml_field(self, name: str, value: Any) -> None:
        assert self._xml is not None
        name = clean_text(name)
        self._xml.startElement(name, {})  # type: ignore[arg-type]
        if isinstance(value, dict):
            for k, v in value.items():
                self._xml_field(str(k), v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                self._xml_field("value", v)
        elif value is not None:
            text = value if isinstance(value, str) else json.dumps(value)
            self._xml.characters(clean_text(text))
        self._xml.endElement(name)

    def write_part(self, text: str) -> None:
        """A part's text (written with ``part=True``), as it is: parts in input order make
        the bytes one writer of every record makes."""
        if not text:
            return
        if self.format == "json" and self._n == 0:
            text = text[1:]  # (the first record follows "[" and a newline, not a comma)
        self._n += 1
        self.out.write(text)

    def close(self) -> None:
        if self.part:
            return
        if self.format == "json":
            self.out.write("\n]\n")
        elif self.format == "xml":
            assert self._xml is not None
            self._xml.endElement("items")
            self._xml.endDocument()
            self.out.write("\n")
