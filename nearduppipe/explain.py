"""Why two texts are (or are not) near-duplicates: both fingerprints and distances, the cosine
each distance implies, the verdict of the rule, feature overlap, and the features that pushed each
differing bit of the 64-bit fingerprint.

Bit ``j`` of a fingerprint is the sign of ``sum_f w(f) * s_j(f)`` where ``s_j(f)`` is ``+1`` or
``-1`` by bit ``j`` of the feature's hash. Where two fingerprints differ, the features whose
contribution ``w_A(f) s_j(f) - w_B(f) s_j(f)`` is largest are what moved that sum across zero:
usually the words one text has and the other lacks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .fingerprint.features import DEFAULT_FEATURES, FeatureConfig, features
from .fingerprint.rule import WIDE_BITS, Rule, implied_similarity
from .fingerprint.simhash import _fixed_point, simhash_pair, xxh3_64

__all__ = ["BitReport", "Explanation", "explain"]


@dataclass(frozen=True)
class BitReport:
    bit: int
    sum_a: float
    sum_b: float
    pushers: list[tuple[str, float]]  # feature, contribution of A minus contribution of B


@dataclass(frozen=True)
class Explanation:
    fingerprint_a: int
    fingerprint_b: int
    distance: int
    features_a: int
    features_b: int
    shared: int
    cosine: float
    weighted_jaccard: float
    only_a: list[tuple[str, float]] = field(default_factory=list)
    only_b: list[tuple[str, float]] = field(default_factory=list)
    bits: list[BitReport] = field(default_factory=list)
    wide_a: int = 0
    wide_b: int = 0

    @property
    def wide_distance(self) -> int:
        return (self.wide_a ^ self.wide_b).bit_count()

    @property
    def expected_distance(self) -> float:
        """64 * angle / pi: the mean distance random hyperplanes give at this cosine."""
        return 64 * math.acos(max(-1.0, min(1.0, self.cosine))) / math.pi

    def render(self, rule: Rule | int | None = None) -> str:
        """Text for people; ``rule`` (or a 64-bit k, the paper's rule) adds the verdict."""
        if isinstance(rule, int):
            rule = Rule.paper(rule)
        d, dw = self.distance, self.wide_distance
        verdict = ""
        empty = [name for name, n in (("A", self.features_a), ("B", self.features_b)) if not n]
        if rule is not None and empty:
            # (both fingerprints of a text without features are 0: "near" would be a lie, and
            # a crawl never compares such a page: it keeps it, counted as skipped/no_features)
            verdict = (
                f"verdict: none: {' and '.join(empty)} {'has' if len(empty) == 1 else 'have'} "
                "no features (a crawl keeps such a page unchecked: skipped/no_features)"
            )
        elif rule is not None:
            near = rule.is_near(d, dw)
            verdict = (
                f"verdict: {'near-duplicates' if near else 'distinct'} under {rule.describe()}"
            )
            if not near:
                verdict += f" ({_why_distinct(rule, d, dw)})"
        lines = [
            f"A: {self.fingerprint_a:016x}  ({self.features_a} features)",
            f"B: {self.fingerprint_b:016x}  ({self.features_b} features)",
            f"64-bit distance: {d} (implies cosine {implied_similarity(d, 64):.3f})",
            f"{WIDE_BITS}-bit distance: {dw} "
            f"(implies cosine {implied_similarity(dw, WIDE_BITS):.3f})",
            *([verdict] if verdict else []),
            f"cosine of the feature vectors: {self.cosine:.4f} "
            f"(random hyperplanes expect a 64-bit distance of {self.expected_distance:.1f} at "
            "that angle)",
            f"shared features: {self.shared}; weighted Jaccard {self.weighted_jaccard:.3f}",
            "only in A: " + (", ".join(f"{f} ({w:.2f})" for f, w in self.only_a) or "-"),
            "only in B: " + (", ".join(f"{f} ({w:.2f})" for f, w in self.only_b) or "-"),
        ]
        if self.bits:
            lines.append(f"differing bits ({len(self.bits)}):")
        for b in self.bits:
            pushed = ", ".join(f"{f} ({d:+.2f})" for f, d in b.pushers)
            lines.append(
                f"  bit {b.bit:2d}: sum A {b.sum_a:+.2f}, sum B {b.sum_b:+.2f}; moved by {pushed}"
            )
        return "\n".join(lines)


def _why_distinct(rule: Rule, d: int, dw: int) -> str:
    """Which stage of the rule keeps the pair apart: a pair over the 64-bit radius is never a
    candidate, so its wide fingerprints are never compared, however close they are."""
    if rule.similarity is None:
        return f"64-bit distance {d} is over {rule.radius}"
    if d > rule.radius:
        why = f"not a candidate: 64-bit distance {d} is over the radius {rule.radius}"
        if rule.wide_threshold is not None and dw <= rule.wide_threshold:
            why += (
                f", so the {WIDE_BITS}-bit distance {dw} (within {rule.wide_threshold}) was "
                "never compared; NEARDUP_DISTANCE widens the radius"
            )
        return why
    return (
        f"a candidate, compared: {WIDE_BITS}-bit distance {dw} is over {rule.wide_threshold}, "
        f"cosine {implied_similarity(dw, WIDE_BITS):.3f} below {rule.similarity:g}"
    )


_SCALE = 1 << 16


def _exact(feats: dict[str, float]) -> dict[str, int]:
    """The integer weights SimHash sums (its fixed point, 2**16 per unit of weight), so that
    a sum's sign here is the sign SimHash saw."""
    if not feats:
        return {}
    ints = _fixed_point(list(feats.values())).tolist()
    return {f: int(v) for f, v in zip(feats, ints, strict=True)}


def explain(
    text_a: str, text_b: str, config: FeatureConfig = DEFAULT_FEATURES, top: int = 5
) -> Explanation:
    fa, fb = features(text_a, config), features(text_b, config)
    fp_a, wide_a = simhash_pair(fa) if fa else (0, 0)
    fp_b, wide_b = simhash_pair(fb) if fb else (0, 0)
    keys = set(fa) | set(fb)
    dot = sum(fa.get(f, 0.0) * fb.get(f, 0.0) for f in keys)
    norm = math.sqrt(sum(w * w for w in fa.values())) * math.sqrt(sum(w * w for w in fb.values()))
    low = sum(min(fa.get(f, 0.0), fb.get(f, 0.0)) for f in keys)
    high = sum(max(fa.get(f, 0.0), fb.get(f, 0.0)) for f in keys)
    hashes = {f: xxh3_64(f) for f in keys}
    wa = _exact(fa)
    wb = _exact(fb)
    bits = []
    for j in range(64):
        if not ((fp_a ^ fp_b) >> j) & 1:
            continue

        def sign(f: str, j: int = j) -> float:
            return 1.0 if (hashes[f] >> j) & 1 else -1.0

        # the sums SimHash compares with 0, in its exact fixed point (a float sum can leave
        # 4e-16 where the fingerprint's sum is exactly 0: Python 3.12's compensated sum())
        sum_a = sum(wa[f] * sign(f) for f in fa) / _SCALE
        sum_b = sum(wb[f] * sign(f) for f in fb) / _SCALE
        delta = {f: (fa.get(f, 0.0) - fb.get(f, 0.0)) * sign(f) for f in keys}
        pushers = sorted((kv for kv in delta.items() if kv[1]), key=lambda kv: -abs(kv[1]))[:top]
        bits.append(BitReport(j, sum_a, sum_b, pushers))
    return Explanation(
        fp_a,
        fp_b,
        (fp_a ^ fp_b).bit_count(),
        len(fa),
        len(fb),
        len(set(fa) & set(fb)),
        dot / norm if norm else 0.0,
        low / high if high else 0.0,
        sorted(((f, w) for f, w in fa.items() if f not in fb), key=lambda kv: -kv[1])[:10],
        sorted(((f, w) for f, w in fb.items() if f not in fa), key=lambda kv: -kv[1])[:10],
        bits,
        wide_a or 0,
        wide_b or 0,
    )
