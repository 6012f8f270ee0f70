"""The two WARC readers give the same answers (issue 44, item 2): every WARC the tests write,
and hostile ones, read with fastwarc (where it vouches for a record, warcio for the rest:
``batch/warc_fast.py``, ``batch/warc.py``) and with warcio only (``NEARDUP_WARC_READER=warcio``):
the records yielded (URL, page, offset, oversized names), the records skipped by kind, the split
bounds, the error and its message; and ``nearduppipe dedup`` end to end (report, ``-o``,
standard error, exit status). A fastwarc that gives one offset wrong is caught (the last
test)."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import zlib
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from nearduppipe.batch import warc_fast
from nearduppipe.batch.bounded import OVERSIZED
from nearduppipe.batch.inputs import sources_of
from nearduppipe.batch.splits import Split
from nearduppipe.batch.warc import OFFSET, WarcReader
from nearduppipe.batch.warc_fast import READER_ENV

from ..support.cli import run_process, run_python
from .test_dedup_inputs import as_html, planted, write_warc
from .test_split_edges import member_starts

pytest.importorskip("warcio", reason="WARC input needs warcio (nearduppipe[warc])")
pytest.importorskip("fastwarc", reason="the comparison needs fastwarc (nearduppipe[warc])")

Builder = Callable[[Path], Path]


def _response(w: Any, url: str, body: bytes, headers: list[tuple[str, str]], **kw: Any) -> None:
    from warcio.statusandheaders import StatusAndHeaders

    http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
    w.write_record(
        w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http, **kw)
    )


def _pages(seed: int = 4, groups: int = 3, distinct: int = 2) -> list[dict[str, Any]]:
    return [as_html(r) for r in planted(groups, distinct, seed=seed)]


_RNG = random.Random(7)
_TEXT = " ".join(f"w{_RNG.randrange(5000)}" for _ in range(9000))
HTML = f"<html><body><p>{_TEXT}</p><p>café ü</p></body></html>"
_H = HTML.encode()


def _chunked(body: bytes, cut: int = 500) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:cut], body[cut:])) + b"0\r\n\r\n"


def _record(url: str, kind: str, body: bytes, **kw: Any) -> Callable[[Any], None]:
    def write(w: Any) -> None:
        w.write_record(w.create_warc_record(url, kind, payload=io.BytesIO(body), **kw))

    return write


def _page(url: str, body: bytes, *headers: tuple[str, str]) -> Callable[[Any], None]:
    return lambda w: _response(w, url, body, list(headers))


def _raw_response(url: str, http: bytes) -> Callable[[Any], None]:
    """A response record whose block is ``http`` as given (warcio's writer would parse it)."""

    def write(w: Any) -> None:
        head = (
            f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: {url}\r\n"
            "WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-0000000000aa>\r\n"
            "Content-Type: application/http; msgtype=response\r\n"
            f"Content-Length: {len(http)}\r\n\r\n"
        ).encode()
        record = head + http + b"\r\n\r\n"
        w.out.write(gzip.compress(record) if w.gzip else record)

    return write


HTML_TYPE = ("Content-Type", "text/html")
# one record of each kind the reader tells apart (kind → its writer)
ODD: dict[str, Callable[[Any], None]] = {
    "no-charset": _page("https://a.example/none", _H, HTML_TYPE),
    "latin-1": _page("https://a.example/latin", HTML.encode("latin-1"),
                     ("Content-Type", 'text/html; charset="ISO-8859-1"')),
    "unknown-charset": _page("https://a.example/unknown", _H,
                             ("Content-Type", "text/html; charset=x-no-such")),
    "xhtml": _page("https://a.example/xhtml", _H,
                   ("content-type", "application/xhtml+xml;charset=utf-8")),
    "no-type": _page("https://a.example/no-type", _H),
    "two-types": _page("https://a.example/two-types", _H, ("Content-Type", "text/plain"),
                       HTML_TYPE),
    "gzip": _page("https://a.example/gzip", gzip.compress(_H), HTML_TYPE,
                  ("Content-Encoding", "gzip")),
    "deflate": _page("https://a.example/deflate", zlib.compress(_H), HTML_TYPE,
                     ("Content-Encoding", "Deflate")),
    "unknown-encoding": _page("https://a.example/x-enc", _H, HTML_TYPE,
                              ("Content-Encoding", "x-nothing")),
    "not-gzip": _page("https://a.example/not-gzip", _H, HTML_TYPE, ("Content-Encoding", "gzip")),
    "chunked": _page("https://a.example/chunked", _chunked(_H), HTML_TYPE,
                     ("Transfer-Encoding", "chunked")),
    "chunked-gzip": _page("https://a.example/chunked-gzip", _chunked(gzip.compress(_H), 99),
                          HTML_TYPE, ("Transfer-Encoding", "chunked"),
                          ("Content-Encoding", "gzip")),
    "bad-chunks": _page("https://a.example/bad-chunks", b"zz\r\n" + _H, HTML_TYPE,
                        ("Transfer-Encoding", "chunked")),
    "http2-status": _raw_response("https://a.example/h2",
                                  b"HTTP/2 200\r\nContent-Type: text/html\r\n\r\n" + _H),
    "dns": _record("dns:a.example", "response", b"a.example. 60 IN A 1.2.3.4",
                   warc_content_type="text/dns"),
    "empty": _record("https://a.example/empty", "response", b"", length=0),
    "resource": _record("https://a.example/res", "resource", _H, warc_content_type="text/html"),
    "revisit": lambda w: w.write_record(
        w.create_revisit_record("https://a.example/none", "sha1:AAAA", "https://a.example/none",
                                "2026-01-01T00:00:00Z")),
    "space-uri": _page("https://a.example/with space", _H, HTML_TYPE),
    "angle-uri": _page("<https://a.example/angle>", _H, HTML_TYPE),
    "big": _page("https://a.example/big", f"<html><p>{_TEXT * 4}</p></html>".encode(),
                 ("Content-Type", "text/html; charset=utf-8")),
}  # fmt: skip
# the kinds warcio reads (fastwarc hands the file over to it there)
HANDED_OVER = {"two-types", "http2-status"}


def _varied(tmp: Path, gz: bool) -> Path:
    """A record of every kind in :data:`ODD`, between pages."""
    from warcio.warcwriter import WARCWriter

    path = tmp / ("varied.warc.gz" if gz else "varied.warc")
    with path.open("wb") as f:
        w = WARCWriter(f, gzip=gz)
        w.write_record(w.create_warcinfo_record(path.name, {"software": "test"}))
        for write in ODD.values():
            write(w)
        _response(w, "https://a.example/last", _H, [HTML_TYPE])
    return path


def _odd(kind: str) -> Builder:
    """Pages, one record of ``kind``, pages (a .warc.gz)."""

    def build(tmp: Path) -> Path:
        from warcio.warcwriter import WARCWriter

        path = tmp / f"odd-{kind}.warc.gz"
        pages = _pages(seed=11, groups=2, distinct=1)
        with path.open("wb") as f:
            w = WARCWriter(f, gzip=True)
            for k, page in enumerate(pages):
                if k == 4:
                    ODD[kind](w)
                _response(w, page["url"], page["html"].encode(), [HTML_TYPE])
        return path

    return build


def _plain(tmp: Path) -> Path:
    return write_warc(tmp / "plain.warc", _pages())


def _gz(tmp: Path) -> Path:
    return write_warc(tmp / "pages.warc.gz", _pages())


def _bare(tmp: Path) -> Path:
    return write_warc(tmp / "bare.warc.gz", _pages(), extras=False)


def _cut(source: Builder, fraction: float, minus: int = 0) -> Builder:
    def build(tmp: Path) -> Path:
        whole = source(tmp)
        data = whole.read_bytes()
        out = tmp / f"cut-{whole.name}"
        out.write_bytes(data[: int(len(data) * fraction) - minus])
        return out

    return build


def _length(which: int, value: bytes, gz: bool = False) -> Builder:
    """The ``which``-th record claims ``Content-Length: value``."""

    def build(tmp: Path) -> Path:
        data = write_warc(tmp / ("ok.warc.gz" if gz else "ok.warc"), _pages(seed=5)).read_bytes()
        if gz:
            members = member_starts(data)
            records = [gzip.decompress(data[a:b]) for a, b in pairwise([*members, len(data)])]
            at = records[which].index(b"Content-Length: ")
            end = records[which].index(b"\r\n", at)
            records[which] = (
                records[which][:at] + b"Content-Length: " + value + records[which][end:]
            )
            out = tmp / f"length{which}-{value.decode()}.warc.gz"
            out.write_bytes(b"".join(gzip.compress(r) for r in records))
            return out
        at = -1
        for _ in range(which + 1):
            at = data.index(b"Content-Length: ", at + 1)
        end = data.index(b"\r\n", at)
        out = tmp / f"length{which}-{value.decode()}.warc"
        out.write_bytes(data[:at] + b"Content-Length: " + value + data[end:])
        return out

    return build


def _empty_members(where: str) -> Builder:
    def build(tmp: Path) -> Path:
        data = _gz(tmp).read_bytes()
        empty = gzip.compress(b"")
        members = member_starts(data)
        out = tmp / f"empty-{where}.warc.gz"
        if where == "start":
            out.write_bytes(empty + data)
        elif where == "end":
            out.write_bytes(data + empty)
        elif where == "middle":
            out.write_bytes(data[: members[5]] + empty + data[members[5] :])
        else:
            out.write_bytes(b"".join(empty + data[a:b] for a, b in pairwise([*members, len(data)])))
        return out

    return build


def _spliced(what: str) -> Builder:
    """A .warc.gz with something between two members, or two records in one member, or the
    whole file as one gzip member."""

    def build(tmp: Path) -> Path:
        data = _gz(tmp).read_bytes()
        m = member_starts(data)
        out = tmp / f"spliced-{what}.warc.gz"
        if what == "junk-member":
            out.write_bytes(data[: m[4]] + gzip.compress(b"junk\r\n\r\n") + data[m[4] :])
        elif what == "junk-bytes":
            out.write_bytes(data[: m[4]] + b"junk" + data[m[4] :])
        elif what == "two-in-one":
            two = gzip.compress(gzip.decompress(data[m[3] : m[5]]))
            out.write_bytes(data[: m[3]] + two + data[m[5] :])
        else:  # one member
            out.write_bytes(gzip.compress(gzip.decompress(data)))
        return out

    return build


def _garbage_plain(tmp: Path) -> Path:
    data = _plain(tmp).read_bytes()
    at = data.index(b"WARC/1.0", 2000)
    out = tmp / "garbage.warc"
    out.write_bytes(data[:at] + b"GARBAGE\r\n\r\n" + data[at:])
    return out


def _not_warc(tmp: Path) -> Path:
    out = tmp / "text.warc"
    out.write_bytes(b"hello world\n" * 40)
    return out


def _nested(tmp: Path) -> Path:
    from .test_split_edges import _nested_warc

    return _nested_warc(tmp)


def _bomb(tmp: Path) -> Path:
    from warcio.warcwriter import WARCWriter

    path = tmp / "bomb.warc.gz"
    with path.open("wb") as f:
        w = WARCWriter(f, gzip=True)
        for i, page in enumerate(_pages()[:3]):
            _response(w, page["url"], page["html"].encode(), [("Content-Type", "text/html")])
            if i == 1:
                bomb = gzip.compress(b"<html>" + b" " * 20_000_000, 9)
                _response(w, "https://x.example/bomb", bomb,
                          [("Content-Type", "text/html"), ("Content-Encoding", "gzip")])  # fmt: skip
    return path


# name → (builder, --max-record-bytes or None)
INPUTS: dict[str, tuple[Builder, int | None]] = {
    "plain": (_plain, None),
    "gz": (_gz, None),
    "bare-gz": (_bare, None),
    "varied": (lambda t: _varied(t, False), None),
    "varied-gz": (lambda t: _varied(t, True), None),
    "varied-gz-limit": (lambda t: _varied(t, True), 150_000),
    "gz-limit": (_gz, 1_000),
    "cut-gz-half": (_cut(_gz, 0.5), None),
    "cut-gz-third": (_cut(_gz, 1 / 3, -7), None),
    "cut-gz-end5": (_cut(_gz, 1.0, 5), None),
    "cut-gz-end40": (_cut(_gz, 1.0, 40), None),
    "cut-plain-half": (_cut(_plain, 0.5), None),
    "cut-plain-end": (_cut(_plain, 1.0, 3), None),
    "length-huge": (_length(0, b"10000000000"), None),
    "length-past-end": (_length(4, b"30000"), None),
    "length-short": (_length(2, b"100"), None),
    "length-gz-long": (_length(1, b"900000", gz=True), None),
    "length-gz-short": (_length(2, b"100", gz=True), None),
    "empty-each": (_empty_members("each"), None),
    "empty-start": (_empty_members("start"), None),
    "empty-middle": (_empty_members("middle"), None),
    "empty-end": (_empty_members("end"), None),
    "junk-member": (_spliced("junk-member"), None),
    "junk-bytes": (_spliced("junk-bytes"), None),
    "two-in-one": (_spliced("two-in-one"), None),
    "one-member": (_spliced("one-member"), None),
    "garbage-plain": (_garbage_plain, None),
    "not-warc": (_not_warc, None),
    "nested": (_nested, None),
    "bomb": (_bomb, None),
    **{f"odd-{kind}": (_odd(kind), None) for kind in ODD},
}
# inputs fastwarc reads records of (the others may go to warcio at once: that is allowed)
FAST = {"plain", "gz", "bare-gz", "varied", "varied-gz", "varied-gz-limit", "gz-limit", "nested"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int | None]]:
    built = {}
    for name, (build, limit) in INPUTS.items():
        tmp = tmp_path_factory.mktemp(name)
        built[name] = (build(tmp), limit)
    return built


def _read(
    path: Path, limit: int | None, split: Split | None = None, payload: bool = True
) -> dict[str, Any]:
    """Everything a reader gives: its records (with their offsets and pages), what it skipped,
    its counts and bounds, and the error it stopped at."""
    args: dict[str, Any] = {"split": split}
    if limit is not None:
        args["limit"] = limit
    out: dict[str, Any] = {"records": [], "error": None}
    fast = 0
    try:
        with WarcReader(path, "url", "html", payload, **args) as reader:
            try:
                for raw, record in reader:
                    assert raw is None
                    out["records"].append(dict(record))
            finally:
                out["skipped"] = dict(reader.skipped)
                out["count"] = reader.records
                out["bounds"] = (reader.bounds.first_at, reader.bounds.next_at)
                fast = reader.fast_records
    except Exception as e:
        out["error"] = (type(e).__name__, str(e))
    out["fast"] = fast
    return out


def _both(monkeypatch: pytest.MonkeyPatch, read: Callable[[], dict[str, Any]]) -> tuple[Any, Any]:
    monkeypatch.setenv(READER_ENV, "warcio")
    slow = read()
    assert slow.pop("fast") == 0
    monkeypatch.delenv(READER_ENV)
    fast = read()
    return slow, fast


def _differences(slow: dict[str, Any], fast: dict[str, Any]) -> list[str]:
    return [k for k in slow if slow[k] != fast[k]]


@pytest.mark.parametrize("name", list(INPUTS))
def test_both_readers_give_the_same_records_skips_and_errors(
    name: str, inputs: dict[str, tuple[Path, int | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, limit = inputs[name]
    for payload in (True, False):
        slow, fast = _both(monkeypatch, lambda p=payload: _read(path, limit, payload=p))
        fast_records = fast.pop("fast")
        assert not _differences(slow, fast), (slow, fast)
        if name in FAST:  # (fastwarc read them: the comparison is not warcio with itself)
            assert fast_records > 0 and slow["error"] is None and slow["records"]
        if name == "gz" or (name.startswith("odd-") and name[4:] not in HANDED_OVER):
            assert fast_records == slow["count"] - 1  # (all but the last: warcio's, again)


def _splits(path: Path, cuts: set[int]) -> list[Split]:
    size = path.stat().st_size
    source = sources_of(path, None)[0]
    points = [0, *sorted(cuts), size]
    return [Split(0, source, p, a, b, "members") for p, (a, b) in enumerate(pairwise(points))]


@pytest.mark.parametrize("name", ["gz", "varied-gz", "empty-each", "nested", "cut-gz-half"])
def test_both_readers_give_the_same_splits(
    name: str, inputs: dict[str, tuple[Path, int | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each split read alone, cut at every 97th byte and beside every gzip member."""
    path, limit = inputs[name]
    data = path.read_bytes()
    members = [k for k in range(len(data)) if data.startswith(b"\x1f\x8b\x08", k)]
    cuts = {c for m in members for c in (m - 1, m, m + 1) if 0 < c < len(data)}
    cuts |= set(range(1, len(data), 97))
    fast_records = 0
    for split in _splits(path, cuts):
        slow, fast = _both(monkeypatch, lambda s=split: _read(path, limit, s))  # type: ignore[misc]
        fast_records += fast.pop("fast")
        assert not _differences(slow, fast), (split.start, split.end, slow, fast)
    if name in FAST:
        assert fast_records > 0


CLI_INPUTS = ["gz", "plain", "varied-gz", "gz-limit", "cut-gz-half", "length-huge",
              "length-gz-long", "empty-each", "bomb", "two-in-one"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", CLI_INPUTS)
def test_dedup_gives_the_same_output_with_either_reader(
    name: str,
    inputs: dict[str, tuple[Path, int | None]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """``nearduppipe dedup`` end to end: the report, the kept records' locators, standard error
    and the exit status."""
    path, limit = inputs[name]
    more = [] if limit is None else ["--max-record-bytes", str(limit)]

    def dedup() -> dict[str, Any]:
        out = tmp_path / "kept.jsonl"  # (the same name for both: stderr names it)
        out.unlink(missing_ok=True)
        proc = run_process("dedup", str(path), "--quiet", "--format", "json", "--workers", "2",
                           "-o", str(out), *more)  # fmt: skip
        kept = out.read_text() if out.exists() else None
        return {"code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "kept": kept}

    monkeypatch.setenv(READER_ENV, "warcio")
    slow = dedup()
    monkeypatch.delenv(READER_ENV)
    fast = dedup()
    assert slow == fast
    if name in FAST:
        assert slow["code"] == 0 and slow["kept"] and json.loads(slow["stdout"])["summary"]


def _off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """fastwarc, its third record's offset one byte off."""
    real = warc_fast.fastwarc_iterator()

    class Record:
        def __init__(self, record: Any, shift: int) -> None:
            self._record, self.stream_pos = record, record.stream_pos + shift

        def __getattr__(self, name: str) -> Any:
            return getattr(self._record, name)

    def wrong(stream: Any, **kw: Any) -> Iterator[Any]:
        for k, record in enumerate(real(stream, **kw)):
            yield Record(record, 1 if k == 2 else 0)

    # (where WarcReader looks it up, each time a reader is made)
    monkeypatch.setattr(
        warc_fast, "fastwarc_iterator", lambda: None if os.environ.get(READER_ENV) else wrong
    )


def test_the_comparison_fails_when_fastwarc_gives_an_offset_wrong(
    inputs: dict[str, tuple[Path, int | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison can fail: in an uncompressed WARC nothing tells a record's offset (it is
    fastwarc's word)."""
    path, limit = inputs["plain"]
    _off_by_one(monkeypatch)
    slow, fast = _both(monkeypatch, lambda: _read(path, limit))
    fast.pop("fast")
    assert _differences(slow, fast) == ["records"]
    assert [r["url"] for r in slow["records"]] == [r["url"] for r in fast["records"]]


def test_an_offset_that_is_no_gzip_member_sends_the_file_to_warcio(
    inputs: dict[str, tuple[Path, int | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a .warc.gz each record's offset must start a gzip member: one that does not has
    warcio read the file again from its start (the records fastwarc gave are not given
    twice)."""
    path, limit = inputs["gz"]
    _off_by_one(monkeypatch)
    slow, fast = _both(monkeypatch, lambda: _read(path, limit))
    assert fast.pop("fast") == 1 and not _differences(slow, fast)  # (the second is held back)


def _huge_record(path: Path, size: int) -> None:
    """A .warc.gz: a page, a ``size``-byte HTML response (blanks: a small member), a page."""
    pages = _pages(seed=8)[:2]
    small = write_warc(path.with_name("small.warc.gz"), pages, extras=False).read_bytes()
    members = member_starts(small)
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
    head = (
        b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: https://x.example/huge\r\n"
        b"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-000000000001>\r\n"
        b"Content-Type: application/http; msgtype=response\r\n"
        b"Content-Length: %d\r\n\r\n" % (len(http) + size)
    )
    with path.open("wb") as f:
        f.write(small[: members[1]])
        z = zlib.compressobj(1, zlib.DEFLATED, 31)
        f.write(z.compress(head + http + b"<html><body>"))
        chunk = b" " * (1 << 20)
        for _ in range((size - 12) // len(chunk)):
            f.write(z.compress(chunk))
        f.write(z.compress(b" " * ((size - 12) % len(chunk))))
        f.write(z.compress(b"\r\n\r\n") + z.flush())
        f.write(small[members[1] :])


def test_a_400_mb_record_is_not_read_whole_by_fastwarc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-record-bytes holds with fastwarc: the record over it is named, not read (its
    content skipped a buffer at a time); peak memory measured in a child process."""
    path = tmp_path / "huge.warc.gz"
    _huge_record(path, 400 << 20)
    code = f"""
        import json, resource
        from nearduppipe.batch.warc import OFFSET, OVERSIZED, WarcReader
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with WarcReader({str(path)!r}, "url", "html") as reader:
            records = [(r["url"], OVERSIZED in r, "html" in r, r[OFFSET]) for _, r in reader]
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps([records, reader.fast_records, (after - before) / 1024]))
    """
    monkeypatch.delenv(READER_ENV, raising=False)
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0, proc.stderr
    records, fast, grown_mb = json.loads(proc.stdout)
    assert [r[:3] for r in records] == [
        [records[0][0], False, True],
        ["https://x.example/huge", True, False],
        [records[2][0], False, True],
    ]
    assert fast == 2  # (the huge record read by fastwarc; the last page by warcio, again)
    assert grown_mb < 64, grown_mb  # (read whole: 400 MB and more)
    monkeypatch.setenv(READER_ENV, "warcio")  # (warcio's answer: the same)
    with WarcReader(path, "url", "html") as reader:
        slow = [(r["url"], OVERSIZED in r, "html" in r, r[OFFSET]) for _, r in reader]
        assert reader.fast_records == 0
    assert [list(r) for r in slow] == records
