"""Reading a WARC with fastwarc against warcio (issue 44, item 2), through the package's reader
(``nearduppipe.batch.warc.WarcReader``: fastwarc where it vouches for a record, warcio for the
rest; ``NEARDUP_WARC_READER=warcio`` for warcio only).

A ``.warc.gz`` of N pages as a crawler writes them (per page a request, an HTML response of
30-60 KB, a metadata record; gzip per record; portal pages of benchmarks/pages.py), or one
given with --warc. Two timings, the two readers alternated, medians of --repeat runs:

- read: every record read and parsed, each page's payload read and decoded (no extraction,
  no fingerprint), in this process;
- dedup: the whole ``nearduppipe dedup FILE -o KEPT`` in a child process (extraction and
  fingerprints included: what a run gains).

Both readers must give the same records (URL, page, offset) and the same dedup output.

    python benchmarks/warc_read.py [--pages 3000] [--repeat 5] [--dedup-repeat 3] [--warc F]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pages import _links, article_paragraphs, portal_page  # noqa: E402

from nearduppipe.batch.warc import OFFSET, WarcReader  # noqa: E402
from nearduppipe.batch.warc_fast import READER_ENV  # noqa: E402

READERS = ("warcio", "fastwarc")


def write_warc(path: Path, pages: int, seed: int = 44) -> list[int]:
    """``pages`` request/response/metadata triples, gzip per record; the pages' sizes."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    rng = random.Random(seed)
    sizes = []
    with path.open("wb") as f:
        w = WARCWriter(f, gzip=True)
        w.write_record(w.create_warcinfo_record(path.name, {"software": "warc_read.py"}))
        for i in range(pages):
            url = f"https://site{i % 40}.example/article/{i}.html"
            paragraphs = article_paragraphs(rng, rng.randrange(200, 2500))
            html = portal_page(f"标题 {i}", paragraphs, rng, _links(rng, rng.randrange(0, 40), "n"))
            body = html.encode()
            sizes.append(len(body))
            request = io.BytesIO(f"GET /article/{i}.html HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            w.write_record(w.create_warc_record(url, "request", payload=request))
            http = StatusAndHeaders(
                "200 OK",
                [("Content-Type", "text/html; charset=utf-8"), ("Server", "nginx")],
                protocol="HTTP/1.1",
            )
            w.write_record(
                w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
            )
            meta = io.BytesIO(f"fetchTimeMs: {rng.randrange(50, 900)}\r\n".encode())
            w.write_record(
                w.create_warc_record(url, "metadata", payload=meta, warc_content_type="text/plain")
            )
    return sizes


def use(reader: str) -> None:
    if reader == "warcio":
        os.environ[READER_ENV] = "warcio"
    else:
        os.environ.pop(READER_ENV, None)


def read_all(path: Path, reader: str) -> tuple[float, list[tuple[Any, ...]], int]:
    """Seconds to read every record (pages decoded), the pages, the records fastwarc read."""
    use(reader)
    t0 = time.perf_counter()
    with WarcReader(path, "url", "html") as r:
        pages = [(rec["url"], len(rec["html"]), rec[OFFSET]) for _, rec in r]
        fast = r.fast_records
    return time.perf_counter() - t0, pages, fast


def dedup(path: Path, out: Path, reader: str) -> tuple[float, str, str]:
    use(reader)
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "nearduppipe.cli", "dedup", str(path), "-o", str(out),
         "--quiet", "--format", "json"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    return elapsed, proc.stdout, out.read_text()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each reader: read")
    ap.add_argument(
        "--dedup-repeat", type=int, default=3, help="runs of each reader: dedup (0: none)"
    )
    ap.add_argument("--warc", type=Path, help="a .warc.gz to read instead of one written here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        path = args.warc
        if path is None:
            path = tmp / "pages.warc.gz"
            sizes = write_warc(path, args.pages)
            print(
                f"{path.name}: {args.pages} pages (+ a request and a metadata record each), "
                f"{statistics.median(sizes) / 1000:.0f} KB median page "
                f"({min(sizes) / 1000:.0f}-{max(sizes) / 1000:.0f}), "
                f"{path.stat().st_size / 1e6:.0f} MB"
            )
        print(f"load before: {Path('/proc/loadavg').read_text().strip()}")
        reads: dict[str, list[float]] = {r: [] for r in READERS}
        got: dict[str, list[tuple[Any, ...]]] = {}
        fast = 0
        read_all(path, "fastwarc")  # (warm: the file in the page cache, imports done)
        for _ in range(args.repeat):
            for reader in READERS:
                elapsed, got[reader], n = read_all(path, reader)
                reads[reader].append(elapsed)
                fast = n if reader == "fastwarc" else fast
        w, f = statistics.median(reads["warcio"]), statistics.median(reads["fastwarc"])
        pages = len(got["warcio"])
        print(
            f"read ({pages} pages, median of {args.repeat}): warcio {w:.2f} s "
            f"({pages / w:.0f} pages/s), fastwarc {f:.2f} s ({pages / f:.0f} pages/s; "
            f"{fast} records by fastwarc): warcio/fastwarc {w / f:.2f}x; same pages: "
            f"{got['warcio'] == got['fastwarc']}; runs warcio "
            f"{[round(t, 2) for t in reads['warcio']]} fastwarc "
            f"{[round(t, 2) for t in reads['fastwarc']]}"
        )
        if args.dedup_repeat > 0:
            dedup_both(path, tmp, args.dedup_repeat)
        print(f"load after: {Path('/proc/loadavg').read_text().strip()}")
        use("fastwarc")


def dedup_both(path: Path, tmp: Path, repeat: int) -> None:
    """The whole dedup with each reader, alternated: medians, and whether they agree."""
    runs: dict[str, list[float]] = {r: [] for r in READERS}
    outputs: dict[str, tuple[str, str]] = {}
    for _ in range(repeat):
        for reader in READERS:
            elapsed, report, kept = dedup(path, tmp / "kept.jsonl", reader)
            runs[reader].append(elapsed)
            outputs[reader] = (report, kept)
    w, f = statistics.median(runs["warcio"]), statistics.median(runs["fastwarc"])
    print(
        f"dedup (median of {repeat}): warcio {w:.1f} s, fastwarc {f:.1f} s: "
        f"warcio/fastwarc {w / f:.3f}x; same report and -o: "
        f"{outputs['warcio'] == outputs['fastwarc']}; runs warcio "
        f"{[round(t, 1) for t in runs['warcio']]} fastwarc "
        f"{[round(t, 1) for t in runs['fastwarc']]}"
    )


if __name__ == "__main__":
    main()
