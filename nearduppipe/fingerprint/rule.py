"""The decision rule: when is a stored page a near-duplicate of a new one?

Two stages (docs/quality.md has the measurements behind them):

1. **Candidates**: every stored page whose 64-bit SimHash is within ``radius`` bits of the
   query's. The block index finds exactly these (:mod:`nearduppipe.index`).
2. **Verdict**: a candidate is a near-duplicate when the two pages' *wide* SimHashes (256 bits
   from the same weighted features) are within ``wide_threshold`` bits. The Hamming distance of
   ``b``-bit SimHashes estimates the angle between the feature vectors as ``pi * d / b`` with a
   standard deviation shrinking as ``1 / sqrt(b)``: 256 bits have a quarter of the variance of
   64, which is what lifts recall without admitting unrelated pages.

The user states the verdict as a cosine ``similarity``; the threshold in bits is
``floor(bits * acos(similarity) / pi)``. ``similarity=None`` is the paper's rule (Manku et al.
2007): 64-bit distance ``<= radius`` (k = 3) and no second stage.

Entries written by format-1 stores have no wide fingerprint. They are judged by the 64-bit rule
at ``min(radius, legacy_distance)`` (3 by default): never looser than the paper's rule, so a
migrated store can miss a near-duplicate but never drop a page format 1 would have kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from .versions import latest_extraction, settled_extraction

__all__ = ["DEFAULT_RADIUS", "PAPER_RULE", "Fingerprints", "Rule", "distances", "wide_threshold"]

WIDE_BITS = 512
# The 64-bit candidate radius of the default rule: 10, not 8 (releases up to 0.1). Near-duplicates
# at 64-bit distance 9-10 pass the 512-bit verdict: recall on real pages in random crawl orders
# 0.954 -> 0.965 (precision 0.9986 -> 0.9985), synthetic set 0.987-0.989 -> 0.995-0.997, and a
# query at 10 M entries costs ~4x radius 8's on the same tables (docs/quality.md, "The
# candidate radius"). A store made at another radius keeps its own (Rule.radius_given).
DEFAULT_RADIUS = 10


class Fingerprints(NamedTuple):
    """A page's fingerprints from one pass over its features: the paper's 64-bit SimHash (it
    keys the index and is what logs and reports show) and the wide SimHash (``None`` for
    entries that predate it)."""

    fp: int
    wide: int | None = None


def wide_threshold(similarity: float, bits: int = WIDE_BITS) -> int:
    """Largest wide distance whose implied cosine is still >= ``similarity``."""
    return math.floor(bits * math.acos(similarity) / math.pi + 1e-9)


def distances(a: Fingerprints, b: Fingerprints) -> tuple[int, int | None]:
    """The 64-bit and the wide Hamming distance of two pages' fingerprints (the wide one
    ``None`` when either has none): what :meth:`Rule.is_near` judges."""
    dw = None if a.wide is None or b.wide is None else (a.wide ^ b.wide).bit_count()
    return (a.fp ^ b.fp).bit_count(), dw


def implied_similarity(distance: int, bits: int) -> float:
    """The cosine that a SimHash distance of ``distance`` out of ``bits`` estimates."""
    return math.cos(math.pi * distance / bits)


def _recorded_extraction(value: object) -> int:
    """A recorded extraction version: a whole number from 1 (0, the newest, is only ever asked,
    never recorded: a store that recorded it would change versions with a release)."""
    if type(value) is not int or value < 1:
        raise ValueError(f"extraction version {value!r}")
    return value


@dataclass(frozen=True)
class Rule:
    """``similarity``: the cosine above which pages are near-duplicates (``None``: the paper's
    64-bit rule). ``radius``: the 64-bit candidate radius (the paper's k when ``similarity`` is
    ``None``). ``legacy_distance``: the 64-bit distance for entries without a wide fingerprint.
    """

    similarity: float | None = 0.93
    radius: int = -1  # -1: DEFAULT_RADIUS, not asked for (radius_given False)
    wide_bits: int = WIDE_BITS
    legacy_distance: int = 3
    scope: str = "global"  # which pages are compared: global, domain, host (stores/scope.py)
    # the HTML → text extractor the fingerprints come from (text.py): two extractors' texts
    # differ, so their fingerprints are not comparable and a store holds one extractor's
    extractor: str = "trafilatura"
    # the extraction version (versions.py; 0: the extractor's newest, set when made): a store
    # keeps the version it was made with, so a newer release never compares two versions' texts
    extraction: int = 0
    # False: the radius is the default, not asked for, and a store that records a rule with a
    # verdict keeps its own radius (stores made before the default became 10 stay at 8; a Redis
    # store's tables are built for its radius). Not recorded, not compared; ``replace(rule,
    # radius=r)`` keeps it as it was (pass ``radius_given=True`` too to insist on ``r``).
    radius_given: bool = field(default=True, compare=False, repr=False)
    # Aliases (issue 43, item 3): a page dropped for a kept page stays in the index as an
    # alias of it, judged on its own fingerprints, and a page near the alias is a duplicate of
    # the kept page if also within ``alias_similarity`` of it (so a chain of small changes
    # cannot drift away from the page kept). docs/quality.md, "Item 3's format change".
    aliases: bool = False
    alias_similarity: float = 0.88
    # Whether ``aliases`` was asked for (``NEARDUP_ALIASES`` set) or is the default for new
    # stores: an existing store keeps what it has unless asked (stores.scope.settle_rule).
    aliases_given: bool = field(default=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.radius == -1:
            object.__setattr__(self, "radius", DEFAULT_RADIUS)
            object.__setattr__(self, "radius_given", False)
        if self.extractor not in ("trafilatura", "trafilatura-fast", "resiliparse"):
            raise ValueError(
                f"extractor must be trafilatura or resiliparse, not {self.extractor!r}"
            )
        object.__setattr__(self, "extraction", settled_extraction(self.extractor, self.extraction))
        if self.scope not in ("global", "domain", "host"):
            raise ValueError(f"scope must be global, domain or host, not {self.scope!r}")
        if self.similarity is not None and not (
            isinstance(self.similarity, (int, float)) and 0.0 < self.similarity <= 1.0
        ):
            raise ValueError(f"similarity must be in (0, 1] or None, not {self.similarity!r}")
        if not 0 <= self.radius <= 16:
            raise ValueError(f"radius must be between 0 and 16, not {self.radius!r}")
        if self.wide_bits != WIDE_BITS:
            raise ValueError(f"wide fingerprints have {WIDE_BITS} bits, not {self.wide_bits!r}")
        if not 0.0 < self.alias_similarity <= 1.0:
            raise ValueError(f"alias_similarity must be in (0, 1], not {self.alias_similarity!r}")
        if self.aliases and self.similarity is None:
            raise ValueError("aliases need a verdict (a similarity): the paper's rule has none")
        if not 0 <= self.legacy_distance <= 16:
            raise ValueError(
                f"legacy_distance must be between 0 and 16, not {self.legacy_distance}"
            )

    @classmethod
    def paper(cls, k: int = 3) -> Rule:
        """Manku et al.'s rule: 64-bit SimHash within ``k`` bits, no verification."""
        return cls(similarity=None, radius=k)

    @classmethod
    def from_dict(cls, raw: object) -> Rule:
        """The rule a store recorded (:meth:`as_dict`); :class:`ValueError` for a damaged one.
        A store that records no extraction version predates versions: its texts are version 1.
        """
        if not isinstance(raw, dict):
            raise ValueError(f"a rule is a mapping, not {type(raw).__name__}")
        try:
            similarity = raw.get("similarity")
            return cls(
                similarity=None if similarity is None else float(similarity),
                radius=int(raw["radius"]),
                wide_bits=int(raw.get("wide_bits", WIDE_BITS)),
                legacy_distance=int(raw.get("legacy_distance", 3)),
                scope=str(raw.get("scope", "global")),
                extractor=str(raw.get("extractor", "trafilatura")),
                extraction=_recorded_extraction(raw.get("extraction", 1)),
                aliases=raw.get("aliases", False) is True,
                alias_similarity=float(raw.get("alias_similarity", 0.88)),
            )
        except (KeyError, TypeError, OverflowError) as e:
            raise ValueError(f"{type(e).__name__}: {e}") from None

    @property
    def verifies(self) -> bool:
        return self.similarity is not None

    @property
    def wide_threshold(self) -> int | None:
        if self.similarity is None:
            return None
        return wide_threshold(self.similarity, self.wide_bits)

    @property
    def alias_threshold(self) -> int | None:
        """The wide distance to the kept page that a match through one of its aliases must
        not exceed (``None``: no aliases)."""
        if not self.aliases:
            return None
        return wide_threshold(self.alias_similarity, self.wide_bits)

    def is_near(self, distance: int, wide_distance: int | None) -> bool:
        """The verdict for a pair at 64-bit ``distance`` and wide ``wide_distance`` (``None``
        when either side has no wide fingerprint)."""
        if distance > self.radius:
            return False
        threshold = self.wide_threshold
        if threshold is None:
            return True
        if wide_distance is None:
            return distance <= min(self.radius, self.legacy_distance)
        return wide_distance <= threshold

    def describe(self) -> str:
        within = "" if self.scope == "global" else f", within one {self.scope}"
        if self.extractor != "trafilatura":
            within += f", text by {self.extractor}"
        if self.extraction != latest_extraction(self.extractor):
            within += f", extraction version {self.extraction}"
        if self.similarity is None:
            return f"64-bit distance <= {self.radius} (the paper's rule){within}"
        return (
            f"cosine >= {self.similarity:g}: {self.wide_bits}-bit distance <= "
            f"{self.wide_threshold} among 64-bit candidates within {self.radius}{within}"
            + (
                f"; dropped pages stay as aliases (within cosine {self.alias_similarity:g} of "
                "the page kept)"
                if self.aliases
                else ""
            )
        )

    def as_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "similarity": self.similarity,
            "radius": self.radius,
            "wide_bits": self.wide_bits,
            "legacy_distance": self.legacy_distance,
        }
        if self.scope != "global":  # (what earlier releases wrote for the one scope they had)
            d["scope"] = self.scope
        if self.extractor != "trafilatura":  # (likewise: the one extractor they had)
            d["extractor"] = self.extractor
        if self.extraction != 1:  # (likewise: version 1 is what stores without one hold)
            d["extraction"] = self.extraction
        if self.aliases:  # (stores without aliases record nothing: what earlier releases read)
            d["aliases"] = True
            d["alias_similarity"] = self.alias_similarity
        return d


PAPER_RULE = Rule.paper(3)
