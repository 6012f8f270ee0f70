"""One input of a batch job, as named: its path or URL, format and compression.

Its own module so that what reads an input (:mod:`.splits`, :mod:`.warc`, :mod:`.feeds`) can
name it without importing :mod:`.inputs`, which opens inputs with those readers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .fs import UrlPath

__all__ = ["Input"]


@dataclass(frozen=True)
class Input:
    """One input file: ``format`` is a feed format or ``warc``; ``compression`` is ``gzip``,
    ``zstd`` or ``None`` (a WARC's own per-record gzip is warcio's business)."""

    path: Path | UrlPath
    format: str
    compression: str | None = None

    @property
    def is_warc(self) -> bool:
        return self.format == "warc"

    def __str__(self) -> str:
        return str(self.path)
