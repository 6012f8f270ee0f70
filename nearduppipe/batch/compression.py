"""Compressed inputs: gzip (standard library) and zstd (the optional ``zstandard`` package,
``nearduppipe[zstd]``), named by the file's last extension; and the errors every batch reader
raises."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import IO, Any, cast

from ..errors import NearDupError

__all__ = [
    "COMPRESSIONS",
    "FeedError",
    "MissingExtraError",
    "compression_of",
    "decompressed",
    "need_zstandard",
]

_CHUNK = 1 << 16


class FeedError(NearDupError, ValueError):
    """The input is not a feed of the expected format; the message names file and record."""


class MissingExtraError(FeedError):
    """Reading this input needs an optional package that is not installed; the message names
    the file, the package and the extra that installs it."""


COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}


def compression_of(path: str | Path) -> str | None:
    """``gzip``, ``zstd`` or ``None``, from the file's last extension."""
    return COMPRESSIONS.get(Path(path).suffix.lower())


def need_zstandard(path: object) -> Any:
    """The ``zstandard`` module, or a :class:`MissingExtraError` naming the extra."""
    try:
        import zstandard  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise MissingExtraError(
            f"{path}: reading zstd-compressed input needs the zstandard package: "
            f"pip install 'nearduppipe[zstd]'"
        ) from None
    return zstandard


def decompressed(raw: IO[bytes], compression: str | None, path: object) -> IO[bytes]:
    if compression is None:
        return raw
    if compression == "gzip":
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    reader = need_zstandard(path).ZstdDecompressor().stream_reader(raw, closefd=False)
    return cast(IO[bytes], io.BufferedReader(reader, _CHUNK))
