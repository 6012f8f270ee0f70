"""A key is one page across recrawls: the demo site crawled three times with both components on
one store; every number the store reports equals the sum of the crawls' stats."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nearduppipe import open_store
from sample_spider.site_builder import DISTINCT, GROUPS, build_site

from .support.server import serve_directory
from .test_scrapy_e2e import crawl

BOTH = {
    "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
    "ITEM_PIPELINES": {"nearduppipe.pipelines.NearDupPipeline": 300},
    "NEARDUP_MIN_TEXT_LENGTH": 100,
}
ARTICLES = [p for g in GROUPS for p in g] + DISTINCT


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = build_site(tmp_path_factory.mktemp("site"))
    with serve_directory(root) as base:
        yield base


def cli(*args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "nearduppipe.cli", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_three_crawls_with_both_components_count_each_page_once(site: str, tmp_path: Path) -> None:
    store = tmp_path / "demo.sqlite"
    settings = {**BOTH, "NEARDUP_STORE": str(store)}
    runs = [crawl(tmp_path, [site + p for p in ARTICLES], settings) for _ in range(3)]

    def total(*names: str) -> int:
        return sum(int(r["stats"].get(n, 0)) for r in runs for n in names)

    unique = len(GROUPS) + len(DISTINCT)
    copies = sum(len(g) - 1 for g in GROUPS)
    assert total("neardup/unique", "neardup/items/unique") == unique
    assert total("neardup/dropped", "neardup/items/dropped") == 3 * copies  # dropped each crawl
    assert total("neardup/revisit/unchanged") == 2 * unique  # crawls 2 and 3
    assert total("neardup/items/again") == unique  # crawl 1: an item of a page just checked
    for r in runs:
        assert "log_count/ERROR" not in r["stats"]
    with open_store(str(store), read_only=True) as s:
        keys = [e.key for e in s.entries()]
        assert len(keys) == len(set(keys)) == unique  # one entry per URL
        decisions = list(s.decisions())
        assert all(d.key != d.matched_key for d in decisions)  # never a pair with itself
        assert len(decisions) == total("neardup/dropped", "neardup/items/dropped")
    info = cli("info", str(store))
    assert info["entries"] == total("neardup/unique", "neardup/items/unique")
    assert info["decisions_total"] == total("neardup/dropped", "neardup/items/dropped")
    assert info["revisits_unchanged"] == total(
        "neardup/revisit/unchanged", "neardup/items/revisit/unchanged"
    )
    assert info["revisits_changed"] == total(
        "neardup/revisit/changed", "neardup/items/revisit/changed"
    )
    report = cli("report", str(store))
    summary = report["summary"]
    assert isinstance(summary, dict)
    # the report counts pages: each URL once, however many crawls saw it
    assert (summary["unique"], summary["dropped"], summary["pages_seen"]) == (
        unique,
        copies,
        len(ARTICLES),
    )
    assert summary["revisits_unchanged"] == info["revisits_unchanged"]
    clusters = report["clusters"]
    assert isinstance(clusters, list)
    assert all(c["original"] != d["key"] for c in clusters for d in c["duplicates"])
