"""Resident memory over a long run: N pages through the real NearDupMiddleware (worker processes,
sqlite store), driven in-process on the asyncio reactor's loop. Prints the crawl process's RSS
every N/10 pages beside the index's own size, so growth beyond what the index needs shows.

    python benchmarks/memory.py [--pages 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

import scrapy  # noqa: E402
from scrapy.http import HtmlResponse  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nearduppipe.middlewares import NearDuplicatePage, NearDupMiddleware  # noqa: E402

WORDS = [f"w{i}" for i in range(5000)]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class MemSpider(scrapy.Spider):
    name = "memory"


async def main(pages: int, tmp: str) -> None:
    crawler = get_crawler(
        MemSpider, {"NEARDUP_STORE": f"{tmp}/mem.sqlite", "NEARDUP_MIN_TEXT_LENGTH": 100}
    )
    crawler.spider = crawler._create_spider()
    mw = NearDupMiddleware.from_crawler(crawler)
    rng = random.Random(1)
    texts: list[str] = []
    dropped = 0

    async def one(i: int) -> None:
        nonlocal dropped
        if texts and i % 5 == 0:  # 20% copies of an earlier page
            text = rng.choice(texts)
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(120))
            if len(texts) < 2000:
                texts.append(text)
        body = f"<html><body><nav>Home</nav><article><p>{text}</p></article></body></html>"
        url = f"https://site.example/{i}"
        try:
            await mw.process_response(
                scrapy.Request(url), HtmlResponse(url, body=body.encode(), encoding="utf-8")
            )
        except NearDuplicatePage:
            dropped += 1

    start_rss = rss_mb()
    t0 = time.perf_counter()
    print(f"start: RSS {start_rss:.0f} MB")
    step = pages // 10
    for done in range(0, pages, 256):
        await asyncio.gather(*(one(i) for i in range(done, min(pages, done + 256))))
        if (done + 256) // step > done // step or done + 256 >= pages:
            n = min(pages, done + 256)
            idx = mw.runtime.store.index_nbytes  # type: ignore[attr-defined]
            print(
                f"{n:7d} pages: RSS {rss_mb():6.0f} MB (+{rss_mb() - start_rss:5.0f}), index {idx / 1e6:5.1f} MB, "
                f"store {len(mw.runtime.store)} fingerprints, {dropped} dropped, {n / (time.perf_counter() - t0):.0f} pages/s"
            )
    mw.runtime.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.get_event_loop().run_until_complete(main(args.pages, tmp))
