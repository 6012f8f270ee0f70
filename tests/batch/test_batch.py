"""Batch dedup decides by the same rule as the stores: exact against brute force, and one kept
text per group of light edits (the batch bar of issue 10)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nearduppipe.batch.pairs import near_pairs, verdicts
from nearduppipe.fingerprint.rule import Rule
from nearduppipe.index.words import wide_words

U64 = np.uint64


def _brute(fps: np.ndarray, wide: np.ndarray, has: np.ndarray, rule: Rule) -> list[tuple[int, ...]]:
    out = []
    for i in range(len(fps)):
        for j in range(i + 1, len(fps)):
            d = int(np.bitwise_count(fps[i] ^ fps[j]))
            dw = int(np.bitwise_count(wide[i] ^ wide[j]).sum()) if has[i] and has[j] else None
            if rule.is_near(d, dw):
                out.append((i, j, d, -1 if dw is None else dw))
    return out


@pytest.mark.parametrize("rule", [Rule(), Rule.paper(3), Rule(similarity=0.97, radius=6)])
def test_near_pairs_equal_brute_force(rule: Rule) -> None:
    rng = np.random.default_rng(3)
    n = 700
    centres = rng.integers(0, 2**64, 40, dtype=U64, endpoint=False)
    wide_c = rng.integers(0, 2**64, (40, 8), dtype=U64, endpoint=False)
    pick = rng.integers(0, 40, n)
    fps = centres[pick].copy()
    wide = wide_c[pick].copy()
    for i in range(n):  # clustered: 0..11 bits on 64, 0..90 on 512
        for b in rng.choice(64, int(rng.integers(0, 12)), replace=False):
            fps[i] ^= U64(1) << U64(b)
        for b in rng.choice(512, int(rng.integers(0, 90)), replace=False):
            wide[i, b // 64] ^= U64(1) << U64(b % 64)
    fps[:100] = rng.integers(0, 2**64, 100, dtype=U64, endpoint=False)  # random ones too
    has = rng.random(n) > 0.1  # some without a wide fingerprint (format-1 entries)
    got = [tuple(r) for r in near_pairs(fps, wide, has, rule).tolist()]
    assert got == _brute(fps, wide, has, rule)
    assert len(got) > 100


def test_verdicts_match_the_rule_pair_by_pair() -> None:
    rule = Rule()
    pairs = np.array([[0, 1, 8], [0, 2, 3], [1, 2, 9]], dtype=np.int64)
    wide = np.zeros((3, 8), dtype=U64)
    wide[1, 0] = U64((1 << 61) - 1)  # 61 bits from 0: at the threshold
    has = np.array([True, True, False])
    near, dw = verdicts(pairs, wide, has, rule)
    assert near.tolist() == [True, True, False] and dw.tolist() == [61, -1, -1]


def _text(rng: random.Random, vocab: list[str], n: int = 400) -> list[str]:
    return [rng.choice(vocab) for _ in range(n)]


def test_dedup_keeps_exactly_one_per_group_of_light_edits(tmp_path: Path) -> None:
    """300 groups of 3 texts (400 words from a 5,000-word vocabulary; 0, 1 and 2 words
    changed) and 600 distinct texts: one kept per group, every distinct text kept."""
    rng = random.Random(10)
    vocab = [f"w{i}" for i in range(5000)]
    records = []
    for g in range(300):
        words = _text(rng, vocab)
        for changed in (0, 1, 2):
            edited = list(words)
            for pos in rng.sample(range(len(edited)), changed):
                edited[pos] = rng.choice(vocab)
            records.append({"url": f"https://g{g}.example/{changed}", "text": " ".join(edited)})
    for d in range(600):
        records.append({"url": f"https://d.example/{d}", "text": " ".join(_text(rng, vocab))})
    rng.shuffle(records)
    src = tmp_path / "items.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "unique.jsonl"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "nearduppipe.cli",
            "dedup",
            str(src),
            "-o",
            str(out),
            "--quiet",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    kept = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    groups = {u.split("/")[2] for u in kept if u.startswith("https://g")}
    per_group = {g: sum(1 for u in kept if u.split("/")[2] == g) for g in groups}
    assert len(groups) == 300 and set(per_group.values()) == {1}
    assert sum(1 for u in kept if u.startswith("https://d.example/")) == 600


def test_wide_words_round_trip() -> None:
    x = (1 << 511) | (1 << 64) | 5
    words = wide_words(x)
    assert words.dtype == U64 and words[0] == 5 and words[1] == 1 and words[7] == 1 << 63
