"""The inputs of one batch job: files and globs, in the order given, each a feed (JSON lines,
JSON, CSV, XML; plain, gzip or zstd) or a WARC file.

The order matters: a group's kept record is its first in input order, that is the order of the
inputs as given (a glob's files in name order), then each input's record order. A file named
twice (by two globs, or a glob and its name) is read once, at its first place.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .bounded import DEFAULT_MAX_RECORD_BYTES
from .compression import FeedError, compression_of, need_zstandard
from .feeds import FeedReader, feed_format
from .warc import WarcReader, is_warc, need_warcio

__all__ = ["INPUT_FORMATS", "Input", "InputError", "check_extras", "expand_inputs", "open_input"]

INPUT_FORMATS = ("jsonl", "json", "csv", "xml", "warc")
_GLOB_CHARS = frozenset("*?[")


class InputError(FeedError):
    """An input that cannot be read at all (missing, not a regular file, a glob matching no
    file, a format that cannot be told); the message names it."""


@dataclass(frozen=True)
class Input:
    """One input file: ``format`` is a feed format or ``warc``; ``compression`` is ``gzip``,
    ``zstd`` or ``None`` (a WARC's own per-record gzip is warcio's business)."""

    path: Path
    format: str
    compression: str | None = None

    @property
    def is_warc(self) -> bool:
        return self.format == "warc"

    def __str__(self) -> str:
        return str(self.path)


def _input(path: Path, given: str | None) -> Input:
    if given == "warc" or (given is None and is_warc(path)):
        return Input(path, "warc")
    if given is not None and given not in INPUT_FORMATS:
        raise InputError(f"unknown input format {given!r}: use {', '.join(INPUT_FORMATS)}")
    return Input(path, feed_format(path, given), compression_of(path))


def _regular(path: Path, shown: str) -> None:
    """Inputs are read twice: only a regular file will do (not a FIFO, a device, a folder)."""
    if not path.exists():
        raise InputError(f"{shown}: no such file")
    if not path.is_file():
        raise InputError(f"{shown}: is not a file")


def expand_inputs(
    names: Sequence[str | Path], input_format: str | None = None
) -> tuple[list[Input], list[str]]:
    """The inputs named by ``names`` (paths or globs), in order, each once; and the names
    dropped because they repeat an earlier input. ``input_format`` applies to every input
    (default: each file's extension)."""
    inputs: list[Input] = []
    seen: dict[tuple[int, int] | str, None] = {}
    repeats: list[str] = []
    for name in names:
        text = str(name)
        paths: list[Path]
        if _GLOB_CHARS & set(text) and not Path(text).exists():
            matched = sorted(glob.glob(os.path.expanduser(text), recursive=True))
            paths = [Path(m) for m in matched if Path(m).is_file()]
            if not paths:
                raise InputError(f"{text}: matches no file")
        else:
            path = Path(text)
            _regular(path, text)
            paths = [path]
        for path in paths:
            st = path.stat()
            ident = (st.st_dev, st.st_ino)
            if ident in seen:
                repeats.append(str(path))
                continue
            seen[ident] = None
            inputs.append(_input(path, input_format))
    return inputs, repeats


def check_extras(inputs: Sequence[Input]) -> None:
    """A :class:`~.compression.MissingExtraError` for the first input needing an optional
    package that is missing, before any input is read."""
    for source in inputs:
        if source.is_warc:
            need_warcio(source.path)
        elif source.compression == "zstd":
            need_zstandard(source.path)


def open_input(
    source: Input,
    key_field: str,
    html_field: str,
    payload: bool = True,
    limit: int = DEFAULT_MAX_RECORD_BYTES,
) -> FeedReader | WarcReader:
    """A streaming reader of ``source``: ``(raw JSON or None, record)`` pairs, ``size`` and
    ``position()`` in bytes of the file, ``fields`` (a CSV header). WARC records carry the URL
    under ``key_field`` and the page under ``html_field`` (with ``payload``). ``limit``: the
    largest record read, in bytes (:mod:`.bounded`)."""
    if source.is_warc:
        return WarcReader(source.path, key_field, html_field, payload, limit)
    return FeedReader(source.path, source.format, source.compression, limit)
