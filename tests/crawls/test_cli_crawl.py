"""The command line on what real crawls leave: a Redis store written by a default crawl is read,
reported and copied to sqlite and back with no layout flag, and the next crawl starts on the
copy and drops as before; ``scrapy neardup`` finds a spider's store through its settings."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from nearduppipe.fingerprint.rule import DEFAULT_RADIUS
from sample_spider.site_builder import DISTINCT, GROUPS, build_site

from ..crawls.test_redis_crawl import MIDDLEWARE, finish, start_crawl
from ..support.cli import run, run_process
from ..support.redis_server import RedisServer
from ..support.server import serve_directory

ARTICLES = [p for g in GROUPS for p in g] + DISTINCT
A = 0x0F0F_0000_FFFF_1234
NOTHING = {
    "revisits_unchanged": 0,
    "revisits_changed": 0,
    "again": 0,
    "claimed": 0,
}  # a crawl's first


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_directory(build_site(tmp_path_factory.mktemp("site"))) as base:
        yield base


def test_default_crawl_store_round_trip_through_sqlite(
    site: str, tmp_path: Path, redis_server: RedisServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    for key in client.scan_iter(match="{neardup:probe}:*"):
        client.delete(key)
    # what a default crawl of spider "probe" writes: prefix neardup:probe, the default radius
    settings = {**MIDDLEWARE, "NEARDUP_STORE": redis_server.url, "NEARDUP_EXECUTOR": "thread"}
    urls = [site + p for p in ARTICLES]
    first = finish(*start_crawl(tmp_path, "first", urls, settings))
    unique, dropped = first["stats"]["neardup/unique"], first["stats"].get("neardup/dropped", 0)
    assert dropped > 0
    uri = redis_server.url + ("&" if "?" in redis_server.url else "?") + "prefix=neardup:probe"

    info = run_process("info", uri, "--format", "json")
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert (data["entries"], data["decisions"], data["rule"]["radius"]) == (
        unique,
        dropped,
        DEFAULT_RADIUS,
    )
    # (info above ran as a shell runs it; the reports and copies run the CLI's main in this
    # process, as tests/cli does: the same exit status and streams, without a Python start-up
    # and a store's compiled kernels loaded per command, in a file CI runs on every leg)
    reports = {fmt: run("report", uri, "--format", fmt) for fmt in ("text", "json", "csv", "html")}
    for report in reports.values():
        assert report.returncode == 0 and report.stdout, report.stderr
    assert json.loads(reports["json"].stdout)["summary"] == {
        "pages_seen": unique + dropped,
        "unique": unique,
        "dropped": dropped,
        "judged": unique + dropped,
        "duplicate_rate": round(dropped / (unique + dropped), 6),
        "revisits_unchanged": 0,
        "revisits_changed": 0,
        "again": 0,
        "decisions_trimmed": 0,
        # the middleware's checks: no pipeline in this crawl
        "pages": {"checked": unique + dropped, "unique": unique, "dropped": dropped, **NOTHING},
        "items": {"checked": 0, "unique": 0, "dropped": 0, **NOTHING},
    }

    local = tmp_path / "probe.sqlite"
    there = run("copy", uri, str(local))
    assert there.returncode == 0, there.stderr
    back = run("copy", str(local), uri, "--reset")
    assert back.returncode == 0, back.stderr
    assert f"copied {unique} fingerprints, {dropped} aliases" in back.stdout  # (kept as
    # candidates: every dropped page of a new store's crawl)
    assert f"and {dropped} decisions" in back.stdout

    second = finish(*start_crawl(tmp_path, "second", urls, settings))  # starts: same layout
    assert second["stats"]["neardup/store_size/open"] == unique
    # every page seen before: its own key unchanged, or a near-duplicate of one
    assert second["stats"]["neardup/revisit/unchanged/dropped"] == unique
    assert second["stats"]["neardup/dropped"] == len(ARTICLES) - unique
    # the unchanged pages reach the spider again (NEARDUP_ON_UNCHANGED = "items"), no item does
    assert len(second["reached"]) == unique and second["items"] == []
    client.close()


PROJECT_SETTINGS = """
BOT_NAME = "proj"
SPIDER_MODULES = ["proj.spiders"]
NEARDUP_STORE = "sqlite:///never-written.sqlite"  # the spider's custom_settings override it
"""
SPIDER = """
import scrapy

class News(scrapy.Spider):
    name = "news"
    custom_settings = {{"NEARDUP_STORE": {store!r}}}
"""


def test_scrapy_neardup_uses_the_spiders_settings(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    from nearduppipe import open_store

    with open_store(redis_server.url, name="news", reset=True) as s:  # a crawl's
        s.check_and_add(A, "https://a.example/1")
        s.check_and_add(A ^ 0b111, "https://a.example/2")  # no wide fingerprints: d <= 3
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (tmp_path / "proj" / "spiders").mkdir(parents=True)
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "settings.py").write_text(PROJECT_SETTINGS)
    (tmp_path / "proj" / "spiders" / "__init__.py").write_text(
        SPIDER.format(store=redis_server.url)
    )

    def scrapy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "scrapy", "neardup", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    summary = scrapy()
    assert summary.returncode == 0, summary.stderr
    assert "spider news: redis://" in summary.stdout
    assert "pages stored (one per key):         1" in summary.stdout
    assert "near-duplicates dropped:            1" in summary.stdout
    report = scrapy("news", "--format", "json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["clusters"][0]["duplicates"] == [
        {"key": "https://a.example/2", "distance": 3, "drops": 1}
    ]
    assert "spider news:" in report.stderr
    store = redis_server.url + ("&" if "?" in redis_server.url else "?") + "prefix=neardup:news"
    given = scrapy("--store", store, "--format", "csv")
    assert given.returncode == 0, given.stderr
    assert given.stdout.splitlines()[0] == "cluster,original,key,distance,host"
    assert not (tmp_path / "never-written.sqlite").exists()
    # a relative sqlite path: where a crawl with the same NEARDUP_STORE keeps it (the data dir)
    (tmp_path / ".scrapy" / "stores").mkdir(parents=True)
    with open_store(str(tmp_path / ".scrapy" / "stores" / "rel.sqlite")) as s:
        s.check_and_add(A, "https://a.example/1")
    rel = scrapy("--store", "sqlite:///stores/rel.sqlite")
    assert rel.returncode == 0 and "pages stored (one per key):         1" in rel.stdout, rel
    assert str(tmp_path / ".scrapy" / "stores" / "rel.sqlite") in rel.stdout
    into_dir = scrapy("news", "--format", "json", "-o", str(tmp_path / "proj"))
    assert into_dir.returncode == 2 and "Traceback" not in into_dir.stderr
    assert "proj: is a directory" in into_dir.stderr, into_dir.stderr

    big = tmp_path / "big.sqlite"  # a report larger than a pipe's buffer, read by `head`
    with open_store(str(big)) as s:
        for i in range(3000):
            s.check_and_add((A * (2 * i + 1)) % (1 << 64), f"https://a.example/{i}")
            s.check_and_add((A * (2 * i + 1)) % (1 << 64) ^ 1, f"https://b.example/{i}")
    head = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "neardup", "--store", str(big), "--format", "json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert head.stdout is not None and head.stderr is not None
    assert head.stdout.read(100).startswith(b"{")
    head.stdout.close()
    err = head.stderr.read().decode()
    assert head.wait(timeout=60) in (0, 141)
    assert "Traceback" not in err and "BrokenPipe" not in err


BROKEN_SPIDERS = """
import scrapy

class News(scrapy.Spider):
    name = "news"
    custom_settings = {{"NEARDUP_STORE": {store!r}}}

class Bad(scrapy.Spider):
    name = "bad"
    custom_settings = {{"NEARDUP_DISTANCE": "three"}}

class Gone(scrapy.Spider):
    name = "gone"
    custom_settings = {{"NEARDUP_STORE": {gone!r}}}
"""


def test_scrapy_neardup_names_each_spider_it_cannot_read_and_goes_on(tmp_path: Path) -> None:
    """One spider with a bad setting, one whose store is not a store: the others are still
    summarised, each failure is one line naming the spider and why, and the exit status is 1."""
    from nearduppipe import open_store

    good = tmp_path / "news.sqlite"
    with open_store(str(good)) as s:
        s.check_and_add(A, "https://a.example/1")
    gone = tmp_path / "not-a-store.sqlite"
    gone.write_text("this is not a database")
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (tmp_path / "proj" / "spiders").mkdir(parents=True)
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "settings.py").write_text(PROJECT_SETTINGS)
    (tmp_path / "proj" / "spiders" / "__init__.py").write_text(
        BROKEN_SPIDERS.format(store=str(good), gone=str(gone))
    )
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "neardup"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"spider news: {good}" in proc.stdout
    assert "pages stored (one per key):         1" in proc.stdout
    assert "spider bad: cannot read its store: NEARDUP_DISTANCE" in proc.stderr
    assert "spider gone: cannot read its store:" in proc.stderr
