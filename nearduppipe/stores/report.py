"""What a report says, independent of how it is shown.

A store's report has two views that answer different questions:

* **Counts are events, summed over every crawl that wrote the store**, so they equal the sums of
  the crawls' ``neardup/`` stats: ``unique`` is the entries stored (one per key), ``dropped``
  every near-duplicate decision ever recorded (a page dropped in three crawls counts three
  times, as the stats did), ``revisits_*`` the store's revisit counters, and ``pages_seen`` all
  of these together: every check the store answered and counted (a crawl job's own re-fetches,
  ``neardup/again``, write and count nothing). The distance histogram and the per-domain drops
  count the decisions the store still holds.
* **Clusters are pages**: an original with the keys dropped as its near-duplicates, each key
  once (its latest decision) with the number of times it was dropped. A key stored now is an
  original, not a member, whatever earlier decisions said about it; a decision of a key against
  itself (format-1 stores) is never shown. A store only keeps originals, so clusters are stars.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .base import Store, Tally

__all__ = ["Cluster", "DomainStats", "Duplicate", "Report", "host_of", "report_from_store"]

SCHEMA = "nearduppipe.report/1"


def host_of(key: str) -> str:
    """The host of a URL key; keys that are not URLs count under "(no host)"."""
    host = urlsplit(key).hostname if "://" in key else None
    return host or "(no host)"


@dataclass(frozen=True)
class Duplicate:
    """A key dropped as a near-duplicate: the distance of its latest decision, and how many
    decisions dropped it (one per crawl that dropped it, in a store)."""

    key: str
    distance: int
    drops: int = 1


@dataclass(frozen=True)
class Cluster:
    original: str
    duplicates: tuple[Duplicate, ...]

    @property
    def size(self) -> int:
        """Pages (keys) in the cluster: the original and each near-duplicate key once."""
        return 1 + len(self.duplicates)

    @property
    def drops(self) -> int:
        """Decisions that dropped the cluster's near-duplicates (a key dropped by three crawls
        counts three times)."""
        return sum(x.drops for x in self.duplicates)


@dataclass(frozen=True)
class DomainStats:
    host: str
    seen: int  # unique pages of the host plus its drops: the pages it had judged
    dropped: int

    @property
    def judged(self) -> int:
        """The base of :attr:`rate`, as in the summary (:attr:`Report.judged`)."""
        return self.seen

    @property
    def rate(self) -> float:
        return self.dropped / self.seen if self.seen else 0.0


@dataclass(frozen=True)
class KeepChoice:
    """Which record of each group a batch kept (``dedup --keep``): the report names the rule,
    so a reader can tell a kept copy chosen by it from one kept for coming first."""

    rule: str
    groups: int  # groups of near-duplicates (each keeps one record)
    other_than_first: int  # groups whose kept record the rule chose over their first

    def as_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "groups": self.groups, "other_than_first": self.other_than_first}


@dataclass(frozen=True)
class Report:
    """Counts are events summed over crawls; clusters are pages (see the module doc)."""

    source: str
    unique: int
    dropped: int
    distances: dict[int, int]
    domains: tuple[DomainStats, ...]
    clusters: tuple[Cluster, ...]
    texts: dict[str, str] = field(default_factory=dict)  # key -> kept text sample
    revisits_unchanged: int = 0
    revisits_changed: int = 0
    decisions_trimmed: int = 0  # oldest decisions the store no longer holds (max_decisions)
    again: int = 0  # checks of a key by the crawl job that stored it (let through)
    # a store's counts split by who checked: the middleware's pages and the pipeline's items
    # (None for a batch, which has no such split)
    pages: Tally | None = None
    items: Tally | None = None
    keep: KeepChoice | None = None  # a batch's keep rule (None for a store)

    @property
    def seen(self) -> int:
        """Every check counted: stored, dropped, revisits of stored keys, and a job's own
        re-fetches."""
        return (
            self.unique
            + self.dropped
            + self.revisits_unchanged
            + self.revisits_changed
            + self.again
        )

    @property
    def judged(self) -> int:
        """Pages judged against other keys' pages: stored as new, or dropped. The one base of
        every duplicate rate (summary, domains, ``info``, the crawl's progress line): revisits
        of a page's own key are not candidates for being a near-duplicate of another."""
        return self.unique + self.dropped

    @property
    def rate(self) -> float:
        """``dropped / judged``: the share of judged pages dropped as near-duplicates."""
        return self.dropped / self.judged if self.judged else 0.0

    def to_dict(self, max_clusters: int | None = None) -> dict[str, object]:
        """The JSON schema (``nearduppipe.report/1``); see docs/reports.md."""
        clusters = self.clusters if max_clusters is None else self.clusters[:max_clusters]
        return {
            "schema": SCHEMA,
            "source": self.source,
            "summary": {
                "pages_seen": self.seen,
                "unique": self.unique,
                "dropped": self.dropped,
                "judged": self.judged,
                "duplicate_rate": round(self.rate, 6),
                "revisits_unchanged": self.revisits_unchanged,
                "revisits_changed": self.revisits_changed,
                "again": self.again,
                "decisions_trimmed": self.decisions_trimmed,
                **(
                    {"pages": self.pages.as_dict(), "items": self.items.as_dict()}
                    if self.pages is not None and self.items is not None
                    else {}
                ),
                **({"keep": self.keep.as_dict()} if self.keep is not None else {}),
            },
            "distance_histogram": {str(d): n for d, n in sorted(self.distances.items())},
            "domains": [
                {
                    "host": d.host,
                    "pages_seen": d.seen,
                    "dropped": d.dropped,
                    "judged": d.judged,
                    "duplicate_rate": round(d.rate, 6),
                }
                for d in self.domains
            ],
            "clusters": [
                {
                    "original": c.original,
                    "size": c.size,
                    "drops": c.drops,
                    "duplicates": [
                        {"key": x.key, "distance": x.distance, "drops": x.drops}
                        for x in c.duplicates
                    ],
                }
                for c in clusters
            ],
        }


def _assemble(
    source: str,
    unique_by_host: Counter[str],
    dropped_by_host: Counter[str],
    distances: Counter[int],
    members: dict[str, list[Duplicate]],
    texts: dict[str, str] | None,
) -> Report:
    seen_by_host = unique_by_host + dropped_by_host
    domains = sorted(
        (DomainStats(h, n, dropped_by_host[h]) for h, n in seen_by_host.items()),
        key=lambda s: (-s.dropped, -s.seen, s.host),
    )
    clusters = sorted(
        (
            Cluster(o, tuple(sorted(ds, key=lambda x: (x.distance, x.key))))
            for o, ds in members.items()
        ),
        key=lambda c: (-c.size, c.original),
    )
    return Report(
        source,
        sum(unique_by_host.values()),
        sum(dropped_by_host.values()),
        dict(distances),
        tuple(domains),
        tuple(clusters),
        texts or {},
    )


def build_report(
    source: str,
    unique_by_host: Counter[str],
    decisions: list[tuple[str, str, int]],
    texts: dict[str, str] | None = None,
) -> Report:
    """From the number of kept pages per host and the ``(dropped key, original key, distance)``
    decisions of one batch, each a record of its own (counts, not key lists: a batch of
    millions of records need not hold its keys)."""
    dropped_by_host: Counter[str] = Counter()
    distances: Counter[int] = Counter()
    members: dict[str, list[Duplicate]] = defaultdict(list)
    for key, original, d in decisions:
        dropped_by_host[host_of(key)] += 1
        distances[d] += 1
        members[original].append(Duplicate(key, d))
    return _assemble(source, unique_by_host, dropped_by_host, distances, members, texts)


def report_from_store(store: Store) -> Report:
    """The report of a store; texts come from the samples a crawl kept (NEARDUP_KEEP_TEXT)."""
    hosts: Counter[str] = Counter()
    stored: set[str] = set()
    texts: dict[str, str] = {}
    for e in store.entries():
        hosts[host_of(e.key)] += 1
        stored.add(e.key)
        if e.text is not None:
            texts[e.key] = e.text
    dropped_by_host: Counter[str] = Counter()
    distances: Counter[int] = Counter()
    latest: dict[str, tuple[str, int]] = {}  # dropped key -> (original, distance), latest wins
    drops: Counter[str] = Counter()
    for d in store.decisions():  # oldest first
        dropped_by_host[host_of(d.key)] += 1
        distances[d.distance] += 1
        if d.key in stored or d.key == d.matched_key:
            continue
        latest[d.key] = (d.matched_key, d.distance)
        drops[d.key] += 1
        if d.text is not None:
            texts[d.key] = d.text
    members: dict[str, list[Duplicate]] = defaultdict(list)
    for key, (original, distance) in latest.items():
        members[original].append(Duplicate(key, distance, drops[key]))
    report = _assemble(store.uri, hosts, dropped_by_host, distances, members, texts)
    info = store.info()
    return dataclasses.replace(
        report,
        # entries ever stored and decisions ever recorded: forgotten keys and trimmed
        # decisions too (a store without the counters: what it holds)
        unique=info.unique,
        dropped=info.dropped,
        revisits_unchanged=info.revisits_unchanged,
        revisits_changed=info.revisits_changed,
        decisions_trimmed=info.decisions_trimmed,
        again=info.again,
        pages=info.pages,
        items=info.items,
    )
