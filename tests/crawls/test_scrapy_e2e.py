"""Real crawls (CrawlerProcess in a subprocess) against the demo site on a loopback HTTP server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nearduppipe import open_store
from nearduppipe.fingerprint.compact import decode
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
from sample_spider.site_builder import DISTINCT, GROUPS, build_site

from ..support.cli import run as run_cli
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]
MIDDLEWARE = {
    "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
    "SPIDER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupSpiderMiddleware": 543},
}
PIPELINE = {"ITEM_PIPELINES": {"nearduppipe.pipelines.NearDupPipeline": 300}}
ARTICLES = [p for g in GROUPS for p in g] + DISTINCT


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_site(tmp_path_factory.mktemp("site"))
    with serve_directory(root) as base:
        yield base


def crawl(
    tmp: Path,
    start_urls: list[str],
    settings: dict[str, Any],
    follow: bool = False,
    expect_ok: bool = True,
    item: str = "text",
) -> dict[str, Any]:
    n = len(list(tmp.glob("crawl*.json")))
    config = tmp / f"crawl{n}.json"
    output = tmp / f"out{n}.json"
    config.write_text(
        json.dumps(
            {
                "start_urls": start_urls,
                "settings": settings,
                "follow": follow,
                "output": str(output),
                "item": item,
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.crawl", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if not expect_ok:
        return {"returncode": proc.returncode, "log": proc.stderr}
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(output.read_text())
    result["log"] = proc.stderr
    return result


def rel(base: str, urls: list[str]) -> list[str]:
    return sorted(u.removeprefix(base) for u in urls)


def assert_one_per_group(base: str, kept: list[str]) -> None:
    kept_rel = rel(base, kept)
    for group in GROUPS:
        assert sum(p in kept_rel for p in group) == 1, (group, kept_rel)
    for page in DISTINCT:
        assert page in kept_rel


@pytest.mark.parametrize("on_unchanged", ["items", "page"])
def test_middleware_drops_near_duplicates_then_everything_on_recrawl(
    site: str, tmp_path: Path, on_unchanged: str
) -> None:
    """A recrawl drops every item: by default the unchanged pages reach the spider (their
    links would be followed) and their items are dropped; with ``"page"`` the pages too."""
    store = tmp_path / "pages.sqlite"
    settings = {**MIDDLEWARE, "NEARDUP_STORE": str(store), "NEARDUP_ON_UNCHANGED": on_unchanged}
    urls = [site + p for p in ARTICLES]
    first = crawl(tmp_path, urls, settings)
    assert_one_per_group(site, first["reached"])
    assert len(first["reached"]) == len(GROUPS) + len(DISTINCT)
    stats = first["stats"]
    dropped = sum(len(g) - 1 for g in GROUPS)
    assert stats["neardup/checked"] == len(ARTICLES)
    assert stats["neardup/dropped"] == dropped
    assert stats["neardup/unique"] == len(GROUPS) + len(DISTINCT)
    assert sum(v for k, v in stats.items() if k.startswith("neardup/distance/")) == dropped
    assert stats["neardup/store_size/open"] == 0
    assert stats["neardup/store_size/close"] == len(GROUPS) + len(DISTINCT)
    assert "Dropped near-duplicate page" in first["log"]
    assert first["log"].count("Dropped near-duplicate page") == 1  # only the first without DEBUG
    assert "log_count/ERROR" not in stats and "log_count/WARNING" not in stats

    second = crawl(tmp_path, urls, settings)
    assert second["items"] == []
    if on_unchanged == "items":
        assert sorted(second["reached"]) == sorted(first["reached"])
        assert second["stats"]["neardup/items/dropped_with_page"] == len(first["items"])
    else:
        assert second["reached"] == []
    # a recrawl: every kept page is its own key, unchanged (a revisit, not a near-duplicate of
    # itself); every copy is a near-duplicate of one again
    assert second["stats"]["neardup/revisit/unchanged/dropped"] == len(GROUPS) + len(DISTINCT)
    assert second["stats"]["neardup/dropped"] == dropped
    assert second["stats"]["neardup/store_size/open"] == len(GROUPS) + len(DISTINCT)
    assert second["stats"]["neardup/store_size/close"] == len(GROUPS) + len(DISTINCT)
    with open_store(str(store), read_only=True) as s:
        assert s.decision_count() == 2 * dropped and s.counters()["revisits_unchanged"] == len(
            GROUPS
        ) + len(DISTINCT)
        assert all(d.key != d.matched_key for d in s.decisions())

    third = crawl(tmp_path, urls, {**settings, "NEARDUP_RESET": True, "NEARDUP_DEBUG": True})
    assert_one_per_group(site, third["reached"])
    assert third["log"].count("Dropped near-duplicate page") == dropped
    with open_store(str(store)) as s:
        assert len(s) == len(GROUPS) + len(DISTINCT)
        assert s.decision_count() == dropped


def test_memory_store_crawl_logs_no_error(site: str, tmp_path: Path) -> None:
    settings = {
        **MIDDLEWARE,
        **PIPELINE,
        "NEARDUP_STORE": "memory:",
        "NEARDUP_MIN_TEXT_LENGTH": 100,
    }
    result = crawl(tmp_path, [site + p for p in ARTICLES], settings)
    assert_one_per_group(site, result["reached"])
    assert "log_count/ERROR" not in result["stats"], result["log"][-3000:]
    # one entry per kept page, plus items whose text differs from their page's beyond distance
    assert result["stats"]["neardup/store_size/close"] >= len(GROUPS) + len(DISTINCT)


def test_relative_store_path_lives_in_the_data_dir(site: str, tmp_path: Path) -> None:
    """Like HTTPCACHE_DIR: outside a project, ``.scrapy/`` under the working directory. The
    crawl runs from the repository (a Scrapy project), so the path is made absolute there."""
    from scrapy.utils.project import data_path

    name = f"test-rel-{os.getpid()}.sqlite"  # legs of CI run at once in one checkout
    expected = Path(ROOT / ".scrapy" / name)
    try:
        for uri in (name, f"sqlite:///{name}"):
            result = crawl(tmp_path, [site + ARTICLES[0]], {**MIDDLEWARE, "NEARDUP_STORE": uri})
            assert (
                f"store {expected}" in result["log"]
                or f"store sqlite:///{expected}" in result["log"]
            ), result["log"][-2000:]
            assert expected.is_file()
        assert Path(data_path(name)).name == name
    finally:
        for f in ROOT.joinpath(".scrapy").glob(name + "*"):
            f.unlink()


def test_bogus_store_scheme_names_the_setting(site: str, tmp_path: Path) -> None:
    result = crawl(
        tmp_path,
        [site + ARTICLES[0]],
        {**MIDDLEWARE, "NEARDUP_STORE": "ftp://x/y"},
        expect_ok=False,
    )
    assert "NEARDUP_STORE 'ftp://x/y': unknown store scheme 'ftp'" in result["log"]


def test_links_of_dropped_pages_are_not_followed(site: str, tmp_path: Path) -> None:
    settings = {**MIDDLEWARE, "NEARDUP_STORE": str(tmp_path / "s.sqlite")}
    first = crawl(tmp_path, [site + "index.html"], settings, follow=True)
    assert_one_per_group(site, first["reached"])
    fetched = first["stats"]["downloader/request_count"]
    # a recrawl: the unchanged index reaches the spider, so its links are followed again (the
    # near-copies are fetched, dropped, and their own links are not followed), no item is kept
    second = crawl(tmp_path, [site + "index.html"], settings, follow=True)
    assert sorted(second["reached"]) == sorted(first["reached"])
    assert second["items"] == []
    assert second["stats"]["downloader/request_count"] == fetched
    # with NEARDUP_ON_UNCHANGED = "page" the known index is dropped: nothing behind it is fetched
    third = crawl(
        tmp_path, [site + "index.html"], {**settings, "NEARDUP_ON_UNCHANGED": "page"}, follow=True
    )
    assert third["reached"] == []
    assert third["stats"]["neardup/revisit/unchanged/dropped"] == 1
    assert third["stats"].get("downloader/request_count") == 1


def test_pipeline_alone_keeps_one_item_per_group(site: str, tmp_path: Path) -> None:
    settings = {
        **PIPELINE,
        "NEARDUP_STORE": str(tmp_path / "items.sqlite"),
        "NEARDUP_MIN_TEXT_LENGTH": 100,
        "NEARDUP_FINGERPRINT_FIELD": "fingerprint",
    }
    urls = [site + p for p in ARTICLES]
    result = crawl(tmp_path, urls, settings, item="html")  # the pipeline extracts the text
    assert len(result["reached"]) == len(ARTICLES)  # the pipeline does not stop pages
    assert_one_per_group(site, [i["url"] for i in result["items"]])
    # the compact form (fingerprint/compact.py): both fingerprints of the item's page
    params = FingerprintParams(min_text_length=100)
    for item in result["items"]:
        expected = fingerprint_html(item["html"], None, params).fingerprints
        assert decode(item["fingerprint"]).fingerprints == expected
    assert result["stats"]["neardup/items/dropped"] == sum(len(g) - 1 for g in GROUPS)
    again = crawl(tmp_path, urls, settings, item="html")
    assert again["items"] == []  # every item was seen by the first crawl


def test_middleware_and_pipeline_together(site: str, tmp_path: Path) -> None:
    settings = {
        **MIDDLEWARE,
        **PIPELINE,
        "NEARDUP_STORE": str(tmp_path / "both.sqlite"),
        "NEARDUP_MIN_TEXT_LENGTH": 100,
    }
    result = crawl(tmp_path, [site + p for p in ARTICLES], settings)
    # every page that reached the spider has its item in the feed: none was dropped as a
    # near-duplicate of its own page
    assert rel(site, [i["url"] for i in result["items"]]) == rel(site, result["reached"])
    assert_one_per_group(site, result["reached"])
    assert result["stats"].get("neardup/items/dropped", 0) == 0


def test_bad_setting_fails_at_start_up(site: str, tmp_path: Path) -> None:
    settings = {
        **MIDDLEWARE,
        "NEARDUP_STORE": str(tmp_path / "x.sqlite"),
        "NEARDUP_DISTANCE": "three",
    }
    result = crawl(tmp_path, [site + "index.html"], settings, expect_ok=False)
    log = result["log"]
    assert "NEARDUP_DISTANCE must be an integer, got 'three'" in log
    # one CRITICAL line, no traceback; closed before its first request (runtime/refusal.py)
    assert [line for line in log.splitlines() if "CRITICAL" in line] == [
        next(line for line in log.splitlines() if "NEARDUP_DISTANCE" in line)
    ]
    assert "Traceback" not in log
    assert "Closing spider (neardup_config_error)" in log
    assert "downloader/request_count" not in log


def test_report_of_a_crawl_that_kept_texts(site: str, tmp_path: Path) -> None:
    store = tmp_path / "kept.sqlite"
    settings = {**MIDDLEWARE, "NEARDUP_STORE": str(store), "NEARDUP_KEEP_TEXT": 400}
    crawl(tmp_path, [site + p for p in ARTICLES], settings)
    with open_store(str(store), read_only=True) as s:
        entries, decisions = list(s.entries()), list(s.decisions())
    assert all(e.text and len(e.text) <= 400 for e in entries)
    assert len(decisions) == sum(len(g) - 1 for g in GROUPS) and all(d.text for d in decisions)
    html = tmp_path / "report.html"
    # (the command's main in this process, as tests/cli runs it; scrapy neardup below is a
    # child process, as a shell runs it)
    proc = run_cli("report", str(store), "--format", "html", "-o", str(html))
    assert proc.returncode == 0, proc.stderr
    page = html.read_text(encoding="utf-8")
    assert 'id="pair-pick"' in page and 'id="no-texts"' not in page
    # and from inside the Scrapy project
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "neardup", "--store", str(store), "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"schema": "nearduppipe.report/1"' in proc.stdout
