"""Peak memory of ``nearduppipe dedup`` on a JSON-array feed (what ``scrapy crawl -O items.json``
writes) as the feed grows, beside ``json.load`` of the same file (what reading it whole costs).

    python benchmarks/dedup_memory.py [--records 100000 1000000] [--chars 300]

For each size: a feed of N records (url, title, text of about --chars characters; 20% are
near-duplicate copies of a recent record with one word changed) is written to a temporary
directory, then ``nearduppipe dedup FEED -o unique.json --format json`` runs in a child process
that reports its own peak RSS (ru_maxrss of RUSAGE_SELF) and that of its largest worker
(RUSAGE_CHILDREN). The CLI keeps 13 bytes per record plus the report's keys, whatever the texts'
size: compare rows of equal N and different --chars.

Measured on the 2-CPU development machine (Python 3.11; 2 workers; k = 4):

      records  chars  feed MB  dedup peak MB  worker MB  time s  json.load MB
       100000    300       43             84         38    22.5           126
       100000   3000      332            107         38   237.2           677
      1000000    300      432            350         38   224.7          1160

The file grows 8x at 100 000 records and the peak barely moves (the rest is the larger
report: 20 000 near-duplicates instead of 13 000); json.load alone needs 5x more. At a million
records the peak is per-record state, not text: the CLI's 13 B/record arrays, and the batch
search's working set (batch.all_pairs: keys, sort buffers and candidate pairs of one table at a
time, about 140 B/record at k = 4), plus the report's clusters.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEASURE = """
import resource, sys
from nearduppipe.cli import main
code = main(sys.argv[1:])
self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"PEAK {self_kb} {child_kb}", file=sys.stderr)
sys.exit(code)
"""
JSON_LOAD = """
import json, resource, sys
with open(sys.argv[1], encoding="utf-8") as f:
    records = json.load(f)
print(f"PEAK {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss} {len(records)}", file=sys.stderr)
"""


def write_feed(path: Path, n: int, chars: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = [
        "".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(60_000)
    ]
    words_per_text = max(40, chars // 7)
    recent: list[list[str]] = []
    with path.open("w", encoding="utf-8") as f:
        f.write("[")
        for i in range(n):
            if recent and rng.random() < 0.2:
                words = list(rng.choice(recent))
                words[rng.randrange(len(words))] = rng.choice(vocabulary)
            else:
                words = rng.choices(vocabulary, k=words_per_text)
            recent.append(words)
            if len(recent) > 1000:
                recent.pop(0)
            record = {
                "url": f"https://site{i % 50}.example/article/{i}",
                "title": " ".join(words[:6]),
                "text": " ".join(words),
            }
            f.write(("\n" if i == 0 else ",\n") + json.dumps(record))
        f.write("\n]")


def peak(script: str, *args: str) -> tuple[list[int], float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=ROOT
    )
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    line = next(x for x in proc.stderr.splitlines() if x.startswith("PEAK "))
    summary = next((x for x in proc.stderr.splitlines() if " records: " in x), "")
    return [int(v) for v in line.split()[1:]], elapsed, summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--chars", type=int, nargs="+", default=[300])
    ap.add_argument("--no-json-load", action="store_true", help="skip the json.load comparison")
    args = ap.parse_args()
    print(
        f"{'records':>9} {'chars':>6} {'feed MB':>8} {'dedup peak MB':>14} {'worker MB':>10} "
        f"{'time s':>7} {'json.load MB':>13}"
    )
    for n in args.records:
        for chars in args.chars:
            with tempfile.TemporaryDirectory() as tmp:
                feed = Path(tmp) / "items.json"
                write_feed(feed, n, chars)
                (self_kb, child_kb), elapsed, summary = peak(
                    MEASURE, "dedup", str(feed), "-o", str(Path(tmp) / "unique.json"),
                    "--format", "json", "--report", str(Path(tmp) / "report.json"), "--quiet",
                )  # fmt: skip
                loaded = "-"
                if not args.no_json_load:
                    (load_kb, _), _, _ = peak(JSON_LOAD, str(feed))
                    loaded = f"{load_kb / 1024:.0f}"
                size = feed.stat().st_size / 1e6
                print(
                    f"{n:>9} {chars:>6} {size:>8.0f} {self_kb / 1024:>14.0f} "
                    f"{child_kb / 1024:>10.0f} {elapsed:>7.1f} {loaded:>13}   ({summary})",
                    flush=True,
                )


if __name__ == "__main__":
    main()
