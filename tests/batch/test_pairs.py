"""batch/pairs.py: ``near_pairs`` (the local engine's self-join), ``near_pairs_against``
(``dedup --against``) and ``cross_pairs`` return exactly the rule's pairs over all pairs, each
once and oriented as declared, at the radii where they switch from sorted tables (up to 4) to
the compiled index join (5 on), at radius 0 and 16, with the 512-bit verdict and the legacy
distance, with empty sides, identical fingerprints and in several threads."""

from __future__ import annotations

import numpy as np
import pytest

from nearduppipe.batch.pairs import cross_pairs, near_pairs, near_pairs_against
from nearduppipe.fingerprint.rule import Rule

from .test_sliced import _clustered_with_words, _rule_scan

U64 = np.uint64
TOP = 2**64 - 1

RULES = [
    Rule(radius=4),
    Rule(radius=5),
    Rule(radius=0),
    Rule(radius=1),
    Rule(radius=16, similarity=0.9),
    Rule(radius=8, legacy_distance=8),
    Rule(radius=3, legacy_distance=0),
    Rule.paper(4),
    Rule.paper(5),
]


def _name(rule: Rule) -> str:
    return f"similarity={rule.similarity}-radius={rule.radius}-legacy={rule.legacy_distance}"


@pytest.mark.parametrize("rule", RULES, ids=_name)
def test_near_pairs_are_the_rules_full_scan(rule: Rule) -> None:
    shared = _clustered_with_words(31, rule.radius, seed=10 + rule.radius)
    want = _rule_scan(shared, rule, None)
    for workers in (1, 3):
        assert near_pairs(*shared, rule, workers=workers).tolist() == want
    assert len(want) > 20


@pytest.mark.parametrize("rule", RULES, ids=_name)
@pytest.mark.parametrize("split", [0, 1, 70, 160])
def test_near_pairs_against_are_the_rules_full_scan(rule: Rule, split: int) -> None:
    """Queries are the rows from ``split`` on, stored the rows before: ``(q, s, d, dw)``
    with ``q`` counted from the first query, sorted; none of two stored or of two queries."""
    fps, wides, has = _clustered_with_words(31, rule.radius, seed=20 + rule.radius)
    want = sorted(
        [j - split, i, d, dw] for i, j, d, dw in _rule_scan((fps, wides, has), rule, split)
    )
    queries = (fps[split:], wides[split:], has[split:])
    stored = (fps[:split], wides[:split], has[:split])
    for workers in (1, 3):
        got = near_pairs_against(queries, stored, rule, workers=workers)
        assert got.shape[1] == 4 and got.tolist() == want
    if split == 70:
        assert len(want) > 10


@pytest.mark.parametrize("radius", [0, 1, 3, 4, 5, 8, 16])
def test_cross_pairs_of_identical_and_extreme_fingerprints(radius: int) -> None:
    """Every stored fingerprint 2**64 - 1 but a few extremes, queries at 0, 1, ``radius`` and
    ``radius + 1`` bits from it (all in the top bits, or on the low ones): ``(q, s, d)``,
    sorted, each once, through every block layout the sorted tables allow."""
    stored = np.array([TOP] * 40 + [0, 1 << 63, TOP ^ (1 << 63)], dtype=U64)
    queries = []
    for k in sorted({0, 1, radius, radius + 1}):
        queries.append(TOP ^ (((1 << k) - 1) << (64 - k)) if k else TOP)  # top bits
        queries.append(TOP ^ ((1 << k) - 1))  # low bits
    queries += [0, 1 << 63]
    qs = np.array(queries, dtype=U64)
    d = np.bitwise_count(qs[:, None] ^ stored[None, :]).astype(np.int64)
    want = [[q, s, int(d[q, s])] for q, s in zip(*np.nonzero(d <= radius), strict=True)]
    assert cross_pairs(qs, stored, radius).tolist() == want
    assert cross_pairs(qs, stored, radius, workers=2).tolist() == want
    if radius <= 4:
        for blocks in (radius + 1, radius + 3, radius + 5):
            assert cross_pairs(qs, stored, radius, blocks=blocks).tolist() == want
    assert cross_pairs(qs[:0], stored, radius).shape == (0, 3)
    assert cross_pairs(qs, stored[:0], radius).shape == (0, 3)


@pytest.mark.parametrize("radius", [4, 5, 8])
def test_near_pairs_against_in_threads(radius: int) -> None:
    """3,100 queries (up to 3 threads of the index join beyond radius 4) against 1,500 stored:
    the same pairs in 1, 2 and 3 threads, those of a full scan."""
    rng = np.random.default_rng(radius)
    stored = rng.integers(0, TOP, 1500, dtype=U64, endpoint=True)
    flips = (U64(1) << rng.integers(0, 64, (3000, radius + 1)).astype(U64)).astype(U64)
    near = stored[rng.integers(0, 1500, 3000)]
    for c in range(radius + 1):
        near = near ^ (flips[:, c] * (rng.random(3000) < 0.7))
    queries = np.concatenate([near, rng.integers(0, TOP, 100, dtype=U64, endpoint=True)])
    words = np.zeros((len(queries), 8), dtype=U64), np.zeros((len(stored), 8), dtype=U64)
    q_side = (queries, words[0], np.zeros(len(queries), dtype=bool))
    s_side = (stored, words[1], np.zeros(len(stored), dtype=bool))
    rule = Rule.paper(radius)
    want = []
    for lo in range(0, len(queries), 500):
        d = np.bitwise_count(queries[lo : lo + 500, None] ^ stored[None, :]).astype(np.int64)
        want += [
            [q + lo, s, int(d[q, s]), -1] for q, s in zip(*np.nonzero(d <= radius), strict=True)
        ]
    assert len(want) > 1500
    for workers in (1, 2, 3):
        assert near_pairs_against(q_side, s_side, rule, workers=workers).tolist() == want
