"""Real crawls on a shared Redis store: two Scrapy processes at once, and Redis killed mid-crawl."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from sample_spider.site_builder import DISTINCT, GROUPS, build_site

from ..support.crawl_settings import ON_THREADS
from ..support.redis_server import RedisServer
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]
MIDDLEWARE = {
    "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
    "SPIDER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupSpiderMiddleware": 543},
}
ARTICLES = [p for g in GROUPS for p in g] + DISTINCT
WORDS = (
    "harbour river council budget school library market station bridge festival museum "
    "garden railway hospital theatre election weather forecast storm harvest"
).split()


def start_crawl(
    tmp: Path, name: str, urls: list[str], settings: dict[str, Any], **options: Any
) -> tuple[subprocess.Popen[str], Path]:
    config, output = tmp / f"{name}.json", tmp / f"{name}.out.json"
    config.write_text(
        json.dumps({"start_urls": urls, "settings": settings, "output": str(output), **options})
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.crawl", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, output


def finish(proc: subprocess.Popen[str], output: Path) -> dict[str, Any]:
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    result: dict[str, Any] = json.loads(output.read_text())
    result["log"] = err
    return result


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_site(tmp_path_factory.mktemp("site"))
    rng = random.Random(5)
    for i in range(150):  # distinct filler pages for the long crawl of the fault test
        text = " ".join(f"{rng.choice(WORDS)}{rng.randrange(1000)}" for _ in range(150))
        (root / "filler").mkdir(exist_ok=True)
        (root / "filler" / f"{i}.html").write_text(
            f"<html><body><article><p>{text}</p></article></body></html>", encoding="utf-8"
        )
    with serve_directory(root) as base:
        yield base


def test_two_crawler_processes_share_one_index(
    site: str, tmp_path: Path, redis_server: RedisServer
) -> None:
    settings = {
        **MIDDLEWARE,
        **ON_THREADS,
        "NEARDUP_STORE": redis_server.url,
        "NEARDUP_RESET": False,
    }
    client = redis.Redis.from_url(redis_server.url)
    for key in client.scan_iter(match="{neardup:probe}:*"):
        client.delete(key)
    urls = [site + p for p in ARTICLES]
    a = start_crawl(tmp_path, "a", urls, settings)
    b = start_crawl(tmp_path, "b", list(reversed(urls)), settings)
    ra, rb = finish(*a), finish(*b)
    kept = [i["url"].removeprefix(site) for i in ra["items"] + rb["items"]]
    for group in GROUPS:
        assert sum(kept.count(p) for p in group) == 1, (group, kept)
    for page in DISTINCT:
        assert kept.count(page) == 1
    # a page both crawls fetched is, for the second, its own key stored by another job:
    # `claimed` while the first crawl runs (docs/verdicts.md), an unchanged revisit once it
    # has closed (it reaches the spider, its item is dropped); the others are near-duplicates
    # of another key
    dropped = sum(
        r["stats"].get(name, 0)
        for r in (ra, rb)
        for name in (
            "neardup/dropped",
            "neardup/claimed/dropped",
            "neardup/revisit/unchanged/dropped",
        )
    )
    assert dropped == 2 * len(ARTICLES) - len(kept)
    for r in (ra, rb):  # a normal Redis crawl logs no ERROR and counts its store at close
        assert "log_count/ERROR" not in r["stats"], r["log"][-3000:]
        assert r["stats"]["neardup/store_size/close"] >= len(GROUPS) + len(DISTINCT)
        assert "holds an unknown number" not in r["log"]
    client.close()


@pytest.mark.parametrize("policy", ["keep", "stop"])
def test_redis_killed_mid_crawl(site: str, tmp_path: Path, policy: str) -> None:
    server = RedisServer(tmp_path / "redis").start()
    settings = {
        **MIDDLEWARE,
        **ON_THREADS,
        "NEARDUP_STORE": server.url,
        "NEARDUP_ON_STORE_ERROR": policy,
        "NEARDUP_MIN_TEXT_LENGTH": 50,
        "CONCURRENT_REQUESTS": 2,
        "DOWNLOAD_DELAY": 0.03,
    }
    urls = [f"{site}filler/{i}.html" for i in range(150)]
    proc, output = start_crawl(tmp_path, f"fault-{policy}", urls, settings)
    try:
        client = redis.Redis.from_url(server.url)
        deadline = time.monotonic() + 60
        while int(client.hget("{neardup:probe}:meta", "live") or 0) < 20:  # mid-crawl
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        client.close()
        server.kill()
        time.sleep(1.0)
        server.start()
        result = finish(proc, output)
    finally:
        server.stop()
    stats = result["stats"]
    assert stats["neardup/store_error"] >= 1
    assert "store unavailable" in result["log"]
    # the close summary says how many pages went through unchecked, and the store's failure
    let = stats["neardup/let_through/store_error"]
    assert f"{let} let through unchecked (store_error)" in result["log"], result["log"][-3000:]
    assert "the store failed during the crawl" in result["log"]
    if policy == "keep":
        assert stats["finish_reason"] == "finished"
        assert len(result["reached"]) == 150  # every page kept: none lost
        assert stats["neardup/unique"] + stats["neardup/store_error"] == 150
    else:
        assert stats["finish_reason"] == "neardup_store_error"
        assert len(result["reached"]) < 150
