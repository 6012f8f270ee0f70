"""What a store counts: every verdict per source (the downloader middleware's pages, the item
pipeline's items) over the store's life, and the :class:`StoreInfo` that ``info``, ``scrapy
neardup`` and the reports print. The counts equal the sums of the crawls' ``neardup/`` stats
(docs/reports.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..fingerprint.rule import Rule

__all__ = [
    "COUNTERS",
    "STATUSES",
    "TOTAL_OF",
    "Source",
    "Status",
    "StoreInfo",
    "Tally",
    "counter_names",
]

Status = Literal["new", "duplicate", "unchanged", "changed", "again", "claimed"]
STATUSES: tuple[Status, ...] = ("new", "duplicate", "unchanged", "changed", "again", "claimed")
# Who asked: the downloader middleware checks pages, the item pipeline checks items. A store
# counts every verdict per source, so its totals split the way the crawl's stats do.
Source = Literal["pages", "items"]


# What every backend counts over its life (Store.counters): the report's totals, for pages and
# items together, then each verdict of the item pipeline's checks (pages are the difference).
COUNTERS = (
    "new_total",
    "revisits_unchanged",
    "revisits_changed",
    "decisions_total",
    "decisions_trimmed",
    "again",
    "claimed",
    *(f"items_{status}" for status in STATUSES),
)
# The counter that counts each verdict for pages and items together.
TOTAL_OF: dict[Status, str] = {
    "new": "new_total",
    "duplicate": "decisions_total",
    "unchanged": "revisits_unchanged",
    "changed": "revisits_changed",
    "again": "again",
    "claimed": "claimed",
}


_COUNTER_NAMES: dict[tuple[str, str], tuple[str, ...]] = {
    **{(status, "pages"): (TOTAL_OF[status],) for status in STATUSES},
    **{(status, "items"): (TOTAL_OF[status], f"items_{status}") for status in STATUSES},
}


def counter_names(status: Status, source: Source) -> tuple[str, ...]:
    """The counters one verdict increments."""
    return _COUNTER_NAMES[status, source]


@dataclass(frozen=True)
class Tally:
    """What a store answered for one source over its life: the sums of the crawls'
    ``neardup/unique``, ``dropped``, ``revisit/unchanged``, ``revisit/changed``, ``again``
    and ``claimed`` stats (``neardup/items/...`` for items)."""

    unique: int = 0
    dropped: int = 0
    unchanged: int = 0
    changed: int = 0
    again: int = 0
    claimed: int = 0  # keys another running crawl holds (docs/verdicts.md)

    @property
    def checked(self) -> int:
        """Every check answered: the sum of the crawls' ``neardup/checked`` stats."""
        return (
            self.unique + self.dropped + self.unchanged + self.changed + self.again + self.claimed
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "checked": self.checked,
            "unique": self.unique,
            "dropped": self.dropped,
            "revisits_unchanged": self.unchanged,
            "revisits_changed": self.changed,
            "again": self.again,
            "claimed": self.claimed,
        }


@dataclass(frozen=True)
class StoreInfo:
    uri: str
    entries: int
    decisions: int
    rule: Rule
    format: int
    revisits_unchanged: int = 0
    revisits_changed: int = 0
    decisions_total: int = 0
    decisions_trimmed: int = 0
    ttl: float | None = None
    max_decisions: int | None = None
    again: int = 0  # a crawl job's own re-fetches (JOBDIR resume, retry): let through, not stored
    new_total: int = 0  # entries ever stored as new (checks and imports)
    items: Tally = Tally()  # the item pipeline's share of the counts above
    claimed: int = 0  # checks of a key another running crawl job holds (docs/verdicts.md)
    aliases: int = 0  # dropped pages kept as candidates for their kept page (Rule.aliases)

    @property
    def dropped(self) -> int:
        """Every near-duplicate decision ever recorded (trimmed ones too)."""
        return self.decisions_total or self.decisions

    @property
    def unique(self) -> int:
        """Pages ever stored as new: the entries, plus those forgotten or pruned since."""
        return max(self.new_total, self.entries)

    @property
    def total(self) -> Tally:
        """Every check the store answered, pages and items together."""
        return Tally(
            self.unique,
            self.dropped,
            self.revisits_unchanged,
            self.revisits_changed,
            self.again,
            self.claimed,
        )

    @property
    def pages(self) -> Tally:
        """The downloader middleware's share: the totals less the items'."""
        t, i = self.total, self.items
        return Tally(
            t.unique - i.unique,
            t.dropped - i.dropped,
            t.unchanged - i.unchanged,
            t.changed - i.changed,
            t.again - i.again,
            t.claimed - i.claimed,
        )

    @property
    def pages_seen(self) -> int:
        """Every check the store answered, summed over every crawl: it equals the sum of the
        crawls' ``neardup/checked`` and ``neardup/items/checked`` stats."""
        return self.total.checked
