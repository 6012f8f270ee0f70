"""Inputs cut into splits, each read by one task and by no other: byte ranges of a file, each
split owning the records that start in it, so that every record is read once, by its owner,
and the driver reads none (it only asks each input's size).

- **uncompressed JSON lines** (``lines``): a split ``[start, end)`` owns the lines whose
  preceding newline lies in it (the first line: split 0's). Its task skips through the first
  newline at or after ``start`` (the end of a line an earlier split owns) and reads lines up
  to and including the first newline at or after ``end`` (the line straddling ``end`` is its
  own): the splits' regions tile the file;
- **zstd of several frames** (``zstd``): a split owns the frames that start in it; its task
  finds its first frame (the zstd magic, the frame header checked) and owns the lines whose
  preceding newline lies in its frames' decompressed bytes, reading on into the next frames
  only to finish its last line (frames are cut anywhere: a line may straddle frames);
- **WARC.gz** (``members``): a split owns the records whose gzip member starts in it; its task
  finds its first member (the gzip magic, decompressing to ``WARC/``; empty members before it
  are its record's, as warcio counts offsets);
- anything else (``whole``): one task reads the input: a gzip stream (it cannot be entered
  mid-stream), JSON arrays, CSV and XML (a record cannot be told from its bytes), an
  uncompressed WARC, a stream over http(s). A zstd file of one frame, or a ``.warc.gz`` of one
  member, has its one frame (member) read by one split's task.

Each task reports where its first record started and where the next split's first record
starts (found reading its last record through): the driver checks that they meet. A boundary
found by a magic number inside compressed data (for zstd the first block must decompress to
text too; a ``.warc.gz`` archived in a ``.warc.gz`` passes: deflate stores its members byte for
byte) does not meet the split before's word, which is taken (that split started at a true
boundary, the first at the file's start): the driver has the split read again from there
(:func:`.walk.read_splits`), and stops the run only if they disagree still, rather than read a
record twice.

Numbers in messages (``line 12``, ``record 3``) are counted within a split; a task marks them
(:func:`mark`) and the driver renumbers them (:func:`renumber`) once it knows the counts of the
splits before.
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from .compression import FeedError, IncompleteError, need_zstandard

if TYPE_CHECKING:
    from .source import Input

__all__ = [
    "MIN_SPLIT_BYTES",
    "Split",
    "SplitBoundaryError",
    "how_split",
    "mark",
    "plan_splits",
    "renumber",
]

MIN_SPLIT_BYTES = 8 << 20  # smaller splits cost more in tasks than they save
MAX_SPLIT_BYTES = 256 << 20  # larger inputs get more splits than cores: tasks stay short
SPLITS_PER_CORE = 2  # (over the splittable bytes: a slow split leaves other work to share)
_CHUNK = 1 << 16
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_HEAD = (1 << 17) + 64  # a frame's header and its first block, whole
_SKIPPABLE = 0x184D2A50  # a skippable frame's magic (little-endian), its low 4 bits free
_GZIP_MAGIC = b"\x1f\x8b\x08"
_MARK = re.compile("\0([LR])(\\d+)\0")


class SplitBoundaryError(FeedError):
    """Two splits of one input disagree on where a record starts (a frame or member found by
    its magic number inside compressed data): the run stops rather than read a record twice."""


@dataclass(frozen=True)
class Split:
    """One task's share of input number ``n``: the records that start in ``[start, end)`` of
    its bytes (compressed bytes for zstd and WARC.gz), read as ``how`` (module doc)."""

    n: int
    source: Input
    part: int
    start: int
    end: int
    how: str  # lines, zstd, members, whole

    @property
    def first(self) -> bool:
        return self.start == 0


def how_split(source: Input) -> str:
    """How ``source`` is split: ``lines``, ``zstd``, ``members`` or ``whole`` (module doc)."""
    path = source.path
    if getattr(path, "protocol", "file") in ("http", "https"):
        return "whole"  # (read as a stream: no ranges)
    if source.format == "jsonl" and source.compression is None:
        return "lines"
    if source.format == "jsonl" and source.compression == "zstd":
        return "zstd"
    if source.is_warc and str(path).lower().endswith(".gz"):
        return "members"
    return "whole"


def plan_splits(sources: list[Input], cores: int, min_bytes: int | None = None) -> list[Split]:
    """Every input's splits, in input order: about :data:`SPLITS_PER_CORE` ``× cores`` over the
    splittable bytes,
    none under ``min_bytes`` (default :data:`MIN_SPLIT_BYTES`) nor over
    :data:`MAX_SPLIT_BYTES`. The driver asks each input's size, nothing more."""
    smallest = MIN_SPLIT_BYTES if min_bytes is None else max(1, min_bytes)
    hows = [how_split(s) for s in sources]
    sizes = [
        s.path.stat().st_size if h != "whole" else 0 for s, h in zip(sources, hows, strict=True)
    ]
    total = sum(sizes) or 1
    out: list[Split] = []
    for n, (source, how, size) in enumerate(zip(sources, hows, sizes, strict=True)):
        parts = 1
        if how != "whole" and size:
            parts = -(-SPLITS_PER_CORE * cores * size // total)
            parts = max(parts, -(-size // MAX_SPLIT_BYTES))
            parts = max(1, min(parts, size // smallest))
        if parts == 1:
            out.append(Split(n, source, 0, 0, size, "whole"))
            continue
        step = -(-size // parts)
        for p, start in enumerate(range(0, size, step)):
            out.append(Split(n, source, p, start, min(size, start + step), how))
    return out


def mark(kind: str) -> Callable[[int], str]:
    """How a task writes a number counted within its split: ``L`` lines (or WARC records),
    ``R`` records; :func:`renumber` makes them the input's."""
    return lambda k: f"\0{kind}{k}\0"


def renumber(text: str, lines_before: int, records_before: int) -> str:
    """A task's message with its marked numbers made the input's."""
    return _MARK.sub(
        lambda m: str(int(m[2]) + (lines_before if m[1] == "L" else records_before)), text
    )


Chunk = tuple[bytes, bool]  # decompressed bytes, and whether they lie in the split


def region(chunks: Iterator[Chunk], first: bool) -> Iterator[bytes]:
    """The bytes of the split's lines out of ``chunks`` (each wholly in the split or not):
    from just after the first newline in the split (the start for the first split) through
    the first newline after the split. Nothing when the split holds no newline after which a
    line starts (a long line that began earlier)."""
    started = first
    for data, owned in chunks:
        if not started:
            if not owned:
                return
            cut = data.find(b"\n")
            if cut < 0:
                continue
            started, data = True, data[cut + 1 :]
        if not owned:
            cut = data.find(b"\n")
            if cut >= 0:
                yield data[: cut + 1]
                return
        if data:
            yield data


class ChunkStream(io.RawIOBase):
    """A readable stream of the byte strings an iterator yields."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self.chunks, self.pending = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            self.pending = next(self.chunks, b"")
            if not self.pending:
                return 0
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def plain_chunks(raw: IO[bytes], start: int, end: int) -> Iterator[Chunk]:
    """An uncompressed file from ``start`` on, cut at ``end``: ``(bytes, before end)``."""
    raw.seek(start)
    at = start
    while data := raw.read(_CHUNK):
        if at < end < at + len(data):
            yield data[: end - at], True
            yield data[end - at :], False
        else:
            yield data, at < end
        at += len(data)


def find_start(
    raw: IO[bytes],
    start: int,
    end: int,
    magic: bytes,
    valid: Callable[[bytes], bool],
    head: int = 1 << 12,
) -> int | None:
    """The first offset in ``[start, end)`` where ``magic`` starts and ``valid`` takes the
    ``head`` bytes from there (a frame or member header); ``None`` when there is none."""
    at = start
    raw.seek(at)
    tail = b""
    while at < end:
        data = raw.read(_CHUNK)
        if not data:
            return None
        window, base = tail + data, at - len(tail)
        k = window.find(magic)
        while k >= 0 and base + k < end:
            p = base + k
            raw.seek(p)
            if valid(raw.read(head)):
                return p
            k = window.find(magic, k + 1)
        at += len(data)
        raw.seek(at)
        tail = window[-(len(magic) - 1) :]
    return None


class Bounds:
    """Where a split's records start, and where the next split's start (found reading its
    last record through): checked against each other on the driver."""

    def __init__(self) -> None:
        self.first_at: int | None = None
        self.next_at: int | None = None


def zstd_chunks(raw: IO[bytes], split: Split, name: str, bounds: Bounds) -> Iterator[Chunk]:
    """The decompressed bytes of the frames from the split's first on, each chunk flagged
    with whether its frame starts in the split."""
    zstandard = need_zstandard(name)

    def valid(head: bytes) -> bool:
        return zstd_frame_starts(zstandard, head)

    first = (
        0
        if split.start == 0
        else find_start(raw, split.start, split.end, _ZSTD_MAGIC, valid, _ZSTD_HEAD)
    )
    if first is None or first >= split.end:
        return
    bounds.first_at = first
    raw.seek(first)
    dctx = zstandard.ZstdDecompressor()
    frame_at, fed = first, first  # (the frame's start; compressed bytes fed so far)
    obj: Any = None
    pending = b""
    while True:
        if obj is not None and obj.eof:
            pending, fed = _past_skippable(raw, obj.unused_data + pending, fed, name)
            frame_at, obj = fed - len(pending), None
            if frame_at >= split.end and bounds.next_at is None:
                bounds.next_at = frame_at
        if not pending:
            pending = raw.read(_CHUNK)
            fed += len(pending)
        if not pending:
            if obj is not None:
                raise IncompleteError(
                    f"{name}: incomplete: the zstd stream ends inside a frame "
                    "(the file was cut short?)"
                )
            bounds.next_at = bounds.next_at if bounds.next_at is not None else frame_at
            return
        if obj is None:
            obj = dctx.decompressobj()
        data, pending = pending[:1024], pending[1024:]
        try:
            out = obj.decompress(data)
        except zstandard.ZstdError as e:
            raise FeedError(f"{name}: cannot decompress (zstd): {e}") from None
        if out:
            yield out, frame_at < split.end


def zstd_frame_starts(zstandard: Any, head: bytes) -> bool:
    """Whether a zstd frame of JSON lines starts ``head`` (its first block whole: up to 128 KiB
    and headers). The magic number turns up by chance in compressed data about once in 4 GiB,
    and a frame header alone passes for 42% of random bytes; a false start also has to
    decompress without error to text (UTF-8 with at most a few bad bytes), which random bytes
    do not."""
    try:
        zstandard.get_frame_parameters(head)
        obj = zstandard.ZstdDecompressor().decompressobj()
        out = obj.decompress(head)
    except zstandard.ZstdError:
        return False
    if not out:
        return bool(obj.eof)  # (an empty frame, whole; else a first block that did not fit)
    # (a frame may start inside a character, and a line may hold a stray bad byte: a few
    # replacement characters are text; random bytes give one in two)
    text = out[: 1 << 16].decode("utf-8", "replace")
    bad: int = text.count("\ufffd")
    return bad <= 4 + len(text) // 100


def _past_skippable(raw: IO[bytes], pending: bytes, fed: int, name: str) -> tuple[bytes, int]:
    """``pending`` (what follows a frame) past any skippable frames (pzstd puts one before
    each frame; seek tables are one): the next frame starts where the next split's search
    finds it, the zstd magic, so both sides name one offset. Returns it and the bytes fed."""
    while True:
        while len(pending) < 8:
            more = raw.read(_CHUNK)
            if not more:
                return pending, fed
            pending, fed = pending + more, fed + len(more)
        if int.from_bytes(pending[:4], "little") & 0xFFFFFFF0 != _SKIPPABLE:
            return pending, fed
        size = 8 + int.from_bytes(pending[4:8], "little")
        if size <= len(pending):
            pending = pending[size:]
        else:  # (up to 4 GB of skipped bytes: passed by, never held)
            raw.seek(size - len(pending), io.SEEK_CUR)
            fed, pending = fed + size - len(pending), b""


def member_start(raw: IO[bytes], split: Split) -> int | None:
    """The offset of the first gzip member in the split that decompresses to a WARC record."""
    if split.start == 0:
        return 0

    return find_start(raw, split.start, split.end, _GZIP_MAGIC, _warc_members)


def _warc_members(head: bytes) -> bool:
    """Whether gzip members start ``head``, the first that is not empty decompressing to a
    WARC record: an empty member (a writer's flush) belongs to the record after it, as warcio
    counts record offsets (the split before names its start as the next record's)."""
    try:
        while head:
            member = zlib.decompressobj(31)
            out = member.decompress(head, 16)
            if out or not member.eof:
                return out.startswith(b"WARC/")
            head = member.unused_data
    except zlib.error:
        pass
    return False
