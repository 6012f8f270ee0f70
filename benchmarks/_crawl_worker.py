"""One benchmark crawl (run by crawl.py in its own process): prints a JSON line of figures."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
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
        self.with_html = with_html
        self.pages = 0

    def parse(self, response: Any) -> Any:
        if response.url.endswith("index.html"):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)
            return
        self.pages += 1
        if self.with_html:
            yield {"url": response.url, "html": response.text}
        else:
            yield {"url": response.url}


def main() -> None:
    mode, index, store = sys.argv[1], sys.argv[2], sys.argv[3]
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
    elif mode in ("page", "items", "mark"):  # the add-on, both verdicts set to the mode
        settings["ADDONS"] = {"nearduppipe.Addon": 0}
        settings["NEARDUP_STORE"] = store
        settings["NEARDUP_RESET"] = True
        settings["NEARDUP_ON_DUPLICATE"] = mode
        settings["NEARDUP_ON_UNCHANGED"] = mode
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BenchSpider)
    times: dict[str, float] = {}

    def opened() -> None:
        times["open"] = time.perf_counter()

    def closed() -> None:
        times["close"] = time.perf_counter()

    # Scrapy holds signal receivers weakly: keep these named functions alive until the end.
    crawler.signals.connect(opened, scrapy.signals.spider_opened)
    crawler.signals.connect(closed, scrapy.signals.spider_closed)
    process.crawl(crawler, index=index, with_html=(mode in ("extract", "page", "items", "mark")))
    process.start()
    assert crawler.stats is not None
    stats = crawler.stats.get_stats()
    responses = stats.get("downloader/response_count", 0) - 1  # minus the index page
    elapsed = times["close"] - times["open"]
    print(
        json.dumps(
            {
                "mode": mode,
                "responses": responses,
                "reached_spider": crawler.spider.pages,  # type: ignore[union-attr]
                "seconds": elapsed,
                "pages_per_s": responses / elapsed,
                "dropped": stats.get("neardup/dropped", 0),
                "items": stats.get("item_scraped_count", 0),
            }
        )
    )


if __name__ == "__main__":
    main()
