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
    "IncompleteError",
    "MissingExtraError",
    "OutputError",
    "ZstdStream",
    "compression_of",
    "decompressed",
    "need_zstandard",
]

_CHUNK = 1 << 16


class FeedError(NearDupError, ValueError):
    """The input is not a feed of the expected format; the message names file and record."""


class OutputError(FeedError):
    """The output, or its parts in the temporary folder, could not be written (a full disk):
    not an input's fault, so the command names no input."""


class IncompleteError(FeedError):
    """A compressed stream or a WARC file that ends early (cut short by a copy, a full disk):
    what it held after that point is lost; the message names the file."""


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
    stream = ZstdStream(raw, need_zstandard(path), str(path))
    return cast(IO[bytes], io.BufferedReader(stream, _CHUNK))


class ZstdStream(io.RawIOBase):
    """The decompressed bytes of a zstd file of one or more frames; a file that ends inside
    a frame raises :class:`IncompleteError` (``zstandard``'s stream reader stops silently)."""

    def __init__(self, raw: IO[bytes], zstandard: Any, name: str) -> None:
        self.raw, self.zstandard, self.name = raw, zstandard, name
        self._dctx = zstandard.ZstdDecompressor()
        self._obj: Any = None  # the frame being decompressed
        self._input = b""  # compressed, not yet fed (fed a little at a time: a block of a few
        # bytes can stand for 128 KB, so 64 KB fed at once could stand for gigabytes)
        self._pending = b""  # decompressed, not yet read
        self._at = 0

    def readable(self) -> bool:
        return True

    def _feed(self) -> bool:
        """Decompress some more; False at the end of the file."""
        if self._obj is not None and self._obj.eof:
            self._input = self._obj.unused_data + self._input
            self._obj = None
        if not self._input:
            self._input = self.raw.read(_CHUNK)
        if not self._input:
            if self._obj is not None:  # (inside a frame)
                raise IncompleteError(
                    f"{self.name}: incomplete: the zstd stream ends inside a frame "
                    "(the file was cut short?)"
                )
            return False
        if self._obj is None:
            self._obj = self._dctx.decompressobj()
        data, self._input = self._input[:1024], self._input[1024:]
        try:
            self._pending, self._at = self._obj.decompress(data), 0
        except self.zstandard.ZstdError as e:
            raise FeedError(f"{self.name}: cannot decompress (zstd): {e}") from None
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at >= len(self._pending):
            if not self._feed():
                return 0
        n = min(len(buffer), len(self._pending) - self._at)
        buffer[:n] = self._pending[self._at : self._at + n]
        self._at += n
        return n
