"""One benchmark crawl (run by crawl.py in its own process): prints a JSON line of figures.

    python benchmarks/_crawl_worker.py MODE INDEX_URL STORE [WARM_PAGES]

Modes: ``none`` (no nearduppipe), ``default`` (the add-on with its default settings),
``resiliparse`` (the add-on with ``NEARDUP_EXTRACTOR = "resiliparse"``); ``default-mark`` and
``resiliparse-mark`` (the same with both verdicts ``mark``: every page reaches the spider, so
the spider's work is that of ``none`` and the difference is nearduppipe's alone); any of these
with ``-thread`` (``NEARDUP_EXECUTOR = "thread"``) or ``-wN`` (``NEARDUP_WORKERS = N``); and the older
``extract`` (an item pipeline that only extracts), ``neardup`` (the downloader middleware
alone), ``page``/``items``/``mark`` (the add-on, both verdicts set to the mode).

CPU is that of the process tree (this process, its worker processes, and any child already
reaped), read with psutil over a window that starts when the ``WARM_PAGES``-th page has been
downloaded and ends when the crawl is idle: start-up (imports, worker processes loading their
dictionaries) and shut-down are outside it, so the figure is the steady per-page cost. The
crawl process's CPU over the window is also split by thread (psutil): ``main`` (the event loop:
Scrapy, the spider and nearduppipe's middlewares), ``pool`` (the process pool's threads in the
crawl process: sending pages, receiving results), ``store`` (nearduppipe's thread pool: the
store checks) and ``other``.

``CRAWL_PACKAGE_ROOT``: import nearduppipe from that checkout instead of this one (crawl.py
``--compare``: the same harness measures an older checkout).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import scrapy
from scrapy.crawler import CrawlerProcess

sys.path.insert(0, os.environ.get("CRAWL_PACKAGE_ROOT") or str(Path(__file__).resolve().parents[1]))
from nearduppipe import extract_text


class ExtractOnlyPipeline:
    """Baseline (b): what a project pays to extract every page's main text with trafilatura."""

    def process_item(self, item: dict[str, Any], spider: Any = None) -> dict[str, Any]:
        text = extract_text(item.pop("html"), item["url"])
        item["chars"] = len(text or "")
        return item


class BenchSpider(scrapy.Spider):
    name = "bench"

    def __init__(self, index: str, with_html: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [index]
        self.site = index.rsplit("/", 1)[0] + "/"
        self.with_html = with_html
        self.pages = 0

    def parse(self, response: Any) -> Any:
        if response.url.endswith("index.html"):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)
            return
        self.pages += 1
        links = response.css("a::attr(href)").getall()
        for href in links:  # a spider kept to its site follows the site's links it finds
            if href.startswith(self.site):
                yield response.follow(href, callback=self.parse)
        if self.with_html:
            yield {"url": response.url, "html": response.text}
        else:  # what a spider typically takes from an article page
            yield {
                "url": response.url,
                "title": response.css("title::text").get(),
                "links": len(links),
            }


def own_cpu() -> float:
    """User + system CPU seconds of this process alone (the crawl's event loop and threads)."""
    t = psutil.Process().cpu_times()
    return t.user + t.system


def tree_cpu() -> float:
    """User + system CPU seconds of this process, its live descendants and reaped children."""
    me = psutil.Process()
    total = 0.0
    for child in me.children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    t = me.cpu_times()
    return total + t.user + t.system + t.children_user + t.children_system


def thread_cpu() -> dict[int, tuple[str, float]]:
    """Each thread of this process: (its group, user + system CPU seconds); see the module
    docstring for the groups."""
    import threading

    groups: dict[int | None, str] = {}
    for t in threading.enumerate():
        target = getattr(t, "_target", None)
        where = getattr(target, "__module__", "") or ""
        if t is threading.main_thread():
            groups[t.native_id] = "main"
        elif where.startswith("pebble"):
            groups[t.native_id] = "pool"
        elif t.name.startswith("nearduppipe_"):
            groups[t.native_id] = "store"
    return {
        t.id: (groups.get(t.id, "other"), t.user_time + t.system_time)
        for t in psutil.Process().threads()
    }


def threads_between(
    a: dict[int, tuple[str, float]], b: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds by thread group between two :func:`thread_cpu` readings (a thread's group
    as last seen; threads that ended between them are not counted)."""
    out: dict[str, float] = {"main": 0.0, "pool": 0.0, "store": 0.0, "other": 0.0}
    for tid, (group, cpu) in b.items():
        before = a.get(tid)
        out[group] += cpu - (before[1] if before is not None else 0.0)
    return out


def settings_for(mode: str, store: str) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
        "HTTPCACHE_ENABLED": False,
    }
    if mode == "extract":
        settings["ITEM_PIPELINES"] = {ExtractOnlyPipeline: 300}
    elif mode == "neardup":
        settings["DOWNLOADER_MIDDLEWARES"] = {"nearduppipe.middlewares.NearDupMiddleware": 543}
        settings["NEARDUP_STORE"] = store
        settings["NEARDUP_RESET"] = True
    elif (base := re.sub(r"-(thread|w\d+)", "", mode)).removesuffix("-mark") in (
        "default", "resiliparse", "page", "items", "mark"
    ):  # fmt: skip
        settings["ADDONS"] = {"nearduppipe.Addon": 0}
        if "-thread" in mode:  # pages checked on the crawl's threads, not worker processes
            settings["NEARDUP_EXECUTOR"] = "thread"
        if m := re.search(r"-w(\d+)", mode):  # this many worker processes
            settings["NEARDUP_WORKERS"] = int(m.group(1))
        settings["NEARDUP_STORE"] = store  # the default store kind (sqlite), fresh
        settings["NEARDUP_RESET"] = True
        if mode.startswith("resiliparse"):
            settings["NEARDUP_EXTRACTOR"] = "resiliparse"
        if base.endswith("-mark"):  # every page reaches the spider: the same spider work
            settings["NEARDUP_ON_DUPLICATE"] = "mark"
            settings["NEARDUP_ON_UNCHANGED"] = "mark"
        elif base not in ("default", "resiliparse"):  # both verdicts set to the mode
            settings["NEARDUP_ON_DUPLICATE"] = base
            settings["NEARDUP_ON_UNCHANGED"] = base
    elif mode != "none":
        raise SystemExit(f"unknown mode {mode!r}")
    return settings


_store_cpu = [0.0, 0]  # CPU seconds of the store checks, and their number


def time_store_checks() -> None:
    """Count the CPU of each store check (``Deduplicator.decide``, on nearduppipe's threads),
    one of the stages the crawl's added CPU is split into."""
    from nearduppipe.stores.decide import Deduplicator

    decide = Deduplicator.decide

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.thread_time()
        try:
            return decide(self, *args, **kwargs)
        finally:
            _store_cpu[0] += time.thread_time() - t
            _store_cpu[1] += 1

    Deduplicator.decide = timed  # type: ignore[method-assign]


def main() -> None:
    mode, index, store = sys.argv[1], sys.argv[2], sys.argv[3]
    warm = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    time_store_checks()
    process = CrawlerProcess(settings_for(mode, store))
    crawler = process.create_crawler(BenchSpider)
    marks: dict[str, float] = {}
    downloaded = [0]
    threads: list[dict[int, tuple[str, float]]] = [{}, {}]

    def opened() -> None:
        marks["open"] = time.perf_counter()

    def on_download(*args: Any, **kwargs: Any) -> None:
        downloaded[0] += 1
        if downloaded[0] == warm + 1:  # the index page, then ``warm`` pages
            marks["t1"], marks["cpu1"], marks["own1"] = time.perf_counter(), tree_cpu(), own_cpu()
            threads[0] = thread_cpu()

    def idle() -> None:  # the last idle before the close is the end of the window
        marks["t2"], marks["cpu2"], marks["own2"], marks["pages2"] = (
            time.perf_counter(),
            tree_cpu(),
            own_cpu(),
            downloaded[0],
        )
        threads[1] = thread_cpu()

    def closed() -> None:
        marks["close"] = time.perf_counter()

    # Scrapy holds signal receivers weakly: keep these named functions alive until the end.
    crawler.signals.connect(opened, scrapy.signals.spider_opened)
    crawler.signals.connect(on_download, scrapy.signals.response_downloaded)
    crawler.signals.connect(idle, scrapy.signals.spider_idle)
    crawler.signals.connect(closed, scrapy.signals.spider_closed)
    process.crawl(crawler, index=index, with_html=(mode in ("extract", "page", "items", "mark")))
    profile = os.environ.get("CRAWL_PROFILE")  # a file: cProfile the crawl process into it
    if profile:
        import cProfile

        with cProfile.Profile() as prof:
            process.start()
        prof.dump_stats(profile)
    else:
        process.start()
    assert crawler.stats is not None
    stats = crawler.stats.get_stats()
    responses = stats.get("downloader/response_count", 0) - 1  # minus the index page
    elapsed = marks["close"] - marks["open"]
    window_pages = marks["pages2"] - 1 - warm
    window_s = marks["t2"] - marks["t1"]
    print(
        json.dumps(
            {
                "mode": mode,
                "responses": responses,
                "reached_spider": crawler.spider.pages,  # type: ignore[union-attr]
                "seconds": elapsed,
                "pages_per_s": responses / elapsed,
                "window_pages": window_pages,
                "window_pages_per_s": window_pages / window_s,
                "cpu_ms_per_page": 1000 * (marks["cpu2"] - marks["cpu1"]) / window_pages,
                "own_cpu_ms_per_page": 1000 * (marks["own2"] - marks["own1"]) / window_pages,
                "store_ms_per_check": 1000 * _store_cpu[0] / max(1, _store_cpu[1]),
                "store_ms_per_page": 1000 * _store_cpu[0] / max(1, responses),
                "thread_ms_per_page": {
                    group: 1000 * cpu / window_pages
                    for group, cpu in threads_between(threads[0], threads[1]).items()
                },
                "dropped": stats.get("neardup/dropped", 0),
                "timeouts": stats.get("neardup/skipped/timeout", 0),
                "items": stats.get("item_scraped_count", 0),
            }
        )
    )


if __name__ == "__main__":
    main()
