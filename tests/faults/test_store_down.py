"""Redis down in the middle of a crawl, under ``keep``: after a few failures in a row the crawl
stops asking the store for a back-off period and lets pages through at once (counted), then
probes it; it was 18x slower, every page waiting for the client's timeouts. Redis down at the
start stops the crawl under either policy, and the first error line says so."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from nearduppipe.runtime.breaker import MAX_BACKOFF, THRESHOLD, Breaker

from ..support.redis_server import RedisServer
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]
PAGES = 120
SETTINGS = {
    "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
    "NEARDUP_ON_STORE_ERROR": "keep",
    "NEARDUP_EXECUTOR": "thread",
    "NEARDUP_MIN_TEXT_LENGTH": 50,
    "CONCURRENT_REQUESTS": 4,
    "DOWNLOAD_DELAY": 0.05,
    # (a hung call then fails in ~3 s instead of ~15: the same path, a shorter test)
    "NEARDUP_REDIS_PARAMS": {"socket_timeout": 1},
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("site")
    rng = random.Random(4)
    for i in range(PAGES):
        text = " ".join(f"word{rng.randrange(100_000)}" for _ in range(80))
        (root / f"{i}.html").write_text(
            f"<html><body><article><p>{text}</p></article></body></html>", encoding="utf-8"
        )
    with serve_directory(root) as base:
        yield base


def crawl(tmp: Path, name: str, site: str, settings: dict[str, Any]) -> subprocess.Popen[str]:
    config = tmp / f"{name}.json"
    config.write_text(
        json.dumps(
            {
                "start_urls": [f"{site}{i}.html" for i in range(PAGES)],
                "settings": {**SETTINGS, **settings},
                "item": "none",
                "reached_log": str(tmp / f"{name}.reached.log"),
                "output": str(tmp / f"{name}.out.json"),
            }
        )
    )
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.crawl", str(config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_the_breaker_backs_off_probes_once_and_closes() -> None:
    now = [0.0]
    b = Breaker(clock=lambda: now[0])
    assert not any(b.skip() for _ in range(5))
    assert [b.failure() for _ in range(THRESHOLD)][-1] == 2.0  # opens at the threshold
    assert b.skip() and b.skipped == 1 and not b.probe_due()
    now[0] = 2.5
    assert b.probe_due() and not b.probe_due()  # one probe at a time
    assert b.skip()  # pages never wait for the probe
    assert b.failure() == 4.0  # the probe failed: a longer back-off
    for _ in range(10):
        now[0] += 100
        assert b.probe_due()
        b.failure()
    assert b.backoff == MAX_BACKOFF
    now[0] += 100
    assert b.probe_due() and b.success() == pytest.approx(now[0])  # down since the opening
    assert not b.skip() and b.failures == 0 and not b.open


@pytest.mark.parametrize("fault", ["killed", "paused"])
def test_a_crawl_with_redis_down_mid_way_asks_it_rarely(
    site: str, tmp_path: Path, fault: str
) -> None:
    """Killed: every call is refused at once; paused (SIGSTOP: a hung server, a network that
    drops packets): every call waits for the client's timeouts, which is what made crawls slow."""
    server = RedisServer(tmp_path / "redis").start()
    proc = crawl(tmp_path, "down", site, {"NEARDUP_STORE": server.url})
    try:
        client = redis.Redis.from_url(server.url)
        deadline = time.monotonic() + 60
        while int(client.hget("{neardup:probe}:meta", "live") or 0) < 20:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        client.close()
        assert server.proc is not None
        if fault == "killed":
            server.kill()  # and not restarted: down for the rest of the crawl
        else:
            server.proc.send_signal(signal.SIGSTOP)
        try:
            _, stderr = proc.communicate(timeout=240)
        finally:
            if fault == "paused" and server.proc is not None:
                server.proc.send_signal(signal.SIGCONT)
    finally:
        server.stop()
    assert proc.returncode == 0, stderr[-3000:]
    result = json.loads((tmp_path / "down.out.json").read_text())
    stats = result["stats"]
    assert stats["finish_reason"] == "finished"
    assert len(result["reached"]) == PAGES  # every page kept
    assert stats["neardup/unique"] + stats["neardup/store_error"] == PAGES
    # only the pages already past the breaker when it opened asked the store (the requests in
    # flight, and those fingerprinted meanwhile); every later page was let through without
    # asking, and the store was probed in the background. Before: all 100 asked
    asked = stats["neardup/store_error"] - stats["neardup/store_down/skipped"]
    assert stats["neardup/store_down/backoff"] >= 1
    assert asked <= 2 * SETTINGS["CONCURRENT_REQUESTS"], stats
    assert "not asking it for 2 s" in stderr


def test_redis_down_at_start_says_the_policy_does_not_apply_yet(site: str, tmp_path: Path) -> None:
    proc = crawl(tmp_path, "start", site, {"NEARDUP_STORE": "redis://127.0.0.1:9/0"})
    _, stderr = proc.communicate(timeout=120)
    assert "unreachable when the crawl starts, which stops it whatever NEARDUP_ON_STORE_ERROR" in (
        stderr
    ), stderr[-3000:]
    assert (
        not (tmp_path / "start.out.json").exists()
        or json.loads((tmp_path / "start.out.json").read_text())["reached"] == []
    )
