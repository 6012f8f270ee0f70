"""A crawl whose items carry lone-surrogate keys and texts (what ``json.loads('"\\ud83d"')``
returns, as real JSON feeds do), while another process holds the sqlite store's write lock for
longer than the busy timeout. Afterwards the store opens, every item with a usable key is in
it, the items whose key the store refused are counted (``neardup/items/skipped/bad_key``), and
no write failed: the writes made during the held lock were kept and committed after it.

The spider reads a JSON feed served on loopback (one document per page); run as a module, this
file is that crawl: ``python -m tests.faults.test_bad_rows_crawl CONFIG.json``.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nearduppipe import open_store

from ..support.crawl_settings import ON_THREADS
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]
PAGES = 360
HOLD = 8.0  # seconds the other process holds the write lock; the busy timeout is 5 s


def _document(i: int, rng: random.Random) -> str:
    text = " ".join(f"w{rng.randrange(1_000_000)}" for _ in range(300))
    if i % 9 == 4:  # a lone surrogate in the text: stored with U+FFFD in its place
        text = text[:100] + "\\udc80" + text[100:]
    key = f"https://feed.example/{i}"
    if i % 13 == 6:  # a lone surrogate in the key: refused, counted
        key += "\\ud83d"
    return '{"key": "' + key + '", "text": "' + text + '"}'  # JSON escapes, as a feed has them


@pytest.fixture(scope="module")
def feed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("feed")
    rng = random.Random(14)
    for i in range(PAGES):
        (root / f"{i}.json").write_text(_document(i, rng), encoding="ascii")
    with serve_directory(root) as base:
        yield base


LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
conn.execute("BEGIN IMMEDIATE")  # the write lock, as another writer holds it
print("held", time.time(), flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
print("released", time.time(), flush=True)
"""


def test_bad_keys_and_texts_while_another_process_holds_the_lock(feed: str, tmp_path: Path) -> None:
    store = tmp_path / "feed.sqlite"
    reached = tmp_path / "reached.log"
    config = tmp_path / "crawl.json"
    output = tmp_path / "out.json"
    config.write_text(
        json.dumps(
            {
                "start_urls": [f"{feed}{i}.json" for i in range(PAGES)],
                "settings": {
                    "ITEM_PIPELINES": {"nearduppipe.pipelines.NearDupPipeline": 300},
                    "NEARDUP_STORE": str(store),
                    **ON_THREADS,
                    "NEARDUP_KEY_FIELD": "key",
                    "NEARDUP_KEEP_TEXT": 200,
                    "NEARDUP_COMMIT_EVERY": 10,
                    "NEARDUP_COMMIT_INTERVAL": 0.1,
                    "NEARDUP_MIN_TEXT_LENGTH": 100,
                    "CONCURRENT_REQUESTS": 1,
                    "DOWNLOAD_DELAY": 0.05,  # about 15 s of crawl: the hold falls inside it
                },
                "output": str(output),
                "reached_log": str(reached),
            }
        )
    )
    crawl = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.test_bad_rows_crawl", str(config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the store is open and pages are flowing
            if reached.exists() and len(reached.read_text().splitlines()) >= 20:
                break
            time.sleep(0.05)
        locker = subprocess.run(
            [sys.executable, "-c", LOCKER, str(store), str(HOLD)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        _, err = crawl.communicate(timeout=300)
    finally:
        crawl.kill()
    assert crawl.returncode == 0, err[-3000:]
    times = dict(line.split() for line in locker.stdout.splitlines())
    held, released = float(times["held"]), float(times["released"])
    arrivals = [float(line.split()[0]) for line in reached.read_text().splitlines()]
    during = sum(held < t < released for t in arrivals)
    assert during >= 20, (during, err[-2000:])  # the crawl went on while the lock was held
    assert sum(t > released for t in arrivals) >= 1  # and after it

    result = json.loads(output.read_text())
    stats = result["stats"]
    bad = [i for i in range(PAGES) if i % 13 == 6]
    assert stats.get("neardup/items/skipped/bad_key") == len(bad), stats
    assert "neardup/store_error" not in stats, err[-3000:]  # nothing was refused or lost
    assert len(result["items"]) == PAGES  # every item was kept (none is a near-duplicate)

    with open_store(str(store), read_only=True) as s:  # opens; holds every usable item
        stored = {e.key: e for e in s.entries()}
    want = {f"https://feed.example/{i}" for i in range(PAGES) if i % 13 != 6}
    assert set(stored) == want
    for i in range(4, PAGES, 9):
        if i % 13 != 6:
            text = stored[f"https://feed.example/{i}"].text
            assert text is not None and "\ufffd" in text
    conn = sqlite3.connect(store)  # and every committed row is plain UTF-8 JSON text
    for (value,) in conn.execute("SELECT value FROM neardup"):
        json.loads(value)
    conn.close()


# -- the crawl (run in a subprocess: one reactor per process) --------------------------------


def main(config_path: str) -> None:
    import scrapy
    from scrapy.crawler import AsyncCrawlerProcess, CrawlerProcess

    from ..support.reactor import NO_REACTOR, reactor_settings

    config = json.loads(Path(config_path).read_text())
    items: list[dict[str, Any]] = []

    class FeedSpider(scrapy.Spider):
        name = "feed"

        async def start(self) -> Any:
            for url in config["start_urls"]:
                yield scrapy.Request(url, dont_filter=True)

        def parse(self, response: Any) -> Any:
            with open(config["reached_log"], "a") as log:
                log.write(f"{time.time():.3f} {response.url}\n")
            yield json.loads(response.text)  # lone surrogates and all

    settings = {
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CLOSESPIDER_TIMEOUT": 120,
        **reactor_settings(),
        **config["settings"],
    }
    process = AsyncCrawlerProcess(settings) if NO_REACTOR else CrawlerProcess(settings)
    crawler = process.create_crawler(FeedSpider)

    def collect(item: Any) -> None:  # a named function: signals hold weak references
        items.append(dict(item))

    crawler.signals.connect(collect, signal=scrapy.signals.item_scraped)
    process.crawl(crawler)
    process.start()
    assert crawler.stats is not None
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, str, float))}
    out = {"items": [{"key": repr(i["key"])} for i in items], "stats": stats}
    Path(config["output"]).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
