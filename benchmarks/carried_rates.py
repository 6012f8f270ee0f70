"""Per-core CPU rates of dedup's steps on records that carry their fingerprints (issue 44
item 2), for sizing: CPU seconds in this one process (``time.process_time``, so the machine's
load matters little), each step run as a task runs it. Printed: pass 1's task
(:func:`~nearduppipe.batch.split_task.read_split`) per record; the local engine's join
(:func:`~nearduppipe.batch.pairs.near_pairs`) per fingerprint; Spark's broadcast join
(:func:`~nearduppipe.batch.sliced.slice_pairs`, ``--slices`` tasks' work summed, each
building its own index) per fingerprint; the output pass's task
(:func:`~nearduppipe.batch.write_task.write_split`, every record kept: the most it writes)
per record.

    python benchmarks/carried_rates.py [--n 200000] [--slices 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    from engines_carried import make_inputs

    from nearduppipe.batch.core import Fields
    from nearduppipe.batch.inputs import sources_of
    from nearduppipe.batch.pairs import near_pairs
    from nearduppipe.batch.precomputed import DEFAULT_FIELD
    from nearduppipe.batch.sliced import slice_pairs
    from nearduppipe.batch.split_task import Wants, read_split
    from nearduppipe.batch.splits import plan_splits
    from nearduppipe.batch.write_task import WriteTask, write_split
    from nearduppipe.fingerprint.page import FingerprintParams
    from nearduppipe.fingerprint.rule import Rule

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--slices", type=int, default=4)
    args = ap.parse_args()
    n, params, rule = args.n, FingerprintParams(), Rule()
    fields = Fields("text", "html", "url", DEFAULT_FIELD)
    with tempfile.TemporaryDirectory() as tmp:
        sources = sources_of(make_inputs(Path(tmp), n, "plain"), None)
        (split,) = plan_splits(sources, 1, min_bytes=1 << 40)  # (one split: the whole file)
        t = time.process_time()
        got = read_split(split, fields, params, Wants())
        read_s = time.process_time() - t
        fps = np.frombuffer(got.fps, dtype=np.uint64)
        wides = np.frombuffer(bytes(got.wides), dtype="<u8").reshape(n, 8).astype(np.uint64)
        has = np.ones(n, dtype=bool)
        near_pairs(fps[:1000], wides[:1000], has[:1000], rule)  # (kernels compiled first)
        t = time.process_time()
        local = near_pairs(fps, wides, has, rule)
        local_s = time.process_time() - t
        t = time.process_time()
        parts = [
            slice_pairs((fps, wides, has), rule, part, args.slices, None)
            for part in range(args.slices)
        ]
        sliced_s = time.process_time() - t
        found = np.concatenate(parts)
        found = found[np.lexsort((found[:, 1], found[:, 0]))]
        assert np.array_equal(found, local), "the sliced join differs from the local one"
        every = np.ones(n, dtype=bool)
        task = WriteTask(split, 0, n, every, ~every, ~every, fields, params, "jsonl", [], False)
        t = time.process_time()
        written = write_split(task)
        write_s = time.process_time() - t
        assert written.kept == n and written.error is None
    print(f"{n:,} carried records, {len(local):,} near pairs (the same from both joins)")
    print(f"pass 1 task (read_split): {read_s / n * 1e6:.1f} us a record")
    print(f"local join (near_pairs): {local_s / n * 1e6:.1f} us a fingerprint")
    print(f"broadcast join, {args.slices} slices summed: {sliced_s / n * 1e6:.1f} us a fingerprint")
    print(f"output task (write_split, all kept): {write_s / n * 1e6:.1f} us a record")


if __name__ == "__main__":
    main()
