"""What a report says, independent of how it is shown.

Counts come from the store's records: every stored entry is a page kept (unique, one per key),
every decision a page dropped as a near-duplicate of another key. A key dropped in several
crawls counts once (its latest decision), and a key that is stored now counts as kept, never as
dropped too. Revisits (a key seen again by a later crawl) are counted apart, from the store's
counters. A cluster is an original page with the pages dropped as its near-duplicates (a store
only keeps originals, so clusters are stars).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..stores.base import Store

__all__ = ["Cluster", "DomainStats", "Duplicate", "Report", "host_of", "report_from_store"]

SCHEMA = "nearduppipe.report/1"


def host_of(key: str) -> str:
    """The host of a URL key; keys that are not URLs count under "(no host)"."""
    host = urlsplit(key).hostname if "://" in key else None
    return host or "(no host)"


@dataclass(frozen=True)
class Duplicate:
    key: str
    distance: int


@dataclass(frozen=True)
class Cluster:
    original: str
    duplicates: tuple[Duplicate, ...]

    @property
    def size(self) -> int:
        return 1 + len(self.duplicates)


@dataclass(frozen=True)
class DomainStats:
    host: str
    seen: int
    dropped: int

    @property
    def rate(self) -> float:
        return self.dropped / self.seen if self.seen else 0.0


@dataclass(frozen=True)
class Report:
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

    @property
    def seen(self) -> int:
        return self.unique + self.dropped

    @property
    def rate(self) -> float:
        return self.dropped / self.seen if self.seen else 0.0

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
                "duplicate_rate": round(self.rate, 6),
                "revisits_unchanged": self.revisits_unchanged,
                "revisits_changed": self.revisits_changed,
                "decisions_trimmed": self.decisions_trimmed,
            },
            "distance_histogram": {str(d): n for d, n in sorted(self.distances.items())},
            "domains": [
                {
                    "host": d.host,
                    "pages_seen": d.seen,
                    "dropped": d.dropped,
                    "duplicate_rate": round(d.rate, 6),
                }
                for d in self.domains
            ],
            "clusters": [
                {
                    "original": c.original,
                    "size": c.size,
                    "duplicates": [{"key": x.key, "distance": x.distance} for x in c.duplicates],
                }
                for c in clusters
            ],
        }


def build_report(
    source: str,
    unique_by_host: Counter[str],
    decisions: list[tuple[str, str, int]],
    texts: dict[str, str] | None = None,
) -> Report:
    """From the number of kept pages per host and the ``(dropped key, original key, distance)``
    decisions (counts, not key lists: a batch of millions of records need not hold its keys)."""
    seen_by_host: Counter[str] = Counter(unique_by_host)
    dropped_by_host: Counter[str] = Counter()
    distances: Counter[int] = Counter()
    members: dict[str, list[Duplicate]] = defaultdict(list)
    for key, original, d in decisions:
        host = host_of(key)
        seen_by_host[host] += 1
        dropped_by_host[host] += 1
        distances[d] += 1
        members[original].append(Duplicate(key, d))
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
        len(decisions),
        dict(distances),
        tuple(domains),
        tuple(clusters),
        texts or {},
    )


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
    latest: dict[str, tuple[str, str, int]] = {}
    for d in store.decisions():
        if d.key in stored or d.key == d.matched_key:
            continue
        latest.pop(d.key, None)  # the latest decision of a key, in decision order
        latest[d.key] = (d.key, d.matched_key, d.distance)
        if d.text is not None:
            texts[d.key] = d.text
    counters = store.counters()
    return dataclasses.replace(
        build_report(store.uri, hosts, list(latest.values()), texts),
        revisits_unchanged=counters.get("revisits_unchanged", 0),
        revisits_changed=counters.get("revisits_changed", 0),
        decisions_trimmed=counters.get("decisions_trimmed", 0),
    )
