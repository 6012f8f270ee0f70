"""A store keeps the extraction version it was made with (fingerprint/versions.py), on real
crawls against a loopback site, sqlite and Redis: a store made before version 2 (its rule
records no version) is crawled with version 1, so its pages come back ``unchanged`` although
version 2 extracts them to other texts; a new store is made and crawled with version 2."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from nearduppipe import open_store
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
from nearduppipe.fingerprint.rule import Rule

from ..fingerprint.test_blocks import RELATED_ZH, ZH, ZH_MORE, article
from ..support.server import serve_directory
from .test_changed_page_crawl import crawl

PAGES = 3


def site(tmp_path: Path) -> Path:
    """Chinese articles whose containers hold a related-news list: version 1 keeps the list,
    version 2 drops it, so the two versions' fingerprints of each page differ."""
    root = tmp_path / "site"
    root.mkdir()
    for n, paragraphs in enumerate([ZH, *ZH_MORE]):
        (root / f"a{n}.html").write_text(article(paragraphs, RELATED_ZH, "评论"), "utf-8")
    return root


def fingerprints(root: Path, base: str, extraction: int) -> dict[str, object]:
    params = FingerprintParams(min_text_length=100, extraction=extraction)
    return {
        base + p.name: fingerprint_html(p.read_bytes(), base + p.name, params).fingerprints
        for p in sorted(root.glob("*.html"))
    }


def recorded_rule(store: str) -> dict[str, object]:
    if store.startswith("redis"):
        import redis

        parts = urlsplit(store)
        query = parse_qs(parts.query)
        prefix = query.pop("prefix")[0]
        url = urlunsplit(parts._replace(query=urlencode(query, doseq=True)))
        raw = redis.Redis.from_url(url).hget("{" + prefix + "}:meta", "rule")
        assert raw is not None
        return dict(json.loads(raw))
    with sqlite3.connect(store) as db:
        [(value,)] = db.execute("SELECT value FROM neardup WHERE key = 'm:rule'").fetchall()
    return dict(json.loads(value))


def test_an_old_store_is_crawled_with_its_own_version(tmp_path: Path, store_uri: str) -> None:
    with open_store(store_uri, rule=Rule(extraction=1)):
        pass  # what a release before versions made: a rule without "extraction"
    assert "extraction" not in recorded_rule(store_uri)
    root = site(tmp_path)
    with serve_directory(root) as base:
        urls = [base + f"a{n}.html" for n in range(PAGES)]
        v1, v2 = fingerprints(root, base, 1), fingerprints(root, base, 2)
        assert all(v1[u] != v2[u] for u in urls)  # the two versions' texts differ
        first = crawl(tmp_path, urls, store_uri, "first")
        assert first["stats"]["neardup/unique"] == PAGES  # type: ignore[index]
        with open_store(store_uri, read_only=True) as store:
            assert store.rule.extraction == 1
            assert {u: store.get(u).fingerprints for u in urls} == {u: v1[u] for u in urls}  # type: ignore[union-attr]
        second = crawl(tmp_path, urls, store_uri, "second")
        stats = second["stats"]
        assert stats.get("neardup/revisit/unchanged") == PAGES, stats  # type: ignore[union-attr]
        assert not stats.get("neardup/revisit/changed"), stats  # type: ignore[union-attr]
    assert "extraction" not in recorded_rule(store_uri)  # (still what older releases read)


def test_a_new_store_is_made_and_crawled_with_the_newest_version(
    tmp_path: Path, store_uri: str
) -> None:
    root = site(tmp_path)
    with serve_directory(root) as base:
        urls = [base + f"a{n}.html" for n in range(PAGES)]
        crawl(tmp_path, urls, store_uri, "first")
        v2 = fingerprints(root, base, 2)
        with open_store(store_uri, read_only=True) as store:
            assert store.rule.extraction == 2
            assert {u: store.get(u).fingerprints for u in urls} == v2  # type: ignore[union-attr]
    assert recorded_rule(store_uri)["extraction"] == 2
