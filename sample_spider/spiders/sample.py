"""The demo spider: crawls the bundled demo site offline (file://), or any site given with
``-a start_url=https://...``, following links within the start site."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlparse

import scrapy
from scrapy.http import Response

SITE = Path(__file__).resolve().parents[1] / "site"


class SampleSpider(scrapy.Spider):
    name = "sample"
    custom_settings: ClassVar[dict[str, Any]] = {"DEPTH_LIMIT": 3}

    def __init__(self, start_url: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.start_url = start_url or (SITE / "index.html").as_uri()
        parsed = urlparse(self.start_url)
        if parsed.scheme not in ("http", "https", "file"):
            raise ValueError(f"start_url must be an http(s) or file URL, got {self.start_url!r}")
        self.site = parsed.netloc if parsed.scheme != "file" else str(Path(parsed.path).parent)

    async def start(self) -> AsyncIterator[scrapy.Request]:
        # The start page is a hub: it must be crawled again on every run to find new links, so
        # it is exempt from near-duplicate dropping (dont_neardup); article pages are not.
        yield scrapy.Request(self.start_url, callback=self.parse, meta={"dont_neardup": True})

    def _same_site(self, url: str) -> bool:
        parsed = urlparse(url)
        if parsed.scheme == "file":
            return parsed.path.startswith(self.site)
        return parsed.netloc == self.site

    def parse(self, response: Response) -> Iterator[Any]:
        paragraphs = response.css("article p:not(.meta)::text, div.body p::text").getall()
        if paragraphs:
            yield {
                "url": response.url,
                "title": (response.css("title::text").get() or "").strip(),
                "text": "\n".join(p.strip() for p in paragraphs),
            }
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href).split("#", 1)[0]
            if url and self._same_site(url):
                yield scrapy.Request(url, callback=self.parse)
