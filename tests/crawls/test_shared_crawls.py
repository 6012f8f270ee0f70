"""Several real ``scrapy crawl`` processes at once on one Redis or Redis Cluster store, each
fetching the whole site (docs/verdicts.md): every page is exported exactly once between them.

Before the crawl's lease and the ``claimed`` verdict, the second crawler's check of a page the
first had stored was an ``unchanged`` revisit that gave the entry to the second crawl's job,
so the first crawler's own item check came back ``unchanged`` too: on a 120-article site two
crawlers exported 17-18 articles by neither process.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ..crawls.test_redis_crawl import finish, start_crawl
from ..support.crawl_settings import ON_THREADS
from ..support.redis_cluster import LocalCluster
from ..support.redis_server import RedisServer
from ..support.server import serve_directory

ADDON = {"ADDONS": {"nearduppipe.Addon": 0}}
ARTICLES = 60  # distinct articles; each of the first COPIES also has an exact copy elsewhere
COPIES = 20
WORDS = (
    "harbour river council budget school library market station bridge festival museum "
    "garden railway hospital theatre election weather forecast storm harvest ferry tunnel "
    "orchard canal quarry village summit glacier meadow lantern"
).split()


def _page(title: str, text: str, nav: str) -> str:
    return (
        f"<html><head><title>{title}</title></head><body><nav>{nav}</nav>"
        f"<article><h1>{title}</h1><p>{text}</p></article></body></html>"
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[list[str]]]]:
    """A site of ARTICLES articles, COPIES of them also at a mirror URL with other navigation
    (so detection decides those): yields the base URL and the groups of paths."""
    root = tmp_path_factory.mktemp("shared-site")
    rng = random.Random(41)
    groups: list[list[str]] = []
    for i in range(ARTICLES):
        text = " ".join(f"{rng.choice(WORDS)}{rng.randrange(5000)}" for _ in range(160))
        paths = [f"news/{i}.html"] + ([f"mirror/{i}.html"] if i < COPIES else [])
        for n, path in enumerate(paths):
            (root / path).parent.mkdir(exist_ok=True)
            nav = "Home News Sport" if n == 0 else "Mirror Archive Partners"
            (root / path).write_text(_page(f"Article {i}", text, nav), encoding="utf-8")
        groups.append(paths)
    with serve_directory(root) as base:
        yield base, groups


SETUPS: dict[str, dict[str, Any]] = {
    "addon": ADDON,
    "pipeline": {"ITEM_PIPELINES": {"nearduppipe.pipelines.NearDupPipeline": 300}},
    "middlewares": {
        "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
        "SPIDER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupSpiderMiddleware": 543},
    },
}


def crawl_together(
    tmp: Path,
    base: str,
    groups: list[list[str]],
    store: str,
    n: int,
    seed: int,
    stagger: float,
    setup: str = "addon",
) -> list[dict[str, Any]]:
    """``n`` crawler processes on ``store``, each fetching every page in its own order,
    started ``stagger`` seconds apart, with the components of ``setup``; their results."""
    urls = [base + p for g in groups for p in g]
    settings = {
        **SETUPS[setup],
        "NEARDUP_STORE": store,
        "NEARDUP_RESET": False,
        "CONCURRENT_REQUESTS": 2,
        "DOWNLOAD_DELAY": 0.05,  # (about 4 s each: the crawls overlap, whatever start-up takes)
        "LOG_LEVEL": "INFO",
        **ON_THREADS,
    }
    started, go = [], tmp / f"go-{seed}"
    ready = [tmp / f"ready-{seed}-{k}" for k in range(n)]
    for k in range(n):
        order = urls[:]
        random.Random(seed * 100 + k).shuffle(order)
        # started together (not staggered): each waits for the others' start-up, which under
        # load took longer than a whole crawl (no overlap, no claimed page to check)
        gate = None if stagger else [str(ready[k]), str(go)]
        started.append(start_crawl(tmp, f"crawl-{seed}-{k}", order, settings, gate=gate))
        time.sleep(stagger)
    if not stagger:
        deadline = time.monotonic() + 120
        while not all(r.exists() for r in ready) and time.monotonic() < deadline:
            if any(proc.poll() is not None for proc, _ in started):
                break  # (one ended before its start: the others need not wait the 120 s)
            time.sleep(0.05)
        go.touch()
    return [finish(*p) for p in started]


def exported_per_group(
    results: list[dict[str, Any]], base: str, groups: list[list[str]]
) -> list[int]:
    kept = [i["url"].removeprefix(base) for r in results for i in r["items"]]
    return [sum(kept.count(p) for p in g) for g in groups]


def miscounted(results: list[dict[str, Any]], base: str, groups: list[list[str]]) -> str:
    """For an assertion's message: each group not exported once, and what each crawler did
    with its pages (its items, its log lines naming them, its neardup stats)."""
    counts = exported_per_group(results, base, groups)
    lines = []
    for group, count in zip(groups, counts, strict=True):
        if count == 1:
            continue
        lines.append(f"group {group}: exported {count} times")
        urls = [base + p for p in group]
        for k, r in enumerate(results):
            items = [i["url"] for i in r["items"] if i["url"] in urls]
            said = [line for line in r["log"].splitlines() if any(u in line for u in urls)]
            lines.append(f"  crawler {k}: items {items}; log: {said[:12]}")
    for k, r in enumerate(results):
        stats = {n: v for n, v in r["stats"].items() if n.startswith("neardup/")}
        lines.append(f"  crawler {k} stats: {stats}")
    return "\n".join(lines)


def flush_prefix(url: str, pattern: str) -> None:
    client = redis.Redis.from_url(url)
    for key in client.scan_iter(match=pattern):
        client.delete(key)
    client.close()


def _check_rounds(
    tmp: Path,
    site: tuple[str, list[list[str]]],
    store: str,
    n: int,
    clear: Any,
    setup: str = "addon",
    rounds: int = 3,
) -> None:
    base, groups = site
    claimed = 0
    for rnd in range(rounds):
        clear()
        results = crawl_together(tmp / f"round{rnd}", base, groups, store, n, rnd, 0.0, setup)
        counts = exported_per_group(results, base, groups)
        lost = [g for g, c in zip(groups, counts, strict=True) if c == 0]
        twice = [g for g, c in zip(groups, counts, strict=True) if c > 1]
        assert not lost and not twice, (rnd, miscounted(results, base, groups))
        for r in results:
            assert "log_count/ERROR" not in r["stats"], r["log"][-3000:]
        claimed += sum(
            r["stats"].get(name, 0)
            for r in results
            for name in ("neardup/claimed", "neardup/items/claimed")
        )
    assert claimed > 0  # the crawls did overlap on the same keys


def _mkdirs(tmp: Path) -> None:
    for rnd in range(3):
        (tmp / f"round{rnd}").mkdir(exist_ok=True)


@pytest.mark.parametrize("n", [2, pytest.param(4, marks=pytest.mark.fault)])
def test_crawlers_together_on_redis_export_each_page_once(
    site: tuple[str, list[list[str]]], tmp_path: Path, redis_server: RedisServer, n: int
) -> None:
    _on_redis(tmp_path, site, redis_server, n)


@pytest.mark.parametrize("setup", ["pipeline", "middlewares"])
def test_two_crawlers_with_only_the_pipeline_or_the_middlewares_export_each_page_once(
    site: tuple[str, list[list[str]]], tmp_path: Path, redis_server: RedisServer, setup: str
) -> None:
    """The same without the add-on: only the item pipeline (items judged alone), or only the
    middlewares (pages judged, their items not)."""
    _on_redis(tmp_path, site, redis_server, 2, setup, rounds=2)


def _on_redis(
    tmp: Path,
    site: tuple[str, list[list[str]]],
    server: RedisServer,
    n: int,
    setup: str = "addon",
    rounds: int = 3,
) -> None:
    """:func:`_check_rounds` on one Redis server, the spider's store emptied each round."""
    _mkdirs(tmp)
    clear = lambda: flush_prefix(server.url, "{neardup:probe}:*")  # noqa: E731
    _check_rounds(tmp, site, server.url, n, clear, setup, rounds)


@pytest.mark.fault  # (a three-master cluster and several crawlers: slow, run once in CI; two
# crawlers on one cluster add nothing four do not: 52 s of CI's critical path, dropped)
@pytest.mark.parametrize("n", [4])
def test_crawlers_together_on_redis_cluster_export_each_page_once(
    site: tuple[str, list[list[str]]], tmp_path_factory: pytest.TempPathFactory, n: int
) -> None:
    cluster = LocalCluster(tmp_path_factory.mktemp("shared-cluster")).start()
    tmp = tmp_path_factory.mktemp("crawls")
    _mkdirs(tmp)
    base, groups = site
    try:
        claimed = 0
        for rnd in range(3):  # a store of its own each round
            store = f"{cluster.url}?prefix=shared{n}r{rnd}"
            results = crawl_together(tmp / f"round{rnd}", base, groups, store, n, rnd, 0.0)
            counts = exported_per_group(results, base, groups)
            assert counts == [1] * len(groups), (rnd, miscounted(results, base, groups))
            claimed += sum(r["stats"].get("neardup/claimed", 0) for r in results)
        assert claimed > 0  # the crawls did overlap on the same keys
    finally:
        cluster.stop()


def test_a_crawler_started_half_way_and_a_recrawl_by_two(
    site: tuple[str, list[list[str]]], tmp_path: Path, redis_server: RedisServer
) -> None:
    base, groups = site
    flush_prefix(redis_server.url, "{neardup:probe}:*")
    # the second crawler starts while the first is about half done
    first = crawl_together(tmp_path, base, groups, redis_server.url, 1, 7, 0.0)
    assert exported_per_group(first, base, groups) == [1] * len(groups)
    flush_prefix(redis_server.url, "{neardup:probe}:*")
    (tmp_path / "half").mkdir()
    slow = {"DOWNLOAD_DELAY": 0.05, "CONCURRENT_REQUESTS": 1}
    urls = [base + p for g in groups for p in g]
    settings = {
        **ADDON,
        "NEARDUP_STORE": redis_server.url,
        "NEARDUP_RESET": False,
        **slow,
        **ON_THREADS,
    }
    a = start_crawl(tmp_path / "half", "a", urls, settings)
    deadline = time.monotonic() + 60
    client = redis.Redis.from_url(redis_server.url)
    while int(client.hget("{neardup:probe}:meta", "live") or 0) < ARTICLES // 2:
        assert time.monotonic() < deadline and a[0].poll() is None
        time.sleep(0.05)
    b = start_crawl(tmp_path / "half", "b", list(reversed(urls)), settings)
    results = [finish(*a), finish(*b)]
    assert exported_per_group(results, base, groups) == [1] * len(groups)
    # a recrawl of an unchanged site by two crawlers at once exports nothing
    (tmp_path / "again").mkdir()
    again = crawl_together(tmp_path / "again", base, groups, redis_server.url, 2, 8, 0.0)
    assert exported_per_group(again, base, groups) == [0] * len(groups)
    unchanged = sum(r["stats"].get("neardup/revisit/unchanged", 0) for r in again)
    assert unchanged >= ARTICLES  # each article once by one of them; the other's claimed
    client.close()


def test_crawlers_sharing_scrapy_redis_scheduler_export_each_page_once(
    site: tuple[str, list[list[str]]], tmp_path: Path, redis_server: RedisServer
) -> None:
    """Three crawlers sharing scrapy-redis' scheduler and dupefilter (one request queue) and
    one nearduppipe store on the same Redis: every group exported exactly once."""
    pytest.importorskip("scrapy_redis")
    base, groups = site
    flush_prefix(redis_server.url, "{neardup:probe}:*")
    flush_prefix(redis_server.url, "probe:*")  # scrapy-redis' keys for spider "probe"
    shared = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "REDIS_URL": redis_server.url,
        "SCHEDULER_IDLE_BEFORE_CLOSE": 1,
    }
    results = []
    for rnd in range(3):
        flush_prefix(redis_server.url, "{neardup:probe}:*")
        flush_prefix(redis_server.url, "probe:*")
        (tmp_path / f"r{rnd}").mkdir()
        urls = [base + p for g in groups for p in g]
        settings = {
            **ADDON,
            "NEARDUP_STORE": redis_server.url,
            "NEARDUP_RESET": False,
            **shared,
            **ON_THREADS,
        }
        started = []
        for k in range(3):
            order = urls[:]
            random.Random(rnd * 10 + k).shuffle(order)
            started.append(
                start_crawl(
                    tmp_path / f"r{rnd}", f"sr{k}", order, settings, third_party_deprecations=True
                )
            )
        results = [finish(*p) for p in started]
        counts = exported_per_group(results, base, groups)
        assert counts == [1] * len(groups), (rnd, miscounted(results, base, groups))
