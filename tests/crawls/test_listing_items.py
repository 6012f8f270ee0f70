"""One item, one key (a real site on loopback, the add-on's defaults): a listing spider whose
items all carry their page's URL gets every item checked on its own (runtime/items.py), and the
stop-on-seen recipe stops paginating at the first page whose items the store has all seen."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..crawls.test_recrawl_frontier import crawl
from ..support.listing_site import (
    COPIES,
    DISTINCT,
    PAGES,
    PER_PAGE,
    build_copies,
    build_feed,
    build_overlapping,
)
from ..support.redis_server import RedisServer
from ..support.server import serve_directory


def _store(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> str:
    if backend == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        prefix = f"listing{id(tmp_path)}"
        return server.url + ("&" if "?" in server.url else "?") + f"prefix={prefix}"
    return str(tmp_path / "store.sqlite")


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_items_sharing_their_page_url_are_each_checked(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    group = build_copies(site)
    settings = {"NEARDUP_STORE": _store(tmp_path, backend, request), "NEARDUP_EXECUTOR": "thread"}
    with serve_directory(site) as base:
        first = crawl(tmp_path, "first", base + "page1.html", {**settings}, item="listing")
        again = crawl(tmp_path, "again", base + "page1.html", {**settings}, item="listing")
    assert len(first["reached"]) == PAGES  # no listing page read as a copy of another
    kept = [group[i["text"]] for i in first["items"]]
    # every group (a distinct item and its copies) kept: no distinct item dropped ...
    assert set(kept) == set(range(DISTINCT))
    # ... and at most one copy kept beside its original (the issue allows 1 of 95)
    assert len(kept) - DISTINCT <= 1, len(kept)
    dropped = first["stats"].get("neardup/items/dropped", 0)
    assert dropped >= COPIES - 1 and dropped + len(kept) == PAGES * PER_PAGE
    # each item had a key of its own: none hid behind its page's key as "again"
    assert first["stats"].get("neardup/items/again", 0) == 0
    # the second crawl: every page unchanged, so no item is exported
    assert len(again["reached"]) == PAGES and again["items"] == []


def test_stop_on_seen_stops_at_the_first_page_of_seen_items(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    settings = {"NEARDUP_STORE": str(tmp_path / "store.sqlite"), "NEARDUP_EXECUTOR": "thread"}
    with serve_directory(site) as base:
        build_feed(site, 40, 8)
        first = crawl(tmp_path, "first", base + "page1.html", settings, item="stop_on_seen")
        assert len(first["reached"]) == 8 and len(first["items"]) == 40
        texts = build_feed(site, 43, 9)  # 3 new items on top: every older item moves down
        second = crawl(tmp_path, "second", base + "page1.html", settings, item="stop_on_seen")
    # page 1 has the 3 new items, page 2 only items seen before (moved from page 1): stop there
    assert [u.removeprefix(base) for u in second["reached"]] == ["page1.html", "page2.html"]
    assert sorted(i["text"] for i in second["items"]) == sorted(texts[:3])
    assert second["stats"]["neardup/lookups"] == 10


@pytest.mark.parametrize("short", [False, True])
def test_the_readmes_recipe_stops_at_the_first_page_of_seen_items(
    tmp_path: Path, short: bool
) -> None:
    """The README's stop-paginating recipe, as written: the first crawl ends cleanly on the
    last page (before: ``ValueError: url can't be None``), the second stops at the first page
    of items seen, also when they are under the minimum text length (before: each was skipped
    as too short, never "seen", so pagination never stopped)."""
    site = tmp_path / "site"
    site.mkdir()
    settings = {"NEARDUP_STORE": str(tmp_path / "store.sqlite"), "NEARDUP_EXECUTOR": "thread"}
    with serve_directory(site) as base:
        build_feed(site, 40, 8, short=short)
        first = crawl(tmp_path, "first", base + "page1.html", settings, item="readme")
        assert first["stats"]["response_received_count"] == 8 and len(first["items"]) == 40
        assert first["stats"]["finish_reason"] == "finished"
        texts = build_feed(site, 43, 9, short=short)  # 3 new items on top
        second = crawl(tmp_path, "second", base + "page1.html", settings, item="readme")
    assert [u.removeprefix(base) for u in second["fetched"]] == ["page1.html", "page2.html"]
    assert sorted(i["text"] for i in second["items"]) == sorted(texts[:3])
    assert second["stats"]["neardup/items/exact" if short else "neardup/items/unique"] >= 3


def test_an_item_carrying_its_pages_html_is_not_extracted_again(tmp_path: Path) -> None:
    """The add-on's pipeline takes the page's fingerprints for an item whose HTML field is the
    response's HTML (one extraction per page, not two); the verdicts stay those of the page."""
    from ..support.recrawl_site import OLD, build

    site = tmp_path / "site"
    site.mkdir()
    build(site, 1)
    settings = {"NEARDUP_STORE": str(tmp_path / "s.sqlite"), "NEARDUP_EXECUTOR": "thread"}
    with serve_directory(site) as base:
        result = crawl(tmp_path, "html", base + "index.html", settings, item="html")
    stats = result["stats"]
    assert len(result["items"]) == OLD  # every article's item kept: it is its page
    assert stats["neardup/items/from_page"] == OLD == stats["neardup/items/again"]
    assert stats["neardup/items/checked"] == OLD


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_items_carrying_their_own_url_pass_once(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """docs/verdicts.md: an item checked ``again`` (its key was checked earlier in this crawl)
    passed the first time and is dropped now. Before, each repeat passed as ``again``: 100
    items exported for 36 distinct ones."""
    site = tmp_path / "site"
    site.mkdir()
    urls = build_overlapping(site)
    settings = {"NEARDUP_STORE": _store(tmp_path, backend, request), "NEARDUP_EXECUTOR": "thread"}
    with serve_directory(site) as base:
        result = crawl(tmp_path, "own", base + "page1.html", settings, item="own_url")
    exported = [i["url"].removeprefix(base) for i in result["items"]]
    assert sorted(exported) == sorted(urls)  # each item exactly once
    stats = result["stats"]
    yielded = stats["item_scraped_count"] + stats.get("item_dropped_count", 0)
    assert yielded > 2 * len(urls)  # (the site repeats most items)
    assert stats["neardup/items/again/dropped"] == yielded - len(urls)


def test_mark_mode_items_carry_their_pages_verdict_and_marked_copies_are_not_stored(
    tmp_path: Path,
) -> None:
    """With ``NEARDUP_ON_DUPLICATE = "mark"``, an item keyed by its page's URL whose text is
    the article's paragraphs (not the page's main text) carries its response's verdict, and
    no item of a page marked as a copy is stored. Before, such items said ``new`` where the
    response said ``duplicate``, and were stored as new."""
    from nearduppipe import open_store
    from sample_spider.site_builder import DISTINCT, GROUPS, build_site

    site = tmp_path / "site"
    build_site(site)
    store = str(tmp_path / "mark.sqlite")
    settings = {
        "NEARDUP_STORE": store,
        "NEARDUP_EXECUTOR": "thread",
        "NEARDUP_ON_DUPLICATE": "mark",
        "NEARDUP_VERDICT_FIELD": "neardup",
    }
    pages = [p for g in GROUPS for p in g] + DISTINCT
    with serve_directory(site) as base:
        result = crawl(tmp_path, "mark", [base + p for p in pages], settings, item="text_status")
    items = result["items"]
    assert {base + p for p in pages} <= {i["url"] for i in items}  # mark drops nothing
    marked = [i["url"] for i in items if i["page_status"] == "duplicate"]
    assert all(i["neardup"]["status"] == "duplicate" for i in items if i["url"] in marked)
    assert len(marked) >= sum(len(g) - 1 for g in GROUPS)
    with open_store(store, read_only=True) as s:
        stored = [e.key for e in s.entries()]
    assert not [k for k in stored if any(k.startswith(url) for url in marked)], stored
    assert len(stored) >= len(GROUPS) + len(DISTINCT)


def test_a_page_fetched_twice_by_a_recrawl_exports_nothing(tmp_path: Path) -> None:
    """A recrawl that requests an unchanged page twice (start URLs are not filtered; a shared
    scrapy-redis queue holds every crawler's): the first response is ``unchanged`` and its item
    is dropped, the second is ``again`` and its item is a repeat, dropped too. Before, the
    second one's item was taken for a marked copy's and exported unchecked (three crawlers
    on one scrapy-redis queue exported an article twice)."""
    site = tmp_path / "site"
    site.mkdir()
    text = " ".join(f"harbour{i} council{i * 7} budget{i * 13}" for i in range(60))
    (site / "a.html").write_text(
        f"<html><body><article><p>{text}</p></article></body></html>", encoding="utf-8"
    )
    settings = {
        "NEARDUP_STORE": str(tmp_path / "store.sqlite"),
        "NEARDUP_EXECUTOR": "thread",
        "CONCURRENT_REQUESTS": 1,  # (the first response judged before the second)
    }
    with serve_directory(site) as base:
        first = crawl(tmp_path, "first", base + "a.html", settings)
        again = crawl(tmp_path, "again", [base + "a.html"] * 2, settings)
    assert [i["url"] for i in first["items"]] == [base + "a.html"]
    stats = again["stats"]
    assert stats["neardup/revisit/unchanged"] == 1 and stats["neardup/again"] == 1, stats
    assert again["items"] == [], again["items"]
    assert stats["neardup/items/again/dropped"] == 1, stats
