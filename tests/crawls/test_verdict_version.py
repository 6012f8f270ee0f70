"""A store keeps the verdict version it was made with (fingerprint/rule.py, ``VERDICTS``), on
real crawls against a loopback site, sqlite and Redis: a store made before version 2 (its rule
records no version) is crawled with version 1's wide fingerprints (of words), so its pages come
back ``unchanged`` and are judged as before; a new store is made and crawled with version 2's
(of word pairs)."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from nearduppipe import open_store
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
from nearduppipe.fingerprint.rule import Fingerprints, Rule

from ..support.server import serve_directory
from .test_changed_page_crawl import crawl

PAGES = 3


def story(n: int) -> str:
    rng = random.Random(n)
    letters = "abcdefghijklmnopqrstuvwxyz"
    # each page's own words: pages of one vocabulary would be near-duplicates of each other
    words = ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(300)]
    paragraphs = "".join(
        "<p>" + " ".join(" ".join(rng.choices(words, k=16)) + "." for _ in range(4)) + "</p>"
        for _ in range(5)
    )
    return (
        f"<html><head><title>Story {n}</title></head><body><div class='top'><a href='/'>Home"
        f"</a></div><article><h1>Story {n}</h1>{paragraphs}</article></body></html>"
    )


def site(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "site"
    root.mkdir()
    for n in range(PAGES):
        (root / f"a{n}.html").write_text(story(n), "utf-8")
    return root, [f"a{n}.html" for n in range(PAGES)]


def made(root: Path, base: str, verdict: int) -> dict[str, Fingerprints | None]:
    params = FingerprintParams(min_text_length=100, verdict=verdict)
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


def stored(store_uri: str, urls: list[str]) -> tuple[int, dict[str, Fingerprints | None]]:
    with open_store(store_uri, read_only=True) as store:
        fps = {u: e.fingerprints if (e := store.get(u)) is not None else None for u in urls}
        return store.rule.verdict, fps


def test_an_old_store_is_crawled_with_its_own_verdict_version(
    tmp_path: Path, store_uri: str
) -> None:
    with open_store(store_uri, rule=Rule(verdict=1)):
        pass  # what a release before verdict versions made: a rule without "verdict"
    assert "verdict" not in recorded_rule(store_uri)
    root, names = site(tmp_path)
    with serve_directory(root) as base:
        urls = [base + name for name in names]
        v1, v2 = made(root, base, 1), made(root, base, 2)
        assert all(v1[u] is not None and v1[u] != v2[u] for u in urls)  # the wide ones differ
        first = crawl(tmp_path, urls, store_uri, "first")
        assert first["stats"]["neardup/unique"] == PAGES  # type: ignore[index]
        assert stored(store_uri, urls) == (1, v1)
        second = crawl(tmp_path, urls, store_uri, "second")
        stats = second["stats"]
        assert stats.get("neardup/revisit/unchanged") == PAGES, stats  # type: ignore[union-attr]
        assert not stats.get("neardup/revisit/changed"), stats  # type: ignore[union-attr]
    assert "verdict" not in recorded_rule(store_uri)  # (still what older releases read)


def test_a_new_store_is_made_and_crawled_with_verdict_2(tmp_path: Path, store_uri: str) -> None:
    root, names = site(tmp_path)
    with serve_directory(root) as base:
        urls = [base + name for name in names]
        crawl(tmp_path, urls, store_uri, "first")
        assert stored(store_uri, urls) == (2, made(root, base, 2))
        second = crawl(tmp_path, urls, store_uri, "second")
        assert second["stats"].get("neardup/revisit/unchanged") == PAGES  # type: ignore[union-attr]
    assert recorded_rule(store_uri)["verdict"] == 2
