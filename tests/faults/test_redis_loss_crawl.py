"""A real crawl whose Redis store is flushed mid-crawl (issue #31, item 2): under
``NEARDUP_ON_STORE_ERROR = "stop"`` the spider closes with ``neardup_store_error`` and says the
store's meta is gone, instead of writing on into an empty server."""

from __future__ import annotations

import random
import time
from pathlib import Path

import redis

from ..crawls.test_redis_crawl import MIDDLEWARE, WORDS, finish, start_crawl
from ..support.crawl_settings import ON_THREADS
from ..support.redis_server import RedisServer
from ..support.server import serve_directory


def test_store_flushed_mid_crawl_stops_the_crawl(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    rng = random.Random(31)
    for i in range(150):
        text = " ".join(f"{rng.choice(WORDS)}{rng.randrange(1000)}" for _ in range(150))
        (root / f"{i}.html").write_text(
            f"<html><body><article><p>{text}</p></article></body></html>", encoding="utf-8"
        )
    server = RedisServer(tmp_path / "redis").start()
    settings = {
        **MIDDLEWARE,
        **ON_THREADS,
        "NEARDUP_STORE": server.url,
        "NEARDUP_ON_STORE_ERROR": "stop",
        "NEARDUP_MIN_TEXT_LENGTH": 50,
        "CONCURRENT_REQUESTS": 2,
        "DOWNLOAD_DELAY": 0.03,
    }
    try:
        with serve_directory(root) as base:
            urls = [f"{base}{i}.html" for i in range(150)]
            proc, output = start_crawl(tmp_path, "flushed", urls, settings)
            client = redis.Redis.from_url(server.url)
            deadline = time.monotonic() + 60
            while int(client.hget("{neardup:probe}:meta", "live") or 0) < 20:  # mid-crawl
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            client.flushdb()
            result = finish(proc, output)
            left = client.dbsize()
            client.close()
    finally:
        server.stop()
    stats = result["stats"]
    assert stats["finish_reason"] == "neardup_store_error", stats
    assert stats["neardup/store_error"] >= 1
    assert "meta" in result["log"] and "NEARDUP_RESET" in result["log"]
    assert len(result["reached"]) < 150
    assert left == 0  # nothing written into the flushed server
