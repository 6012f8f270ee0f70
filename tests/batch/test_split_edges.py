"""Edge cases of reading inputs in splits (batch/splits.py, batch/split_task.py, batch/walk.py):

- a ``.warc.gz`` archiving a ``.warc.gz``: deflate stores incompressible data as is, so the
  inner archive's gzip members (each one decompressing to ``WARC/``) lie byte for byte inside
  the outer record's member; a split that starts inside it finds one of them. The split before
  knows where the next record really starts: the driver reads the split again from there;
- empty gzip members (a writer's flush) in a ``.warc.gz``: warcio counts one as the start of
  the record after it, and so does a split's search;
- CSV rows of more than 10,000 fields and fields over the csv module's default limit (128 KiB)
  are read whole (not a bug: the reader lifts the limit in every process; kept here as a test);
- an input that fails between being opened and being sized (deleted, a dropped connection)
  leaves no file open."""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import sys
import zlib
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from nearduppipe.batch import splits as splits_module
from nearduppipe.batch.core import Fields
from nearduppipe.batch.feeds import FeedReader
from nearduppipe.batch.inputs import Input, sources_of
from nearduppipe.batch.records import dedup_records
from nearduppipe.batch.split_task import Wants, open_split, read_split
from nearduppipe.batch.splits import Bounds, Split, plan_splits
from nearduppipe.batch.walk import Walk, read_splits
from nearduppipe.fingerprint.page import FingerprintParams
from nearduppipe.fingerprint.rule import Rule

from .test_dedup_inputs import as_html, planted, write_warc
from .test_engines import dask, spark  # noqa: F401  (the engines' fixtures)

FIELDS = Fields("text", "html", "url")
PARAMS = FingerprintParams()
WANTS = Wants(keys=True)
GZIP_MAGIC = b"\x1f\x8b\x08"


def _read(source: Input, cuts: list[int], how: str, size: int) -> tuple[Walk, list[Split]]:
    """The records of ``source`` read as splits cut at ``cuts``, as the driver reads them
    (a split read again from where the one before says its first record starts)."""
    points = [0, *cuts, size]
    planned = [Split(0, source, p, a, b, how) for p, (a, b) in enumerate(pairwise(points))]
    walk = Walk(Rule(), "first", keys=True)

    def run(splits: list[Split]) -> Any:
        return (read_split(s, FIELDS, PARAMS, WANTS) for s in splits)

    for split, result in read_splits(run, planned, walk):
        walk.add(split, result)
    return walk, planned


def _same(a: Walk, b: Walk) -> None:
    assert a.keys == b.keys
    assert list(a.fps) == list(b.fps) and a.ok == b.ok and list(a.lengths) == list(b.lengths)


def _small_splits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(splits_module, "MIN_SPLIT_BYTES", 1024)
    monkeypatch.setattr(splits_module, "SPLITS_PER_CORE", 8)


def _dedup(path: Path, out: Path, engine: Any = None) -> str:
    with out.open("w", encoding="utf-8") as f:
        dedup_records(path, engine=engine, workers=2, keep_texts=False, output=f)
    return out.read_text(encoding="utf-8")


# --- a .warc.gz whose payload is a .warc.gz ---------------------------------------------------


def _nested_warc(tmp: Path) -> Path:
    """Pages, and among them a response whose payload is a ``.warc.gz`` of six pages of
    random text (incompressible once gzipped: the outer member stores it as is)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789 "
    inner_pages = [
        {"url": f"https://inner.example/{i}", "html": "".join(rng.choices(letters, k=40_000))}
        for i in range(6)
    ]
    inner = write_warc(tmp / "inner.warc.gz", inner_pages, extras=False).read_bytes()
    path = tmp / "outer.warc.gz"
    html = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    archive = StatusAndHeaders(
        "200 OK", [("Content-Type", "application/warc")], protocol="HTTP/1.1"
    )
    with path.open("wb") as f:
        w = WARCWriter(f, gzip=True)
        for k, r in enumerate(as_html(r) for r in planted(groups=3, distinct=4, seed=9)):
            if k == 3:
                w.write_record(
                    w.create_warc_record(
                        "https://x.example/inner.warc.gz", "response",
                        payload=io.BytesIO(inner), http_headers=archive,
                    )
                )  # fmt: skip
            body = io.BytesIO(r["html"].encode())
            w.write_record(
                w.create_warc_record(r["url"], "response", payload=body, http_headers=html)
            )
    return path


def _inner_members(data: bytes) -> list[int]:
    """Offsets of gzip members decompressing to a WARC record that are not the file's own
    (inside another member)."""
    own, at = set(), 0
    while at < len(data):
        own.add(at)
        d = zlib.decompressobj(31)
        d.decompress(data[at:])
        at = len(data) - len(d.unused_data)
    found = []
    k = data.find(GZIP_MAGIC)
    while k >= 0:
        if k not in own:
            try:
                if zlib.decompressobj(31).decompress(data[k : k + 4096], 16).startswith(b"WARC/"):
                    found.append(k)
            except zlib.error:
                pass
        k = data.find(GZIP_MAGIC, k + 1)
    return found


def test_a_warc_gz_inside_a_warc_gz_is_read_once_whatever_the_splits(tmp_path: Path) -> None:
    pytest.importorskip("warcio")
    path = _nested_warc(tmp_path)
    data = path.read_bytes()
    inner = _inner_members(data)
    assert len(inner) >= 2  # (the test's premise: the inner members lie in the file as they are)
    source = sources_of(path, None)[0]
    size = len(data)
    whole, _ = _read(source, [], "whole", size)
    assert len(whole.fps) == 16  # (the archive's record is a response, not HTML: not a page)
    cuts = {c for k in inner for c in (k - 1, k, k + 1)} | set(range(1, size, size // 23))
    for cut in sorted(cuts):
        walk, _ = _read(source, [cut], "members", size)
        _same(walk, whole)
    for cut in range(1, size - 30_000, size // 9):
        walk, _ = _read(source, [cut, cut + 30_000], "members", size)
        _same(walk, whole)


def test_a_split_read_again_starts_where_the_split_before_said(tmp_path: Path) -> None:
    """The split read again is the one pass 2 reads (the plan is corrected in place)."""
    pytest.importorskip("warcio")
    path = _nested_warc(tmp_path)
    inner = _inner_members(path.read_bytes())
    source = sources_of(path, None)[0]
    walk, planned = _read(source, [inner[0] - 5], "members", path.stat().st_size)
    assert planned[1].start > inner[0]  # (past the inner archive: the record after it)
    assert walk.spans[1][1] == walk.spans[0][2]


def test_dedup_of_a_warc_gz_inside_a_warc_gz_in_splits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("warcio")
    path = _nested_warc(tmp_path)
    whole = _dedup(path, tmp_path / "whole.jsonl")
    _small_splits(monkeypatch)
    assert len(plan_splits(sources_of(path, None), 2)) > 8
    assert _dedup(path, tmp_path / "split.jsonl") == whole
    assert "inner.example" not in whole  # (the archived pages are not pages of this one)
    assert 4 < len(whole.splitlines()) < 16  # (near copies dropped: 3 groups of 4)


@pytest.mark.engine
@pytest.mark.parametrize("name", ["spark", "dask"])
def test_every_engine_reads_a_split_again(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A split read again while the engine's other splits are in flight (Spark: between two
    partitions of toLocalIterator)."""
    pytest.importorskip("warcio")
    engine = request.getfixturevalue(name)
    path = _nested_warc(tmp_path)
    whole = _dedup(path, tmp_path / "whole.jsonl")
    _small_splits(monkeypatch)
    assert _dedup(path, tmp_path / "split.jsonl", engine) == whole


# --- empty gzip members ---------------------------------------------------------------------


def member_starts(data: bytes) -> list[int]:
    """The offsets of the gzip members of ``data``, in order."""
    starts, at = [], 0
    while at < len(data):
        starts.append(at)
        d = zlib.decompressobj(31)
        d.decompress(data[at:])
        at = len(data) - len(d.unused_data)
    return starts


def _with_empty_members(path: Path, out: Path, where: str) -> Path:
    """``path`` with an empty gzip member before each member (``each``), or before the first
    or after the last only."""
    data = path.read_bytes()
    empty = gzip.compress(b"")
    starts = member_starts(data)
    if where == "start":
        out.write_bytes(empty + data)
    elif where == "end":
        out.write_bytes(data + empty)
    else:
        out.write_bytes(b"".join(empty + data[a:b] for a, b in pairwise([*starts, len(data)])))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("where", ["each", "start", "end"])
def test_empty_gzip_members_in_a_warc_gz_split_at_every_point(tmp_path: Path, where: str) -> None:
    pytest.importorskip("warcio")
    records = [as_html(r) for r in planted(groups=2, distinct=3, seed=4)]
    plain = write_warc(tmp_path / "a.warc.gz", records)
    path = _with_empty_members(plain, tmp_path / "b.warc.gz", where)
    source = sources_of(path, None)[0]
    size = path.stat().st_size
    whole, _ = _read(source, [], "whole", size)
    assert len(whole.fps) == len(records)
    _same(whole, _read(sources_of(plain, None)[0], [], "whole", plain.stat().st_size)[0])
    data = path.read_bytes()
    members = [k for k in range(size) if data.startswith(GZIP_MAGIC, k)]
    cuts = {*range(1, size, max(1, size // 100))}
    cuts |= {m + d for m in members for d in (-1, 0, 1) if 0 < m + d < size}  # (beside each)
    for cut in sorted(cuts):
        _same(_read(source, [cut], "members", size)[0], whole)


def test_empty_gzip_members_are_split_starts(tmp_path: Path) -> None:
    """A split's first record starts at the empty member before it, as warcio counts it: the
    split before agrees, and nothing is read again."""
    pytest.importorskip("warcio")
    plain = write_warc(tmp_path / "a.warc.gz", [as_html(r) for r in planted(2, 3, seed=4)])
    path = _with_empty_members(plain, tmp_path / "b.warc.gz", "each")
    source = sources_of(path, None)[0]
    size = path.stat().st_size
    again: list[Split] = []

    def run(splits: list[Split]) -> Any:
        again.extend(splits)
        return (read_split(s, FIELDS, PARAMS, WANTS) for s in splits)

    planned = [Split(0, source, 0, 0, size // 2, "members")]
    planned.append(Split(0, source, 1, size // 2, size, "members"))
    walk = Walk(Rule(), "first", keys=True)
    for split, result in read_splits(run, planned, walk):
        walk.add(split, result)
    assert again == planned  # (each split read once)


def test_dedup_of_a_warc_gz_with_empty_members_in_splits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("warcio")
    records = [as_html(r) for r in planted(groups=20, distinct=30, seed=6)]
    plain = write_warc(tmp_path / "a.warc.gz", records)
    path = _with_empty_members(plain, tmp_path / "b.warc.gz", "each")
    whole = _dedup(path, tmp_path / "whole.jsonl")
    _small_splits(monkeypatch)
    assert len(plan_splits(sources_of(path, None), 2)) > 8
    assert _dedup(path, tmp_path / "split.jsonl") == whole


def test_a_multi_member_jsonl_gz_with_an_empty_member_is_read_whole(tmp_path: Path) -> None:
    lines = [
        json.dumps({"url": f"https://a.example/{i}", "text": f"text {i} " * 30}) for i in range(9)
    ]
    data = [("\n".join(lines[a:b]) + "\n").encode() for a, b in ((0, 4), (4, 9))]
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(b"") + gzip.compress(data[0]) + gzip.compress(b"")
                     + gzip.compress(data[1]) + gzip.compress(b""))  # fmt: skip
    out = _dedup(path, tmp_path / "kept.jsonl")
    assert out.splitlines() == lines


# --- CSV: many fields, a huge field ---------------------------------------------------------


def test_csv_rows_of_12000_fields_and_a_300k_field_are_read_and_written_whole(
    tmp_path: Path,
) -> None:
    """Not a bug: the reader lifts csv.field_size_limit (131,072 by default) in the pool's
    fresh processes too; without it this fails there."""
    names = ["url", "text"] + [f"f{k}" for k in range(12_000)]
    rows = []
    rng = random.Random(12)
    texts = [" ".join(f"{g}{rng.randrange(5000)}" for _ in range(60_000)) for g in "ab"]
    for i in range(4):
        text = texts[i % 2]  # (rows 0 and 2 the same, rows 1 and 3)
        rows.append([f"https://a.example/{i}", text] + [f"{i}-{k}" for k in range(12_000)])
    path = tmp_path / "wide.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([names, *rows])
    assert len(rows[0][1]) > 300_000 and path.stat().st_size < 5_000_000
    out = tmp_path / "kept.csv"
    with out.open("w", newline="", encoding="utf-8") as f:
        result = dedup_records(path, workers=1, output=f)
    assert (result.total, result.kept) == (4, 2)
    limit = csv.field_size_limit()
    csv.field_size_limit(sys.maxsize)
    try:
        with out.open(newline="", encoding="utf-8") as f:
            back = list(csv.reader(f))
    finally:
        csv.field_size_limit(limit)
    assert back == [names, rows[0], rows[1]]


# --- a file that cannot be sized once opened ------------------------------------------------


class Vanishing:
    """Once started (:meth:`start`), every file opened through Path.open whose name holds
    ``vanish`` is deleted just after (a rotated or removed input): its size cannot be asked
    any more. :attr:`opened`: the files opened."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.opened: list[Any] = []

    def start(self) -> None:
        real_open = Path.open

        def open_then_delete(path: Path, *args: Any, **kwargs: Any) -> Any:
            f = real_open(path, *args, **kwargs)
            self.opened.append(f)
            if "vanish" in path.name:
                path.unlink()
            return f

        self.monkeypatch.setattr(Path, "open", open_then_delete)

    def all_closed(self) -> bool:
        return bool(self.opened) and all(f.closed for f in self.opened)


@pytest.fixture
def vanishing(monkeypatch: pytest.MonkeyPatch) -> Vanishing:
    return Vanishing(monkeypatch)


def _records_file(tmp: Path, name: str) -> Path:
    path = tmp / name
    lines = [json.dumps({"url": f"https://a.example/{i}", "text": "t " * 50}) for i in range(200)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_feed_that_cannot_be_sized_is_closed(
    tmp_path: Path, vanishing: Vanishing, compression: str | None
) -> None:
    path = _records_file(tmp_path, "vanish.jsonl")
    vanishing.start()
    with pytest.raises(FileNotFoundError):
        FeedReader(path, "jsonl", compression)
    assert vanishing.all_closed()


def test_a_warc_that_cannot_be_sized_is_closed(tmp_path: Path, vanishing: Vanishing) -> None:
    pytest.importorskip("warcio")
    from nearduppipe.batch.warc import WarcReader

    path = write_warc(tmp_path / "vanish.warc.gz", [as_html(r) for r in planted(1, 2, seed=1)])
    vanishing.start()
    with pytest.raises(FileNotFoundError):
        WarcReader(path, "url", "html")
    assert vanishing.all_closed()


@pytest.mark.parametrize("how", ["lines", "members"])
@pytest.mark.parametrize("call", ["open_split", "read_split"])
def test_a_split_that_cannot_be_sized_is_closed(
    tmp_path: Path, vanishing: Vanishing, how: str, call: str
) -> None:
    if how == "members":
        pytest.importorskip("warcio")
        records = [as_html(r) for r in planted(1, 2, seed=1)]
        path = write_warc(tmp_path / "vanish.warc.gz", records)
    else:
        path = _records_file(tmp_path, "vanish.jsonl")
    source = sources_of(path, None)[0]
    split = Split(0, source, 1, 100, path.stat().st_size, how)
    vanishing.start()
    if call == "open_split":
        with pytest.raises(FileNotFoundError):
            open_split(split, FIELDS, Bounds())
    else:  # (a task returns it as the input's error, one line)
        result = read_split(split, FIELDS, PARAMS, WANTS)
        assert result.error is not None and "cannot read" in str(result.error)
    assert vanishing.all_closed()
