"""One soak crawl (run by soak.py in its own process): asks the local site for page after page
until its deadline, then lets the crawl end by itself; writes its stats and counts as JSON.

    python benchmarks/_soak_crawl.py CONFIG.json
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import AsyncCrawlerProcess, CrawlerProcess

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.reactor import NO_REACTOR, reactor_settings  # noqa: E402

WINDOW = 64  # requests open at once: a few times CONCURRENT_REQUESTS


class SoakSpider(scrapy.Spider):
    name = "soak"

    def __init__(self, base: str, seconds: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base
        self.deadline = time.monotonic() + seconds
        self.requested = 0
        self.reached = 0  # pages that reached the callback
        self.dropped = 0  # pages the middleware dropped (NearDuplicatePage in the errback)
        self.other_errors: dict[str, int] = {}

    @property
    def open_requests(self) -> int:
        done = self.reached + self.dropped + sum(self.other_errors.values())
        return self.requested - done

    async def start(self) -> Any:
        # the crawl asks for pages until the deadline, then drains and ends by itself (no
        # CLOSESPIDER_TIMEOUT); at most WINDOW requests open at once (Scrapy would otherwise
        # take start requests as fast as this loop makes them, and starve the downloads)
        n = 0
        while time.monotonic() < self.deadline:
            if self.open_requests >= WINDOW:
                await asyncio.sleep(0.02)
                continue
            self.requested += 1
            yield scrapy.Request(
                f"{self.base}p/{n}", self.parse, errback=self.on_error, dont_filter=True
            )
            n += 1

    def parse(self, response: Any) -> None:
        self.reached += 1

    def on_error(self, failure: Any) -> None:
        from nearduppipe.middlewares import NearDuplicatePage

        if failure.check(NearDuplicatePage):
            self.dropped += 1
        else:
            name = type(failure.value).__name__
            self.other_errors[name] = self.other_errors.get(name, 0) + 1


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    settings = {
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CLOSESPIDER_TIMEOUT": 0,
        "LOGSTATS_INTERVAL": 60,
        **reactor_settings(),
        **config["settings"],
    }
    process = AsyncCrawlerProcess(settings) if NO_REACTOR else CrawlerProcess(settings)
    crawler = process.create_crawler(SoakSpider)
    times: dict[str, float] = {}

    def opened() -> None:
        times["open"] = time.monotonic()

    def closed() -> None:
        times["close"] = time.monotonic()

    # Scrapy holds signal receivers weakly: keep these named functions alive until the end.
    crawler.signals.connect(opened, scrapy.signals.spider_opened)
    crawler.signals.connect(closed, scrapy.signals.spider_closed)
    process.crawl(crawler, base=config["base"], seconds=config["seconds"])
    process.start()
    assert crawler.stats is not None and crawler.spider is not None
    spider: Any = crawler.spider
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, str, float))}
    out = {
        "stats": stats,
        "requested": spider.requested,
        "reached": spider.reached,
        "dropped_errback": spider.dropped,
        "other_errors": spider.other_errors,
        "crawl_seconds": times.get("close", 0.0) - times.get("open", 0.0),
    }
    Path(config["output"]).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
