"""``dedup --against STORE``: queries per second against a sqlite store of N entries, the join
(every record at once: batch/against.py ``judge_records``, the local engine) beside the
lookups it replaced (one ``Store.get`` + ``Store.near`` per record: ``check_against``), in the
same run, alternated, medians of ``--runs``. A tenth of the queries are near-copies of stored
entries, a tenth are stored keys; the rest are new.

    python benchmarks/against_bench.py [--entries 1000000] [--queries 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nearduppipe import open_store
from nearduppipe.batch.against import Against, check_against, judge_records
from nearduppipe.batch.engine_local import LocalEngine
from nearduppipe.fingerprint.rule import Fingerprints
from nearduppipe.index.words import words_to_int
from nearduppipe.stores.base import Entry


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=20_000, help="queries timed one at a time")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    n, q = args.entries, args.queries
    fp = rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
    wide = rng.integers(0, 2**63, (n, 8), dtype=np.uint64)
    qfp = rng.integers(0, 2**63, q, dtype=np.uint64) * 2
    qwide = rng.integers(0, 2**63, (q, 8), dtype=np.uint64)
    copies = rng.choice(n, q // 10, replace=False)
    qfp[: q // 10] = fp[copies] ^ np.uint64(1 << 5)
    qwide[: q // 10] = wide[copies]
    keys = [f"https://site{i % 997}.example/{i}" for i in range(n)]
    qkeys = [f"https://new.example/{i}" for i in range(q)]
    for j, i in enumerate(rng.choice(n, q // 10, replace=False).tolist()):
        qkeys[q // 10 + j] = keys[i]
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "store.sqlite")
        t0 = time.perf_counter()
        with open_store(uri) as store:
            store.import_records(
                (Entry(keys[i], int(fp[i]), 1e9, None, words_to_int(wide[i])) for i in range(n)),
                [],
            )
        print(f"store of {n:,} entries built in {time.perf_counter() - t0:.1f} s")
        joins, lookups = [], []
        index = np.arange(q, dtype=np.int64)
        sample = [
            (i, qkeys[i], Fingerprints(int(qfp[i]), words_to_int(qwide[i])))
            for i in rng.choice(q, args.lookups, replace=False).tolist()
        ]
        engine = LocalEngine()  # (every core: the CLI's default)
        for _ in range(args.runs):
            with open_store(uri, read_only=True) as store:
                t0 = time.perf_counter()
                by_store, _ = judge_records(
                    Against(store), engine, store.rule, index,
                    (qfp, qwide, np.ones(q, dtype=bool)), qkeys,
                )  # fmt: skip
                joins.append(q / (time.perf_counter() - t0))
            with open_store(uri, read_only=True) as store:
                t0 = time.perf_counter()
                check_against(store, sample)
                lookups.append(len(sample) / (time.perf_counter() - t0))
        dropped = len(by_store)
    join, lookup = statistics.median(joins), statistics.median(lookups)
    print(f"queries against {n:,} stored (sqlite), {q:,} queries, {dropped:,} near a stored page")
    print(f"  join (judge_records, local engine): {join:,.0f} queries/s (runs: {joins})")
    print(f"  one lookup a query (check_against): {lookup:,.0f} queries/s")
    print(f"  ratio: {join / lookup:.1f}x")


if __name__ == "__main__":
    main()
