"""nearduppipe dedup over several inputs (issue 32, items 2 and 6): feeds plain, gzip and zstd,
WARC files, globs, the order of the inputs deciding which copy is kept, and every
near-duplicate pair written with --pairs. Real files, written here (WARC with warcio's own
writer)."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html, fingerprint_text
from nearduppipe.fingerprint.rule import Rule, implied_similarity

from ..support.cli import run, run_process, run_python

VOCAB = [f"w{i}" for i in range(5000)]
BOILERPLATE = "Home News Sports Weather About us Contact Subscribe to our newsletter"


def _words(rng: random.Random, n: int = 400) -> list[str]:
    return [rng.choice(VOCAB) for _ in range(n)]


def _edit(rng: random.Random, words: list[str], changed: int) -> str:
    edited = list(words)
    for pos in rng.sample(range(len(edited)), changed):
        edited[pos] = rng.choice(VOCAB)
    return " ".join(edited)


def planted(groups: int = 24, distinct: int = 30, seed: int = 32) -> list[dict[str, Any]]:
    """Groups of an original, an exact copy and light edits (1 and 3 words), and distinct pages
    of one template (the same boilerplate around different texts), shuffled: copies land in
    different files once split."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    for g in range(groups):
        words = _words(rng)
        for n, changed in enumerate((0, 0, 1, 3)):
            records.append({"url": f"https://g{g}.example/{n}", "text": _edit(rng, words, changed)})
    for d in range(distinct):
        text = f"{BOILERPLATE} {' '.join(_words(rng, 300))} {BOILERPLATE}"
        records.append({"url": f"https://template.example/{d}", "text": text})
    rng.shuffle(records)
    return records


def page(text: str) -> str:
    return (
        "<!DOCTYPE html><html><head><title>A page</title></head><body><nav>Home News</nav>"
        f"<article><p>{text}</p></article><footer>Copyright</footer></body></html>"
    )


def as_html(record: dict[str, Any]) -> dict[str, Any]:
    return {"url": record["url"], "html": page(record["text"])}


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    return path


def write_warc(path: Path, records: list[dict[str, Any]], extras: bool = True) -> Path:
    """Each record as a response with an HTML payload; with ``extras``, records that are not
    pages too: a warcinfo, a request per page, a PNG response and a metadata record."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as f:
        w = WARCWriter(f, gzip=path.suffix == ".gz")
        if extras:
            w.write_record(w.create_warcinfo_record(path.name, {"software": "test"}))
        for r in records:
            if extras:
                request = io.BytesIO(f"GET {r['url']} HTTP/1.1\r\n\r\n".encode())
                w.write_record(w.create_warc_record(r["url"], "request", payload=request))
            headers = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1"
            )
            body = io.BytesIO(r["html"].encode("utf-8"))
            w.write_record(
                w.create_warc_record(r["url"], "response", payload=body, http_headers=headers)
            )
        if extras:
            png = StatusAndHeaders("200 OK", [("Content-Type", "image/png")], protocol="HTTP/1.1")
            w.write_record(
                w.create_warc_record(
                    "https://x.example/a.png",
                    "response",
                    payload=io.BytesIO(b"\x89PNG\r\n"),
                    http_headers=png,
                )
            )
            w.write_record(
                w.create_warc_record(
                    "https://x.example/meta",
                    "metadata",
                    payload=io.BytesIO(b"outlinks: none"),
                    warc_content_type="text/plain",
                )
            )
    return path


def dedup(*args: str) -> tuple[dict[str, Any], str]:
    proc = run("dedup", *args, "--quiet", "--format", "json", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def kept_urls(path: Path) -> list[str]:
    return [json.loads(line)["url"] for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The planted set as 3 gzip JSON-lines feeds and 1 WARC file (its last quarter, as HTML),
    and as one plain feed holding the same records in the same order."""
    pytest.importorskip("warcio", reason="WARC input needs warcio (nearduppipe[warc])")
    tmp = tmp_path_factory.mktemp("split")
    records = planted()
    q = len(records) // 4
    parts = [records[:q], records[q : 2 * q], records[2 * q : 3 * q]]
    in_warc = [as_html(r) for r in records[3 * q :]]
    feeds = [write_jsonl(tmp / f"part{n}.jsonl.gz", part) for n, part in enumerate(parts)]
    warc = write_warc(tmp / "crawl.warc.gz", in_warc)
    whole = write_jsonl(tmp / "whole.jsonl", [*records[: 3 * q], *in_warc])
    return {
        "tmp": tmp,
        "feeds": feeds,
        "warc": warc,
        "whole": whole,
        "all": records[: 3 * q] + in_warc,
    }


def test_split_inputs_give_the_same_groups_and_kept_records_as_one_feed(
    split: dict[str, Any],
) -> None:
    tmp: Path = split["tmp"]
    inputs = [str(p) for p in [*split["feeds"], split["warc"]]]
    report, err = dedup(*inputs, "-o", str(tmp / "kept_split.jsonl"))
    whole, _ = dedup(str(split["whole"]), "-o", str(tmp / "kept_whole.jsonl"))
    assert report["clusters"] == whole["clusters"] and report["clusters"]
    assert report["summary"] == whole["summary"]
    kept = kept_urls(tmp / "kept_split.jsonl")
    assert kept == kept_urls(tmp / "kept_whole.jsonl")
    # the planted groups: one record kept each; every distinct page of the template kept
    groups = {u.split("/")[2] for u in kept if u.startswith("https://g")}
    assert len(groups) == 24 and sum(u.startswith("https://g") for u in kept) == 24
    assert sum(u.startswith("https://template.example/") for u in kept) == 30
    # the WARC's records that are not pages: skipped and counted, never records
    assert report["summary"]["pages_seen"] == len(split["all"])
    assert "WARC records skipped (not an HTML response)" in err
    assert "metadata: 1" in err and "request: " in err and "response not HTML: 1" in err
    assert "warcinfo: 1" in err


def test_a_kept_warc_record_is_named_by_url_file_offset_and_fingerprints(
    split: dict[str, Any],
) -> None:
    from warcio.archiveiterator import ArchiveIterator

    out = split["tmp"] / "kept_warc_only.jsonl"
    dedup(str(split["warc"]), "-o", str(out))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and all(set(x) == {"url", "warc", "offset", "fingerprint", "fingerprint_wide"}
                         for x in lines)  # fmt: skip
    html = {r["url"]: r["html"] for r in split["all"] if "html" in r}
    with Path(split["warc"]).open("rb") as f:
        for line in lines:
            assert line["warc"] == str(split["warc"])
            f.seek(line["offset"])
            record = next(iter(ArchiveIterator(f)))
            assert record.rec_type == "response"
            assert record.rec_headers.get_header("WARC-Target-URI") == line["url"]
            fps = fingerprint_html(html[line["url"]], None, FingerprintParams()).fingerprints
            assert fps is not None and fps.wide is not None
            assert line["fingerprint"] == f"{fps.fp:016x}" and len(line["fingerprint"]) == 16
            assert int(line["fingerprint_wide"], 16) == fps.wide


def test_the_order_of_the_inputs_decides_which_copy_is_kept(tmp_path: Path) -> None:
    rng = random.Random(5)
    text = " ".join(_words(rng))
    other = " ".join(_words(rng))
    write_jsonl(tmp_path / "2.jsonl", [{"url": "https://two/1", "text": text}])
    write_jsonl(
        tmp_path / "10.jsonl.gz",
        [{"url": "https://ten/1", "text": other}, {"url": "https://ten/2", "text": text}],
    )
    out = tmp_path / "out" / "kept.jsonl"
    out.parent.mkdir()
    dedup(str(tmp_path / "2.jsonl"), str(tmp_path / "10.jsonl.gz"), "-o", str(out))
    assert kept_urls(out) == ["https://two/1", "https://ten/1"]
    dedup(str(tmp_path / "10.jsonl.gz"), str(tmp_path / "2.jsonl"), "-o", str(out))
    assert kept_urls(out) == ["https://ten/1", "https://ten/2"]
    # a glob: its files in name order ("10.jsonl.gz" < "2.jsonl"); a file named twice read once
    _, err = dedup(str(tmp_path / "*.jsonl*"), str(tmp_path / "2.jsonl"), "-o", str(out))
    assert kept_urls(out) == ["https://ten/1", "https://ten/2"]
    assert "named more than once; read once" in err
    proc = run("dedup", str(tmp_path / "*.csv"), "--quiet")
    assert proc.returncode == 2 and "matches no file" in proc.stderr
    # an output may be none of the inputs, whichever way they were named
    proc = run("dedup", str(tmp_path / "*.jsonl*"), "--pairs", str(tmp_path / "2.jsonl"))
    assert proc.returncode == 2 and "--pairs" in proc.stderr and "is the input" in proc.stderr


def test_zstd_feed_reads_as_the_plain_one(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard", reason="zstd input needs nearduppipe[zstd]")
    records = planted(groups=6, distinct=6)
    plain = write_jsonl(tmp_path / "items.jsonl", records)
    packed = tmp_path / "items.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    one, _ = dedup(str(plain))
    two, _ = dedup(str(packed))
    assert one["clusters"] == two["clusters"] and one["summary"] == two["summary"]


@pytest.mark.parametrize(
    ("blocked", "name", "extra"),
    [
        (("zstandard",), "items.jsonl.zst", "nearduppipe[zstd]"),
        (("warcio", "warcio.archiveiterator"), "crawl.warc.gz", "nearduppipe[warc]"),
        (("pyarrow", "pyarrow.parquet"), "items.jsonl", "nearduppipe[parquet]"),
    ],
)
def test_a_missing_extra_is_a_one_line_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blocked: tuple[str, ...], name: str, extra: str
) -> None:
    for module in blocked:
        monkeypatch.setitem(__import__("sys").modules, module, None)  # import fails
    (tmp_path / name).write_bytes(b'{"url": "u", "text": "t"}\n')
    args = [str(tmp_path / name), "--quiet"]
    if name == "items.jsonl":
        args += ["--pairs", str(tmp_path / "pairs.parquet")]
    proc = run("dedup", *args)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert extra in proc.stderr
    assert not (tmp_path / "pairs.parquet").exists()


def _brute_force(records: list[dict[str, Any]], rule: Rule) -> list[tuple[int, int, int, int]]:
    params = FingerprintParams()
    fps = []
    for r in records:
        done = (
            fingerprint_text(r["text"], params)
            if "text" in r
            else fingerprint_html(r["html"], None, params)
        )
        fps.append(done.fingerprints)
    pairs = []
    for i, a in enumerate(fps):
        for j in range(i + 1, len(fps)):
            b = fps[j]
            if a is None or b is None or a.wide is None or b.wide is None:
                continue
            d, dw = (a.fp ^ b.fp).bit_count(), (a.wide ^ b.wide).bit_count()
            if rule.is_near(d, dw):
                pairs.append((i + 1, j + 1, d, dw))
    return pairs


def test_pairs_out_equals_brute_force_over_the_fingerprints(split: dict[str, Any]) -> None:
    tmp: Path = split["tmp"]
    inputs = [str(p) for p in [*split["feeds"], split["warc"]]]
    dedup(*inputs, "--pairs", str(tmp / "pairs.jsonl"), "-o", str(tmp / "kept.jsonl"))
    rows = [json.loads(line) for line in (tmp / "pairs.jsonl").read_text().splitlines()]
    got = [(r["a_record"], r["b_record"], r["distance"], r["wide_distance"]) for r in rows]
    expected = _brute_force(split["all"], Rule())
    assert got == expected and len(got) > 50
    urls = [r["url"] for r in split["all"]]
    for r in rows:
        assert (r["a"], r["b"]) == (urls[r["a_record"] - 1], urls[r["b_record"] - 1])
        assert r["similarity"] == pytest.approx(implied_similarity(r["wide_distance"], 512))
    # the fingerprints the command reports (its kept WARC records) are the ones used here
    params = FingerprintParams()
    html = {r["url"]: r["html"] for r in split["all"] if "html" in r}
    for line in map(json.loads, (tmp / "kept.jsonl").read_text().splitlines()):
        if "warc" in line:
            fps = fingerprint_html(html[line["url"]], None, params).fingerprints
            assert fps is not None and line["fingerprint"] == f"{fps.fp:016x}"
    # the paper's rule: the pairs within k = 3 on 64 bits
    dedup(*inputs, "--paper", "--pairs", str(tmp / "paper.jsonl"))
    rows = [json.loads(line) for line in (tmp / "paper.jsonl").read_text().splitlines()]
    got = [(r["a_record"], r["b_record"], r["distance"], r["wide_distance"]) for r in rows]
    assert got == _brute_force(split["all"], Rule.paper(3))
    # Parquet: the same rows. (In child processes: pyarrow's threads, once started in this
    # process, would make every later fork of the test session unsafe.)
    if importlib.util.find_spec("pyarrow") is None:
        pytest.skip("--pairs FILE.parquet needs pyarrow (nearduppipe[parquet])")
    args = ["--quiet", "--workers", "2", "--pairs", str(tmp / "pairs.parquet")]
    proc = run_process("dedup", *inputs, *args)
    assert proc.returncode == 0, proc.stderr
    read = run_python(
        """
        import json, sys
        import pyarrow.parquet as pq
        print(json.dumps(pq.read_table(sys.argv[1]).to_pylist()))
        """,
        str(tmp / "pairs.parquet"),
    )
    assert read.returncode == 0, read.stderr
    table = json.loads(read.stdout)
    jsonl = [json.loads(line) for line in (tmp / "pairs.jsonl").read_text().splitlines()]
    assert len(table) == len(jsonl)
    for a, b in zip(table, jsonl, strict=True):
        assert a == pytest.approx(b)


def test_a_warc_input_writes_json_lines_only(split: dict[str, Any]) -> None:
    proc = run("dedup", str(split["warc"]), "-o", str(split["tmp"] / "kept.csv"), "--quiet")
    assert proc.returncode == 2 and "JSON lines" in proc.stderr and "-o" in proc.stderr
    assert not (split["tmp"] / "kept.csv").exists()
    # a file named as a WARC (or --input-format warc) that is not one: one line, no warnings
    feed = write_jsonl(split["tmp"] / "feed.jsonl", planted(groups=1, distinct=1))
    proc = run("dedup", str(feed), "--input-format", "warc", "--quiet")
    assert proc.returncode == 2 and "not a WARC file" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("compression", ["gz", "zst"])
def test_every_feed_format_reads_compressed_as_plain(tmp_path: Path, compression: str) -> None:
    """JSON arrays (and a .json file that is really JSON lines: read from the start again),
    CSV and XML, compressed: the same records as the plain file, in the same order."""
    if compression == "zst":
        zstandard = pytest.importorskip("zstandard", reason="zstd input needs nearduppipe[zstd]")
        pack = zstandard.ZstdCompressor().compress
    else:
        pack = gzip.compress
    from nearduppipe.batch.feeds import FeedReader, FeedWriter
    from nearduppipe.batch.inputs import expand_inputs

    records = planted(groups=2, distinct=2)
    for fmt in ("json", "csv", "xml", "jsonl-in-json"):
        out = io.StringIO(newline="")
        writer = FeedWriter(out, "jsonl" if fmt == "jsonl-in-json" else fmt, ["url", "text"], "x")
        for r in records:
            writer.write(None, r)
        writer.close()
        ext = "json" if fmt == "jsonl-in-json" else fmt
        plain = tmp_path / f"{fmt}.{ext}"
        plain.write_text(out.getvalue(), encoding="utf-8", newline="")
        packed = tmp_path / f"{fmt}.{ext}.{compression}"
        packed.write_bytes(pack(plain.read_bytes()))
        (source,) = expand_inputs([packed])[0]
        assert source.format == ext and source.compression == {"gz": "gzip"}.get(
            compression, "zstd"
        )
        with FeedReader(source.path, source.format, source.compression) as reader:
            got = [record for _, record in reader]
            assert reader.position() == packed.stat().st_size
        with FeedReader(plain, ext) as reader:
            assert got == [record for _, record in reader] and len(got) == len(records)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"url": "u", "text": "t"}\n' * 50)[:-30])
    proc = run("dedup", str(broken), "--quiet")
    assert proc.returncode == 2 and "incomplete: the gzip stream ends early" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
