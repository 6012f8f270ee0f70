"""nearduppipe dedup over a JSON-lines export: N records of ~3,000-character texts (10% near-
duplicate copies with a sentence appended), timed end to end through the CLI, beside the floor
of reading and parsing the same file in the same run.

    python benchmarks/dedup_bench.py [--records 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nearduppipe.cli import main as cli
from nearduppipe.fingerprint.features import idf_table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    args = ap.parse_args()
    rng = random.Random(4)
    # Distinct texts must not share a small sentence pool (bag-of-words would make them
    # near-duplicates): draw words from jieba's 270,000-word vocabulary instead.
    vocabulary = sorted(idf_table()[0])
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "feed.jsonl"
        texts: list[str] = []
        with src.open("w", encoding="utf-8") as f:
            for i in range(args.records):
                if texts and rng.random() < 0.1:
                    text = rng.choice(texts) + "(本文转载自城市门户网)"
                else:
                    words = rng.choices(vocabulary, k=1400)
                    text = "".join(w + ("，" if n % 9 == 8 else "") for n, w in enumerate(words))[
                        :3000
                    ]
                    if len(texts) < 5000:
                        texts.append(text)
                f.write(
                    json.dumps(
                        {"url": f"https://site{i % 50}.example/{i}", "text": text},
                        ensure_ascii=False,
                    )
                    + "\n"
                )
        size = src.stat().st_size
        t0 = time.perf_counter()
        with src.open(encoding="utf-8") as f:
            n = sum(1 for line in f if json.loads(line))
        floor = time.perf_counter() - t0
        t0 = time.perf_counter()
        code = cli(
            [
                "dedup",
                str(src),
                "-o",
                str(Path(tmp) / "kept.jsonl"),
                "--report",
                str(Path(tmp) / "report.json"),
                "--format",
                "json",
                "--quiet",
            ]
        )
        elapsed = time.perf_counter() - t0
        report = json.loads((Path(tmp) / "report.json").read_text())
        print(
            f"{n} records ({size / 1e6:.0f} MB): dedup in {elapsed:.1f} s ({n / elapsed:.0f} records/s, exit {code}); "
            f"reading + parsing alone {floor:.1f} s; {report['summary']['dropped']} near-duplicates in "
            f"{len(report['clusters'])} clusters"
        )


if __name__ == "__main__":
    main()
