"""The inputs of one batch job: files and globs, in the order given, each a feed (JSON lines,
JSON, CSV, XML; plain, gzip or zstd) or a WARC file.

An input is a local path or a URL (``s3://``, ``gs://``, ``hdfs://``, ``http(s)://``:
:mod:`.fs`); a listing file (``--inputs-from``, e.g. Common Crawl's ``warc.paths.gz``) names
more, one a line.

The order matters: a group's kept record is its first in input order, that is the order of the
inputs as given (a glob's files in name order), then each input's record order. A file named
twice (by two globs, or a glob and its name) is read once, at its first place.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from .bounded import DEFAULT_MAX_RECORD_BYTES
from .compression import FeedError, MissingExtraError, compression_of, decompressed, need_zstandard
from .feeds import FeedReader, feed_format
from .fs import UrlError, UrlPath, as_path, expand_url, is_url, local_name
from .source import Input
from .warc import WarcReader, is_warc, need_warcio

__all__ = [
    "INPUT_FORMATS",
    "Input",
    "InputError",
    "check_extras",
    "expand_inputs",
    "open_input",
    "read_listing",
]

INPUT_FORMATS = ("jsonl", "json", "csv", "xml", "warc")
_GLOB_CHARS = frozenset("*?[")


class InputError(FeedError):
    """An input that cannot be read at all (missing, not a regular file, a glob matching no
    file, a format that cannot be told); the message names it."""


def _input(path: Path | UrlPath, given: str | None) -> Input:
    if given == "warc" or (given is None and is_warc(str(path))):
        return Input(path, "warc")
    if given is not None and given not in INPUT_FORMATS:
        raise InputError(f"unknown input format {given!r}: use {', '.join(INPUT_FORMATS)}")
    return Input(path, feed_format(str(path), given), compression_of(str(path)))


def _urls(name: str | UrlPath) -> list[UrlPath]:
    try:
        return expand_url(name)
    except MissingExtraError:
        raise
    except UrlError as e:
        raise InputError(str(e)) from None


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
        if is_url(name):
            for url in _urls(name):  # (a URL's files: by their full URL)
                if url.url in seen:
                    repeats.append(str(url))
                    continue
                seen[url.url] = None
                inputs.append(_input(url, input_format))
            continue
        text = local_name(str(name))
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
            need_warcio(str(source.path))
        elif source.compression == "zstd":
            need_zstandard(str(source.path))


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


def read_listing(name: str) -> list[str]:
    """The inputs a listing file names, one path, URL or glob a line (blank lines and ``#``
    comments skipped), in order; the listing is a local file or a URL, plain or gzip (Common
    Crawl's ``warc.paths.gz``)."""
    try:
        path = as_path(name)
        with path.open("rb") as raw:
            data = decompressed(raw, compression_of(path.name), Path(path.name)).read()
        lines = data.decode("utf-8").splitlines()
    except UrlError as e:
        raise InputError(f"--inputs-from {e}") from None
    except FileNotFoundError:
        raise InputError(f"--inputs-from {path}: no such file") from None
    except UnicodeDecodeError as e:
        raise InputError(f"--inputs-from {path}: not UTF-8: {e.reason}") from None
    except (OSError, EOFError) as e:
        where = f"--inputs-from {path}"
        raise InputError(f"{where}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    names = [line.strip() for line in lines]
    names = [n for n in names if n and not n.startswith("#")]
    if not names:
        raise InputError(f"--inputs-from {path}: names no input")
    return names


def sources_of(
    path: str | Path | Input | Sequence[str | Path | Input], input_format: str | None
) -> list[Input]:
    """The inputs ``path`` names (files, globs, URLs or :class:`Input`), in order, each read
    once however often it is named."""
    given = [path] if isinstance(path, (str, Path, Input)) else list(path)
    out: list[Input] = []
    seen: set[Path | UrlPath] = {p.path.resolve() for p in given if isinstance(p, Input)}
    for p in given:
        if isinstance(p, Input):
            out.append(p)
            continue
        for found in expand_inputs([p], input_format)[0]:
            if found.path.resolve() not in seen:  # (a file named twice is read once)
                seen.add(found.path.resolve())
                out.append(found)
    if not out:
        raise FeedError("no input given")
    return out
