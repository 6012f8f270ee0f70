"""Tokens → weighted features: the sparse vector that SimHash projects.

A fingerprint is the sign pattern of 64 random projections of this vector, so two pages are
near-duplicates exactly when their vectors point the same way. Weights decide what "the same
way" means. The default, sublinear term frequency (``1 + log tf``) over jieba words, was chosen
on the labelled evaluation set (docs/quality.md): it kept every hard negative at a distance
of 7 or more while catching the most light edits. TF-IDF (jieba's IDF table; its median for
unknown words, as ``jieba.analyse`` does) puts the weight on rare words, which are exactly what
edits, typos and changed numbers touch, so it moved near-duplicates further apart.
"""

from __future__ import annotations

import functools
import importlib.resources
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from .stopwords import STOP_WORDS
from .tokenize import Segmenter, normalise, token_counts, tokenize

__all__ = ["FeatureConfig", "features", "idf_table", "term_counts", "weigh"]

Weighting = Literal["tfidf", "tf"]


@dataclass(frozen=True)
class FeatureConfig:
    """How text becomes features. Frozen: one config is shared by every page of a crawl.

    ``weighting``: ``"tfidf"`` or ``"tf"``. ``sublinear_tf``: use ``1 + log(tf)`` so one word
    repeated many times cannot outweigh the rest. ``shingle``: 1 for words, n for word n-grams
    (order-sensitive). ``top_k``: keep only the k heaviest features (the seeds' keyword variant);
    ``None`` keeps all. ``drop_stop_words`` and ``min_token_chars`` filter tokens before weighting.
    """

    weighting: Weighting = "tf"
    sublinear_tf: bool = True
    shingle: int = 1
    top_k: int | None = None
    drop_stop_words: bool = True
    min_token_chars: int = 1
    segmenter: Segmenter = "rjieba"
    stop_words: frozenset[str] = field(default=STOP_WORDS, repr=False)

    def __post_init__(self) -> None:
        if self.weighting not in ("tfidf", "tf"):
            raise ValueError(f"weighting must be 'tfidf' or 'tf', not {self.weighting!r}")
        if self.segmenter not in ("rjieba", "jieba", "chars", "bigrams"):
            raise ValueError(f"unknown segmenter {self.segmenter!r}")
        if not 1 <= self.shingle <= 8:
            raise ValueError(f"shingle must be between 1 and 8, not {self.shingle!r}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be a positive integer or None, not {self.top_k!r}")
        if self.min_token_chars < 1:
            raise ValueError(f"min_token_chars must be >= 1, not {self.min_token_chars!r}")


DEFAULT_FEATURES = FeatureConfig()


@functools.cache
def idf_table() -> tuple[dict[str, float], float]:
    """jieba's IDF table and its median (the weight of unknown words), loaded once."""
    path = importlib.resources.files("jieba") / "analyse" / "idf.txt"
    table: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        word, _, value = line.partition(" ")
        if value:
            table[word] = float(value)
    values = sorted(table.values())
    return table, values[len(values) // 2]


def _select_tokens(tokens: list[str], config: FeatureConfig) -> list[str]:
    stop = config.stop_words if config.drop_stop_words else frozenset()
    min_chars = config.min_token_chars
    if min_chars == 1:
        return [t for t in tokens if t not in stop]
    return [t for t in tokens if len(t) >= min_chars and t not in stop]


def _shingles(tokens: list[str], n: int) -> list[str]:
    if n == 1 or len(tokens) < n:
        return tokens if n == 1 else [" ".join(tokens)] if tokens else []
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


# 1 + log(tf) for the term frequencies of almost every feature, computed by the same expression
# as for any other tf (so the same float), looked up instead of a Python call per feature.
_SUBLINEAR = [0.0, *(1.0 + math.log(c) for c in range(1, 4096))]


def term_counts(text: str, config: FeatureConfig = DEFAULT_FEATURES) -> Counter[str]:
    """Term frequencies of the selected features (tokens, stop words dropped, shingled), in the
    order of their first occurrence: what :func:`weigh` weighs."""
    if config.shingle == 1 and config.min_token_chars == 1:
        # Count first, then drop the stop words: the same counts in the same order as counting
        # the filtered tokens, with a set operation over the distinct words instead of a
        # membership test per token.
        counts = token_counts(normalise(text), config.segmenter, normalised=True)
        if config.drop_stop_words:
            for word in counts.keys() & config.stop_words:
                dict.__delitem__(counts, word)  # not Counter.__delitem__, a Python method
        return counts
    tokens = tokenize(normalise(text), config.segmenter, normalised=True)
    return Counter(_shingles(_select_tokens(tokens, config), config.shingle))


def features(text: str, config: FeatureConfig = DEFAULT_FEATURES) -> dict[str, float]:
    """Weighted features of ``text``; empty when it has no usable token."""
    return weigh(term_counts(text, config), config)


def weigh(counts: Counter[str], config: FeatureConfig = DEFAULT_FEATURES) -> dict[str, float]:
    """Weighted features of term frequencies (see :func:`term_counts`)."""
    if not counts:
        return {}
    weights: dict[str, float]
    if not config.sublinear_tf:
        weights = dict(zip(counts, map(float, counts.values()), strict=True))
    else:
        try:
            weights = dict(zip(counts, map(_SUBLINEAR.__getitem__, counts.values()), strict=True))
        except IndexError:  # a term frequency beyond the table
            weights = {f: 1.0 + math.log(c) for f, c in counts.items()}
    if config.weighting == "tfidf":
        table, median = idf_table()
        if config.shingle == 1:
            weights = {f: w * table.get(f, median) for f, w in weights.items()}
        else:  # a shingle is as rare as its rarest word
            weights = {
                f: w * max(table.get(p, median) for p in f.split(" ")) for f, w in weights.items()
            }
    if config.top_k is not None and len(weights) > config.top_k:
        top = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[: config.top_k]
        weights = dict(top)
    return weights
