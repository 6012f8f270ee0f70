"""Reading records within a size limit (``dedup --max-record-bytes``): no record is ever read
whole when it is larger, and a stream that ends early says so.

- :class:`Oversized`: what a reader yields for a JSON line (or WARC record) over the limit,
  instead of its text: the record is not parsed nor fingerprinted, named and counted, and
  kept (a JSON line is copied to ``-o`` a chunk at a time, :meth:`Oversized.copy`);
- :func:`bounded_lines`: the lines of a stream, each at most the limit (longer ones are
  :class:`Oversized`);
- :class:`Capped`: a stream that refuses to give more than the limit between two records
  (CSV, XML: a record there cannot be skipped without parsing it).

A compressed stream that ends early is :class:`~.compression.IncompleteError`.
"""

from __future__ import annotations

import codecs
import io
from collections.abc import Callable, Iterator
from typing import IO, Any

from .compression import FeedError

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "OVERSIZED",
    "Capped",
    "Oversized",
    "RecordTooLargeError",
    "bounded_lines",
]

DEFAULT_MAX_RECORD_BYTES = 5_000_000  # as NEARDUP_MAX_HTML_BYTES: a crawl refuses larger pages
OVERSIZED = "\0oversized"  # the record dict's key of an oversized record (no feed has it)
_CHUNK = 1 << 16


class RecordTooLargeError(FeedError):
    """A record over ``--max-record-bytes`` in a format where it cannot be skipped without
    being parsed (a JSON array, CSV, XML): the message names it and the option."""


class Oversized:
    """A record over the limit, not read: ``where`` names it (``line 3``), ``head`` is its
    first bytes read and ``rest`` yields the others (each chunk once). Unless :meth:`copy`
    takes them, the reader discards them (:meth:`drain`) before reading on."""

    def __init__(self, where: str, head: bytes, rest: Iterator[bytes] | None) -> None:
        self.where = where
        self.head = head
        self.size = len(head)
        self._rest = rest

    def drain(self) -> None:
        for chunk in self._rest or ():
            self.size += len(chunk)
        self._rest = None

    def copy(self, write: Callable[[str], Any]) -> None:
        """The record's text to ``write``, a chunk at a time (its line end dropped)."""
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        pending = self.head
        for chunk in self._rest or ():
            self.size += len(chunk)
            write(utf8.decode(pending))
            pending = chunk
        self._rest = None
        write(utf8.decode(pending.rstrip(b"\r\n"), final=True))


def _tail(stream: IO[bytes]) -> Iterator[bytes]:
    """The rest of a line, in chunks, its line end included."""
    while True:
        chunk = stream.readline(_CHUNK)
        if not chunk:
            return
        yield chunk
        if chunk.endswith(b"\n"):
            return


def bounded_lines(
    stream: IO[bytes], limit: int, name: str, number: Callable[[int], str] = str
) -> Iterator[bytes | Oversized]:
    """Every line of ``stream`` (its end included), or an :class:`Oversized` for a line of
    more than ``limit`` bytes (its end not counted; ``name: line N``, N as ``number`` writes
    it: a split's task marks it), read no further than ``limit + 2`` bytes at a time."""
    n = 0
    while True:
        line = stream.readline(limit + 2)
        if not line:
            return
        n += 1
        body = len(line.rstrip(b"\r\n"))
        whole = line.endswith(b"\n") or len(line) < limit + 2
        if body <= limit and whole:
            yield line
            continue
        record = Oversized(f"{name}: line {number(n)}", line, None if whole else _tail(stream))
        yield record
        record.drain()


class Capped(io.RawIOBase):
    """``stream`` read through, refusing to pass more than ``limit`` bytes (plus a read's
    worth: parsers read ahead) between two calls of :meth:`reset`."""

    def __init__(self, stream: IO[bytes], limit: int, refuse: Callable[[], FeedError]) -> None:
        self.stream, self.limit, self.refuse = stream, limit, refuse
        self.since = 0

    def readable(self) -> bool:
        return True

    def reset(self) -> None:
        self.since = 0

    def readinto(self, buffer: Any) -> int:
        if self.since > self.limit + 2 * _CHUNK:
            raise self.refuse()
        data = self.stream.read(min(len(buffer), _CHUNK))
        buffer[: len(data)] = data
        self.since += len(data)
        return len(data)
