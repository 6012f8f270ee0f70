"""Run one real Scrapy crawl in this process and write what happened to a JSON file.

Usage: python -m tests.support.crawl CONFIG.json — the config names the start URLs, whether to
follow links, the settings, and where to write ``{"reached": [...], "items": [...], "stats"}``.
A crawl per subprocess because Twisted's reactor cannot be restarted within one process.
"""

from __future__ import annotations

import json
import re
import sys
import time
import types
import warnings
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import AsyncCrawlerProcess, CrawlerProcess
from scrapy.exceptions import ScrapyDeprecationWarning

from .reactor import NO_REACTOR, reactor_settings

README = Path(__file__).resolve().parents[2] / "README.md"
# The crawls fail on deprecated Scrapy API, as the in-process tests do (pyproject.toml).
warnings.filterwarnings("error", category=ScrapyDeprecationWarning)


class ProbeSpider(scrapy.Spider):
    name = "probe"

    def __init__(
        self,
        start_urls: list[str],
        follow: bool = False,
        item: str = "text",
        reached_log: str | None = None,
        gate: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.gate = gate  # [ready file, go file]: crawlers that start their requests together
        # one line per page that reached the spider, written at once: survives a SIGKILL
        self.reached_log = open(reached_log, "a", buffering=1) if reached_log else None  # noqa: SIM115
        self.start_urls = start_urls
        self.follow = follow
        self.item = item  # "text": the article's paragraphs; "html": the whole page
        self.reached: list[str] = []
        self.errbacks: list[dict[str, Any]] = []
        if item == "readme":  # the README's stop-paginating recipe, as written
            self.parse = types.MethodType(readme_recipe(), self)  # type: ignore[method-assign]

    async def start(self) -> Any:
        # like start_urls (dont_filter=True), plus an errback that sees dropped pages
        if self.gate is not None:  # (say it is ready, then wait for the others: up to 120 s)
            import asyncio

            ready, go = (Path(p) for p in self.gate)
            ready.touch()
            for _ in range(1200):
                if go.exists():
                    break
                await asyncio.sleep(0.1)
        if self.item == "readme":
            for url in self.start_urls:
                yield scrapy.Request(url, self.parse, dont_filter=True)
            return
        for url in self.start_urls:
            listing = self.item in ("listing", "stop_on_seen", "own_url")
            callback = self.listing if listing else self.parse
            yield scrapy.Request(url, callback, errback=self.on_error, dont_filter=True)

    def on_error(self, failure: Any) -> None:
        from nearduppipe.middlewares import NearDuplicatePage

        if failure.check(NearDuplicatePage):
            e = failure.value
            self.errbacks.append({"url": e.url, "match": e.match.key, "d": e.match.distance})

    def parse(self, response: Any) -> Any:
        self.reached.append(response.url)
        if self.reached_log is not None:
            self.reached_log.write(f"{time.time():.3f} {response.url}\n")
        paragraphs = response.css("article p:not(.meta)::text, div.body p::text").getall()
        if self.item == "none":  # pages only (the output stays small)
            pass
        elif paragraphs and self.item == "html":
            yield {"url": response.url, "html": response.text}
        elif paragraphs and self.item == "text_status":
            # the first half of the article (not near the page's main text), and the
            # response's own verdict
            status = response.meta.get("neardup", {}).get("status")
            half = "\n".join(paragraphs[: max(1, len(paragraphs) // 2)])
            yield {"url": response.url, "text": half, "page_status": status}
        elif paragraphs:
            yield {"url": response.url, "text": "\n".join(paragraphs)}
        if self.follow:
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)

    async def listing(self, response: Any) -> Any:
        """A listing: one item per ``div.item``, each keyed by the page's URL; follows "next".
        ``stop_on_seen``: the recipe of docs, pagination stops at the first page whose items
        the store has all seen (nearduppipe.lookup, before the next page is asked for)."""
        from nearduppipe import lookup

        self.reached.append(response.url)
        items = [
            {
                # "own_url": each item carries its own URL (its link), as news listings do
                "url": response.urljoin(div.css("a::attr(href)").get() or "")
                if self.item == "own_url"
                else response.url,
                "text": " ".join(div.css("p::text").getall()),
            }
            for div in response.css("div.item")
        ]
        follow = True
        if self.item == "stop_on_seen":
            verdicts = [await lookup(self.crawler, i["text"], url=response.url) for i in items]
            follow = any(v["status"] not in ("duplicate", "unchanged") for v in verdicts)
        for item in items:
            yield item
        nxt = response.css("a.next::attr(href)").get()
        if nxt and follow:
            yield response.follow(nxt, callback=self.listing)


def readme_recipe() -> Any:
    """The ``parse`` of the README's stop-paginating recipe (its first code block after "stop
    paginating"), compiled from the README itself."""
    text = README.read_text(encoding="utf-8")
    found = re.search(r"stop paginating a.*?```python\n(.*?)```", text, re.S)
    assert found is not None, "the README's recipe"
    namespace: dict[str, Any] = {}
    exec(compile(found.group(1), "README.md", "exec"), namespace)
    return namespace["parse"]


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    if config.get("third_party_deprecations"):  # (scrapy-redis 0.9 calls deprecated API)
        warnings.filterwarnings("default", category=ScrapyDeprecationWarning)
    items: list[dict[str, Any]] = []
    settings = {
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CLOSESPIDER_TIMEOUT": 120,
        **reactor_settings(),
        **config["settings"],
    }
    # CrawlerProcess needs a reactor; AsyncCrawlerProcess runs without one (Scrapy >= 2.15).
    process = AsyncCrawlerProcess(settings) if NO_REACTOR else CrawlerProcess(settings)
    crawler = process.create_crawler(ProbeSpider)

    def collect(item: Any) -> None:
        items.append(dict(item))

    crawler.signals.connect(collect, signal=scrapy.signals.item_scraped)
    fetched: list[str] = []  # every response the downloader received (before any middleware)

    def on_response(response: Any, **_: Any) -> None:
        fetched.append(response.url)

    crawler.signals.connect(on_response, signal=scrapy.signals.response_received)
    dropped: list[dict[str, Any]] = []

    def on_dropped(key: str, match: Any, source: str, **context: Any) -> None:
        dropped.append(
            {"key": key, "match": match.key, "source": source, "context": sorted(context)}
        )

    from nearduppipe.signals import neardup_dropped

    crawler.signals.connect(on_dropped, signal=neardup_dropped)
    process.crawl(
        crawler,
        start_urls=config["start_urls"],
        follow=config.get("follow", False),
        item=config.get("item", "text"),
        reached_log=config.get("reached_log"),
        gate=config.get("gate"),
    )
    process.start()
    assert crawler.stats is not None and crawler.spider is not None
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, str, float))}
    spider: Any = crawler.spider
    out = {
        "reached": spider.reached,
        "items": items,
        "stats": stats,
        "errbacks": spider.errbacks,
        "dropped": dropped,
        "fetched": fetched,
    }
    Path(config["output"]).write_text(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
