"""Bad input is one line on stderr and exit status 2, on every engine (issue 44, item 5):
truncated gzip, zstd and WARC files named as incomplete, impossible WARC lengths refused,
XML depth bounded, records over ``--max-record-bytes`` never read whole (``batch/bounded.py``,
``batch/compression.py``, ``batch/warc.py``, ``batch/feeds.py``), and a stripe's error on
Spark or Dask raised on the driver as the local engine raises it (``batch/core.py``)."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ..batch.test_dedup_inputs import as_html, planted, write_warc
from ..support.cli import ROOT, run_process

pytest.importorskip("warcio", reason="WARC input needs warcio (nearduppipe[warc])")


def _records() -> bytes:
    return "".join(json.dumps(r) + "\n" for r in planted(groups=30, distinct=40, seed=9)).encode()


def _one_line(proc: subprocess.CompletedProcess[str], message: str) -> None:
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr[-3000:]


def _dedup(path: Path, *more: str) -> subprocess.CompletedProcess[str]:
    out = path.parent / "kept.jsonl"
    proc = run_process("dedup", str(path), "--quiet", "--workers", "2", "-o", str(out), *more)
    assert not out.exists()  # (written only when complete)
    return proc


def test_a_truncated_gzip_feed_is_named_incomplete(tmp_path: Path) -> None:
    data = gzip.compress(_records())
    feed = tmp_path / "cut.jsonl.gz"
    feed.write_bytes(data[: len(data) // 2])
    _one_line(_dedup(feed), f"nearduppipe dedup: INPUT {feed}: incomplete: the gzip stream ends")


def test_a_truncated_zstd_feed_is_named_incomplete(tmp_path: Path) -> None:
    """Before: "0 records", or a JSON error about a line cut in half."""
    zstandard = pytest.importorskip("zstandard")
    data = zstandard.ZstdCompressor().compress(_records())
    for cut in (len(data) // 2, len(data) - 1, 20):
        feed = tmp_path / "cut.jsonl.zst"
        feed.write_bytes(data[:cut])
        _one_line(_dedup(feed), f"INPUT {feed}: incomplete: the zstd stream ends inside a frame")


@pytest.mark.slow
def test_a_truncated_warc_gz_is_named_incomplete_wherever_it_is_cut(tmp_path: Path) -> None:
    """Before: the records up to the cut, and exit status 0."""
    full = write_warc(tmp_path / "full.warc.gz", [as_html(r) for r in planted(6, 4, seed=2)])
    data = full.read_bytes()
    warc = tmp_path / "cut.warc.gz"
    for cut in (len(data) // 2, len(data) // 3 + 7, len(data) - 5, len(data) - 40):
        warc.write_bytes(data[:cut])
        _one_line(
            _dedup(warc), f"nearduppipe dedup: INPUT {warc}: incomplete: the file ends inside"
        )
    proc = run_process("dedup", str(full), "--quiet", "--workers", "2")
    assert proc.returncode == 0, proc.stderr


def _plain_warc(tmp_path: Path, length: bytes, which: int = 0) -> Path:
    """A plain WARC whose ``which``-th record claims ``Content-Length: length``."""
    warc = write_warc(tmp_path / "ok.warc", [as_html(r) for r in planted(3, 2, seed=4)], False)
    data = warc.read_bytes()
    at = -1
    for _ in range(which + 1):
        at = data.index(b"Content-Length: ", at + 1)
    end = data.index(b"\r\n", at)
    bad = tmp_path / "bad.warc"
    bad.write_bytes(data[:at] + b"Content-Length: " + length + data[end:])
    return bad


def test_an_impossible_warc_length_is_refused(tmp_path: Path) -> None:
    """Before: the record took every record after it as its content, exit status 0."""
    bad = _plain_warc(tmp_path, b"10000000000")
    _one_line(_dedup(bad), "record 1 (offset 0): Content-Length 10000000000 runs past the end")


def test_a_gzip_warc_record_shorter_than_its_length_is_refused(tmp_path: Path) -> None:
    """In a .warc.gz each record is its own gzip member: a length past the member's end."""
    plain = write_warc(tmp_path / "ok.warc", [as_html(r) for r in planted(2, 2, seed=4)], False)
    records = [b"WARC/1.0\r\n" + r for r in plain.read_bytes().split(b"WARC/1.0\r\n")[1:]]
    at = records[1].index(b"Content-Length: ")
    end = records[1].index(b"\r\n", at)
    records[1] = records[1][:at] + b"Content-Length: 900000" + records[1][end:]
    warc = tmp_path / "lying.warc.gz"
    warc.write_bytes(b"".join(gzip.compress(r) for r in records))
    _one_line(_dedup(warc), "record 2: its content ends")


def test_xml_nested_200000_deep_is_refused(tmp_path: Path) -> None:
    """Before: a RecursionError traceback."""
    feed = tmp_path / "deep.xml"
    feed.write_text(
        "<items><item><text>" + "<a>" * 200_000 + "x" + "</a>" * 200_000 + "</text></item></items>"
    )
    _one_line(_dedup(feed), f"INPUT {feed}: item 1: XML nested more than 256 levels deep")


@pytest.mark.parametrize(
    ("name", "record"),
    [
        ("big.json", b'[{"url": "a", "text": "x"}, {"url": "b", "text": "' + b"y" * 3000 + b'"}]'),
        ("big.csv", b"url,text\r\na,x\r\nb," + b"y" * 3000 + b"\r\n"),
        (
            "big.xml",
            b"<items><item><url>a</url><text>" + b"y" * 300_000 + b"</text></item></items>",
        ),
    ],
)
def test_a_record_over_the_limit_where_it_cannot_be_skipped_stops_the_run(
    tmp_path: Path, name: str, record: bytes
) -> None:
    feed = tmp_path / name
    feed.write_bytes(record)
    proc = _dedup(feed, "--max-record-bytes", "1000")
    _one_line(proc, "a record of more than 1,000 bytes (--max-record-bytes); not read")


def test_an_oversized_json_line_is_kept_named_and_copied(tmp_path: Path) -> None:
    records = _records().splitlines(keepends=True)
    big = json.dumps({"url": "https://big.example/", "text": "word " * 2000}).encode() + b"\n"
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(b"".join(records[:5]) + big + b"".join(records[5:]))
    out = tmp_path / "kept.jsonl"
    args = ["dedup", str(feed), "--quiet", "--workers", "2", "--max-record-bytes", "5000"]
    proc = run_process(*args, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "1 records over --max-record-bytes 5000 not read" in proc.stderr
    assert f"{feed}: line 6" in proc.stderr and "record_too_large: 1" in proc.stderr
    assert big in out.read_bytes().splitlines(keepends=True)


def test_a_warc_payload_that_inflates_past_the_limit_is_not_read(tmp_path: Path) -> None:
    """Before: a 7 KB WARC whose payload is gzip took 3.1 GB. Its record is kept, named."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    bomb = gzip.compress(b"<html>" + b" " * 60_000_000, 9)
    warc = tmp_path / "bomb.warc.gz"
    with warc.open("wb") as f:
        writer = WARCWriter(f, gzip=True)
        headers = StatusAndHeaders(
            "200 OK",
            [("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
            "HTTP/1.1",
        )
        writer.write_record(
            writer.create_warc_record(
                "https://x.example/bomb", "response", payload=io.BytesIO(bomb), http_headers=headers
            )
        )
    out = tmp_path / "kept.jsonl"
    proc = run_process("dedup", str(warc), "--quiet", "--workers", "1", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"{warc}: record 1 (https://x.example/bomb)" in proc.stderr
    assert json.loads(out.read_text())["url"] == "https://x.example/bomb"


def test_fingerprint_of_an_endless_input_stops_at_the_limit(tmp_path: Path) -> None:
    """Before: ``fingerprint /dev/zero`` read until memory ran out."""
    proc = run_process("fingerprint", "/dev/zero")
    _one_line(proc, "FILE /dev/zero: more than 5,000,000 bytes (--max-bytes")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        try:
            with fifo.open("wb") as f:
                while True:
                    f.write(b"text " * 100_000)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    proc = run_process("fingerprint", str(fifo), "--max-bytes", "1000000")
    _one_line(proc, f"FILE {fifo}: more than 1,000,000 bytes")
    writer.join(10)


# --- the same line on Spark and Dask ------------------------------------------------------


def _engine_available(name: str) -> None:
    if name == "spark":
        if shutil.which("java") is None or importlib.util.find_spec("pyspark") is None:
            pytest.skip("the Spark engine needs Java 17 and PySpark")
    elif importlib.util.find_spec("distributed") is None:
        pytest.skip("the Dask engine needs nearduppipe[dask]")


@pytest.mark.engine
@pytest.mark.parametrize("engine", ["spark", "dask"])
def test_a_truncated_gzip_is_the_local_line_on_every_engine(tmp_path: Path, engine: str) -> None:
    """Before: Spark printed 103 lines ending in ``PythonException: <exception str()
    failed>`` (exit 1), Dask 16-21 lines of worker tracebacks before the right one."""
    _engine_available(engine)
    data = gzip.compress(_records())
    feed = tmp_path / "cut.jsonl.gz"
    feed.write_bytes(data[: len(data) // 2])
    local = _dedup(feed).stderr.strip()
    proc = subprocess.run(
        [sys.executable, "-m", "nearduppipe.cli", "dedup", str(feed), "--quiet", "--engine", engine]
        + (["--master", "local[2]"] if engine == "spark" else ["--workers", "2"]),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == local, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr
    if engine == "dask":
        assert len(lines) == 1, proc.stderr
    else:  # (what the JVM prints as it starts, before any error: log4j's profile, a warning)
        assert all("ERROR" not in line for line in lines[:-1]), proc.stderr
