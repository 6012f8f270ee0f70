"""A store keeps the extraction version it was made with (fingerprint/versions.py), on real
crawls against a loopback site, sqlite and Redis: a resiliparse store made before version 2
(its rule records no version) is crawled with version 1, so its pages come back ``unchanged``
although version 2 extracts them to other texts; a new store is made and crawled with
the newest version (3). Likewise trafilatura's versions 1 and 2 (dialogs removed first)."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest

from nearduppipe import open_store
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
from nearduppipe.fingerprint.rule import Rule

from ..support.server import serve_directory
from .test_changed_page_crawl import crawl

PAGES = 3


@pytest.fixture
def fast_extra() -> None:
    pytest.importorskip("resiliparse")
    pytest.importorskip("selectolax")


def sentence(rng: random.Random, words: list[str]) -> str:
    tail = " ".join(rng.choice(words) for _ in range(6))
    return " ".join(rng.choice(words) for _ in range(14)).capitalize() + ", " + tail + "."


def story(n: int) -> str:
    """An article and, beside it, three teasers of prose: version 1 keeps the teasers, version
    2 takes the article's region alone, so the two versions' texts of each page differ."""
    rng = random.Random(n)
    letters = "abcdefghijklmnopqrstuvwxyz"
    # each page's own words: pages of one vocabulary would be near-duplicates of each other
    words = ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(300)]
    article = "".join(
        f"<p>{' '.join(sentence(rng, words) for _ in range(4))}</p>" for _ in range(5)
    )
    teasers = "".join(
        f"<div class='teaser'><h3>Also read</h3><div>{sentence(rng, words)} {sentence(rng, words)}</div></div>"
        for _ in range(3)
    )
    return (
        f"<html><head><title>Story {n} - Example News</title></head><body>"
        f"<div class='top'><a href='/'>Home</a> <a href='/w'>World</a></div>"
        f"<div class='main'><h1>Story {n}</h1><div class='body'>{article}</div></div>"
        f"<div class='more'>{teasers}</div></body></html>"
    )


def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    for n in range(PAGES):
        (root / f"a{n}.html").write_text(story(n), "utf-8")
    return root


def fingerprints(
    root: Path, base: str, extraction: int, extractor: str = "resiliparse"
) -> dict[str, object]:
    params = FingerprintParams(
        min_text_length=100,
        extractor=extractor,  # type: ignore[arg-type]
        extraction=extraction,
    )
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


@pytest.mark.usefixtures("fast_extra")
def test_an_old_store_is_crawled_with_its_own_version(tmp_path: Path, store_uri: str) -> None:
    with open_store(store_uri, rule=Rule(extractor="resiliparse", extraction=1)):
        pass  # what a release before versions made: a rule without "extraction"
    assert "extraction" not in recorded_rule(store_uri)
    root = site(tmp_path)
    with serve_directory(root) as base:
        urls = [base + f"a{n}.html" for n in range(PAGES)]
        v1, v2 = fingerprints(root, base, 1), fingerprints(root, base, 2)
        assert all(v1[u] != v2[u] for u in urls)  # the two versions' texts differ
        # (in worker processes: the store's version reaches them with their parameters)
        first = crawl(
            tmp_path,
            urls,
            store_uri,
            "first",
            NEARDUP_EXTRACTOR="resiliparse",
            NEARDUP_EXECUTOR="process",
        )
        assert first["stats"]["neardup/unique"] == PAGES  # type: ignore[index]
        with open_store(store_uri, read_only=True) as store:
            assert store.rule.extraction == 1
            assert {u: store.get(u).fingerprints for u in urls} == {u: v1[u] for u in urls}  # type: ignore[union-attr]
        second = crawl(tmp_path, urls, store_uri, "second", NEARDUP_EXTRACTOR="resiliparse")
        stats = second["stats"]
        assert stats.get("neardup/revisit/unchanged") == PAGES, stats  # type: ignore[union-attr]
        assert not stats.get("neardup/revisit/changed"), stats  # type: ignore[union-attr]
    assert "extraction" not in recorded_rule(store_uri)  # (still what older releases read)


@pytest.mark.usefixtures("fast_extra")
def test_a_new_store_is_made_and_crawled_with_the_newest_version(
    tmp_path: Path, store_uri: str
) -> None:
    root = site(tmp_path)
    with serve_directory(root) as base:
        urls = [base + f"a{n}.html" for n in range(PAGES)]
        crawl(tmp_path, urls, store_uri, "first", NEARDUP_EXTRACTOR="resiliparse")
        newest = fingerprints(root, base, 4)
        with open_store(store_uri, read_only=True) as store:
            assert store.rule.extraction == 4
            assert {u: store.get(u).fingerprints for u in urls} == newest  # type: ignore[union-attr]
        second = crawl(tmp_path, urls, store_uri, "second", NEARDUP_EXTRACTOR="resiliparse")
        assert second["stats"].get("neardup/revisit/unchanged") == PAGES  # type: ignore[union-attr]
    assert recorded_rule(store_uri)["extraction"] == 4


def dialog_story(n: int) -> str:
    """An article, and a staff letter in a modal dialog longer than it (as on eff.org):
    trafilatura's version 1 takes the letter, version 2 the article."""
    rng = random.Random(100 + n)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(300)]
    article = "".join(
        f"<p>{' '.join(sentence(rng, words) for _ in range(3))}</p>" for _ in range(3)
    )
    letter = "".join(f"<p>{' '.join(sentence(rng, words) for _ in range(4))}</p>" for _ in range(8))
    return (
        f"<html><head><title>Story {n}</title></head><body>"
        f"<div class='main'><h1>Story {n}</h1><div class='body'>{article}</div></div>"
        f"<div id='letter' class='modal fade' role='dialog'><div>{letter}</div></div>"
        "</body></html>"
    )


def test_trafilatura_stores_keep_their_version(tmp_path: Path, store_uri: str) -> None:
    """A store made before trafilatura's version 2 (no version recorded) is crawled with
    version 1: its pages come back ``unchanged`` although version 2 extracts other texts; a
    reset starts it on version 2, recorded."""
    root = tmp_path / "site"
    root.mkdir()
    for n in range(PAGES):
        (root / f"a{n}.html").write_text(dialog_story(n), "utf-8")
    with open_store(store_uri, rule=Rule(extraction=1)):
        pass  # what a release before trafilatura's version 2 made
    assert "extraction" not in recorded_rule(store_uri)
    with serve_directory(root) as base:
        urls = [base + f"a{n}.html" for n in range(PAGES)]
        v1 = fingerprints(root, base, 1, "trafilatura")
        v2 = fingerprints(root, base, 2, "trafilatura")
        assert all(v1[u] != v2[u] for u in urls)  # the two versions' texts differ
        crawl(tmp_path, urls, store_uri, "first")
        with open_store(store_uri, read_only=True) as store:
            assert store.rule.extraction == 1
            assert {u: store.get(u).fingerprints for u in urls} == v1  # type: ignore[union-attr]
        second = crawl(tmp_path, urls, store_uri, "second")
        assert second["stats"].get("neardup/revisit/unchanged") == PAGES, second["stats"]  # type: ignore[union-attr]
        crawl(tmp_path, urls, store_uri, "third", NEARDUP_RESET=True)
        with open_store(store_uri, read_only=True) as store:
            assert store.rule.extraction == 2
            assert {u: store.get(u).fingerprints for u in urls} == v2  # type: ignore[union-attr]
    assert recorded_rule(store_uri)["extraction"] == 2
