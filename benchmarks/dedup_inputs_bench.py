"""nearduppipe dedup over several inputs against one plain feed: N records (~3,000-character
texts, 10% near-duplicate copies) split over 3 gzip JSON-lines feeds and 1 WARC file (the last
quarter, as HTML responses, gzip per record), against one uncompressed feed holding the same
records in the same order (the WARC quarter as an "html" field). Wall time end to end through
the CLI, median of --repeat runs, the two alternated; both must give the same report.

    python benchmarks/dedup_inputs_bench.py [--records 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from nearduppipe.cli import main as cli
from nearduppipe.fingerprint.features import idf_table


def records(n: int) -> list[dict[str, str]]:
    rng = random.Random(4)
    vocabulary = sorted(idf_table()[0])
    texts: list[str] = []
    out = []
    for i in range(n):
        if texts and rng.random() < 0.1:
            text = rng.choice(texts) + "(本文转载自城市门户网)"
        else:
            words = rng.choices(vocabulary, k=1400)
            text = "".join(w + ("，" if k % 9 == 8 else "") for k, w in enumerate(words))[:3000]
            if len(texts) < 5000:
                texts.append(text)
        out.append({"url": f"https://site{i % 50}.example/{i}", "text": text})
    return out


def page(text: str) -> str:
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>页面</title></head><body>"
        f"<nav>首页 新闻</nav><article><p>{text}</p></article><footer>版权所有</footer></body></html>"
    )


def write(tmp: Path, recs: list[dict[str, str]]) -> tuple[list[Path], Path]:
    q = len(recs) // 4
    html = [{"url": r["url"], "html": page(r["text"])} for r in recs[3 * q :]]
    feeds = []
    for n in range(3):
        path = tmp / f"part{n}.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            for r in recs[n * q : (n + 1) * q]:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        feeds.append(path)
    warc = tmp / "crawl.warc.gz"
    with warc.open("wb") as f:
        w = WARCWriter(f, gzip=True)
        headers = [("Content-Type", "text/html; charset=utf-8")]
        for r in html:
            body = io.BytesIO(r["html"].encode("utf-8"))
            http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
            w.write_record(
                w.create_warc_record(r["url"], "response", payload=body, http_headers=http)
            )
    whole = tmp / "whole.jsonl"
    with whole.open("w", encoding="utf-8") as f:
        for r in [*recs[: 3 * q], *html]:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return [*feeds, warc], whole


def run(inputs: list[Path], tmp: Path, tag: str) -> tuple[float, dict[str, object]]:
    report = tmp / f"report-{tag}.json"
    t0 = time.perf_counter()
    code = cli(
        ["dedup", *map(str, inputs), "-o", str(tmp / f"kept-{tag}.jsonl"), "--report", str(report),
         "--format", "json", "--quiet"]
    )  # fmt: skip
    elapsed = time.perf_counter() - t0
    assert code == 0
    data = json.loads(report.read_text())
    return elapsed, {"summary": data["summary"], "clusters": data["clusters"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        split, whole = write(tmp, records(args.records))
        split_mb = sum(p.stat().st_size for p in split) / 1e6
        whole_mb = whole.stat().st_size / 1e6
        times: dict[str, list[float]] = {"split": [], "whole": []}
        results = {}
        for _ in range(args.repeat):
            for tag, inputs in (("split", split), ("whole", [whole])):
                elapsed, results[tag] = run(inputs, tmp, tag)
                times[tag].append(elapsed)
        same = results["split"] == results["whole"]
        a, b = statistics.median(times["split"]), statistics.median(times["whole"])
        summary = results["whole"]["summary"]
        assert isinstance(summary, dict)
        print(
            f"{args.records} records, median of {args.repeat}: 3 gzip feeds + 1 WARC "
            f"({split_mb:.0f} MB) {a:.1f} s ({args.records / a:.0f} records/s) vs one plain "
            f"feed ({whole_mb:.0f} MB) {b:.1f} s ({args.records / b:.0f} records/s): ratio "
            f"{a / b:.2f}; same report: {same}; {summary['dropped']} near-duplicates; runs "
            f"split {[round(t, 1) for t in times['split']]} whole {[round(t, 1) for t in times['whole']]}"
        )


if __name__ == "__main__":
    main()
