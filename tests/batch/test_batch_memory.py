"""Batch dedup's memory is bounded by the data, not by the square of a group (issue 44, item 3):
exact copies are held by their representative (``batch/near.py``), the keep rule re-splits a
group over representatives (``batch/keep.py``), pairs of records are listed only for
``--pairs`` and then streamed; a record over ``--max-record-bytes`` is never read whole
(``batch/bounded.py``). Peak memory is measured in a child process (its own ``ru_maxrss``)."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
import pytest

from nearduppipe.batch.core import collapse
from nearduppipe.batch.keep import KEEP_RULES, _choose, keep_groups
from nearduppipe.batch.near import NearPairs
from nearduppipe.fingerprint.compact import encode_for
from nearduppipe.fingerprint.page import FingerprintParams
from nearduppipe.fingerprint.rule import Fingerprints

from ..support.cli import ROOT, run

# (the newest corner only: CI runs it once, see the marker in pyproject.toml)
pytestmark = pytest.mark.slow

GB = 1 << 30


def _expanded(rep: np.ndarray, pairs: np.ndarray, has_wide: np.ndarray) -> list[tuple[int, ...]]:
    """Every pair of records, by brute force: copies with each other, copies across pairs."""
    out = set()
    n = len(rep)
    for x in range(n):
        for y in range(x + 1, n):
            if rep[x] == rep[y]:
                out.add((x, y, 0, 0 if has_wide[x] else -1))
    for i, j, d, dw in pairs.tolist():
        for x in np.flatnonzero(rep == i).tolist():
            for y in np.flatnonzero(rep == j).tolist():
                out.add((min(x, y), max(x, y), d, dw))
    return sorted(out)


def _random_graph(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    fps = rng.integers(0, max(2, n // 3), size=n).astype(np.uint64)
    has = np.ones(n, dtype=bool)
    rep = collapse(fps, np.zeros((n, 8), dtype=np.uint64), has)
    reps = np.unique(rep).tolist()
    edges = [(x, y) for x in reps for y in reps if x < y and rng.random() < 0.25]
    pairs = np.array(
        [(x, y, int(rng.integers(0, 9)), int(rng.integers(-1, 60))) for x, y in edges],
        dtype=np.int64,
    ).reshape(-1, 4)
    return rep, pairs, has


def test_near_pairs_list_every_pair_of_records_in_order() -> None:
    rng = np.random.default_rng(44)
    for _ in range(60):
        n = int(rng.integers(1, 30))
        rep, pairs, has = _random_graph(rng, n)
        index = np.sort(rng.choice(3 * n, n, replace=False)).astype(np.int64)
        near = NearPairs(index, rep, pairs, has)
        want = [(int(index[a]), int(index[b]), d, w) for a, b, d, w in _expanded(rep, pairs, has)]
        got = [tuple(row) for row in near.array().tolist()]
        assert got == want
        assert len(near) == len(want)
        chunked = [tuple(r) for c in near.chunks(rows=3) for r in c.tolist()]
        assert chunked == want
        in_pairs = sorted({x for a, b, _, _ in want for x in (a, b)})
        assert near.in_pairs().tolist() == in_pairs


def _keep_by_records(
    rep: np.ndarray,
    pairs: np.ndarray,
    rule: str,
    keys: Sequence[str],
    lengths: np.ndarray,
) -> np.ndarray:
    """The rule over records, as it was written before representatives (the reference)."""
    n = len(rep)
    keeper = np.arange(n)
    adjacent: dict[int, set[int]] = {}
    for i, j in pairs[:, :2].tolist():
        adjacent.setdefault(i, set()).add(j)
        adjacent.setdefault(j, set()).add(i)

    def components(members: list[int]) -> list[list[int]]:
        left, out = set(members), []
        while left:
            start = min(left)
            comp, stack = [], [start]
            left.discard(start)
            while stack:
                x = stack.pop()
                comp.append(x)
                for y in list(left):
                    if rep[y] == rep[x] or int(rep[y]) in adjacent.get(int(rep[x]), ()):
                        left.discard(y)
                        stack.append(y)
            out.append(sorted(comp))
        return out

    work = components(list(range(n)))
    canonical: list[str | None] = [None] * n
    while work:
        members = work.pop()
        if len(members) < 2:
            continue
        k = _choose(members, rule, keys, canonical, lengths)
        near = adjacent.get(int(rep[k]), set())
        rest = []
        for m in members:
            if m != k and (rep[m] == rep[k] or int(rep[m]) in near):
                keeper[m] = k
            elif m != k:
                rest.append(m)
        if len(rest) > 1:
            work.extend(components(rest))
    return keeper


@pytest.mark.parametrize("rule", [r for r in KEEP_RULES if r != "canonical"])
def test_keep_groups_over_representatives_equals_the_rule_over_records(rule: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(2, 40))
        rep, pairs, _ = _random_graph(rng, n)
        keys = [
            f"http{'s' * int(rng.integers(0, 2))}://h/{'x' * int(rng.integers(1, 9))}{i}"
            for i in range(n)
        ]
        lengths = rng.integers(0, 5, size=n)
        got = keep_groups(rep, pairs, rule, keys, (), lengths).keeper
        assert got.tolist() == _keep_by_records(rep, pairs, rule, keys, lengths).tolist()


def _peak(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """``nearduppipe ARGS`` in a child process, and the peak RSS (bytes) of its largest
    process (the driver: ``ru_maxrss`` of the children waited for, only these here)."""
    code = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run([sys.executable, '-m', 'nearduppipe.cli', *sys.argv[1:]],"
        " capture_output=True, text=True)\n"
        "sys.stderr.write(p.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(p.returncode)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    return proc, int(proc.stdout.strip().splitlines()[-1]) * 1024.0


def test_200000_identical_records_and_1000_distinct_under_1_gb(tmp_path: Path) -> None:
    """Before: 10,000 identical records took 9.3 GB and 200,000 were killed at 22.5 GB, the
    pairs of the copies listed though no --pairs was asked for. The records carry their
    fingerprints (as a crawl's export does), so the run measures the grouping, not extraction."""
    params = FingerprintParams()
    rng = random.Random(44)

    def carried() -> str:
        return encode_for(
            Fingerprints(rng.getrandbits(64), rng.getrandbits(512)), params, from_text=True
        )

    same = carried()
    feed = tmp_path / "copies.jsonl.gz"
    want = []
    with gzip.open(feed, "wt", encoding="utf-8") as f:
        for i in range(200_000):
            line = json.dumps({"url": f"https://a.example/{i}", "fingerprint": same}) + "\n"
            f.write(line)
            if not i:
                want.append(line)
        for i in range(1000):
            line = json.dumps({"url": f"https://b.example/{i}", "fingerprint": carried()}) + "\n"
            f.write(line)
            want.append(line)
    out = tmp_path / "kept.jsonl"
    proc, peak = _peak(["dedup", str(feed), "--quiet", "--workers", "2", "-o", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "201000 records: 1001 kept, 199999 near-duplicates in 1 clusters" in proc.stderr
    assert out.read_text(encoding="utf-8") == "".join(want)
    assert peak < 1 * GB, f"peak {peak / 2**20:.0f} MB"


BIG_HEAD = b'{"url": "https://a.example/big", "text": "'
BIG_CHUNK = b"ab " * (1 << 20)  # 3 MB


def write_big_line(f: IO[bytes]) -> None:
    """A 402 MB JSON line (key ``https://a.example/big``), written 3 MB at a time."""
    f.write(BIG_HEAD)
    for _ in range(134):
        f.write(BIG_CHUNK)
    f.write(b'"}\n')


def test_a_400_mb_line_is_not_read_and_is_kept_under_1_gb(tmp_path: Path) -> None:
    """Before: a 400 MB JSON line was read whole (1.7 GB); now it is counted, named and
    copied to -o a chunk at a time, and the other records are deduplicated as before."""
    words = [f"w{i}" for i in range(2000)]
    rng = random.Random(4)
    text = " ".join(rng.choice(words) for _ in range(300))
    lines = [
        json.dumps({"url": "https://a.example/1", "text": text}) + "\n",
        None,  # the large one
        json.dumps({"url": "https://a.example/3", "text": text}) + "\n",  # a copy of 1
        json.dumps({"url": "https://a.example/4", "text": text[::-1]}) + "\n",
    ]
    feed = tmp_path / "big.jsonl.gz"
    with gzip.open(feed, "wb", compresslevel=1) as f:
        for line in lines:
            if line is not None:
                f.write(line.encode())
            else:
                write_big_line(f)
    out = tmp_path / "kept.jsonl"
    proc, peak = _peak(["dedup", str(feed), "--quiet", "--workers", "2", "-o", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "4 records: 3 kept, 1 near-duplicates" in proc.stderr
    assert "1 records over --max-record-bytes 5000000 not read" in proc.stderr
    assert f"{feed}: line 2" in proc.stderr
    assert peak < 1 * GB, f"peak {peak / 2**20:.0f} MB"
    with out.open("rb") as f:
        assert f.readline() == lines[0].encode()  # type: ignore[union-attr]
        big = f.readline()
        assert big.startswith(BIG_HEAD) and big.endswith(b'"}\n')
        assert len(big) == len(BIG_HEAD) + 134 * len(BIG_CHUNK) + 3
        assert f.read() == lines[3].encode()  # type: ignore[union-attr]


def test_pairs_of_copies_are_streamed_and_equal_their_expansion(tmp_path: Path) -> None:
    """--pairs lists every pair of records (a group of c copies: c(c-1)/2 rows), written a
    chunk at a time."""
    params = FingerprintParams()
    rng = random.Random(3)
    fps = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
    near = Fingerprints(fps.fp ^ 0b111, fps.wide ^ 0b1111)
    feed = tmp_path / "copies.jsonl"
    records = [encode_for(fps, params, from_text=True)] * 400
    records += [encode_for(near, params, from_text=True)] * 3
    feed.write_text(
        "".join(
            json.dumps({"url": f"https://a.example/{i}", "fingerprint": value}) + "\n"
            for i, value in enumerate(records)
        )
    )
    pairs = tmp_path / "pairs.jsonl"
    proc = run("dedup", str(feed), "--quiet", "--workers", "1", "--pairs", str(pairs))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    n = len(records)
    want = [
        (a + 1, b + 1, 0 if (a < 400) == (b < 400) else 3)
        for a in range(n)
        for b in range(a + 1, n)
    ]
    assert [(r["a_record"], r["b_record"], r["distance"]) for r in rows] == want
    assert f"{len(want)} near-duplicate pairs written" in proc.stderr
