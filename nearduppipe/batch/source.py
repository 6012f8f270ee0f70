"""One input of a batch job, as named: its path or URL, format and compression.

Its own module so that what reads an input (:mod:`.splits`, :mod:`.warc`, :mod:`.feeds`) can
name it without importing :mod:`.inputs`, which opens inputs with those readers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from .fs import UrlPath

__all__ = ["Input", "anchored"]


@dataclass(frozen=True)
class Input:
    """One input file: ``format`` is a feed format or ``warc``; ``compression`` is ``gzip``,
    ``zstd`` or ``None`` (a WARC's own per-record gzip is warcio's business); ``given``: the
    name as the user gave it, when ``path`` was made absolute (:func:`anchored`)."""

    path: Path | UrlPath
    format: str
    compression: str | None = None
    given: str | None = None

    @property
    def is_warc(self) -> bool:
        return self.format == "warc"

    def __str__(self) -> str:
        """The name as given (``-o``'s WARC locators: the same bytes on every engine)."""
        return self.given if self.given is not None else str(self.path)


def anchored(source: Input) -> Input:
    """``source`` with a relative local path made absolute from the driver's folder, for tasks
    that run elsewhere (a Spark or Dask cluster's workers start in folders of their own, where
    ``feed.jsonl`` names nothing or another file). URLs and absolute paths are unchanged; the
    name given stays what ``str()`` shows."""
    path = source.path
    if isinstance(path, UrlPath) or path.is_absolute():
        return source
    return replace(source, path=path.absolute(), given=str(path))
