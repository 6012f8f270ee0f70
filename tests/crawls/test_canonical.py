"""``NEARDUP_CANONICAL = True`` (runtime/canonical.py): a page is keyed by the URL it declares
canonical, so a copy seen before its original and the original itself are not both exported,
and the store names the original. Real crawls of a site on loopback, both orders."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from nearduppipe import open_store
from nearduppipe.runtime.canonical import declared_key

from ..crawls.test_recrawl_frontier import crawl
from ..support.server import serve_directory

WORDS = "harbour river council budget school library market station bridge festival".split()
GROUPS = 6


def _site(root: Path) -> None:
    """``news/<i>.html`` (the originals), ``partner/<i>.html`` (the same article in another
    site's chrome, declaring the original in its head) and ``print/<i>.html`` (declaring it
    in an HTTP-style ``Link`` is not possible for static files: in its head too)."""
    rng = random.Random(11)
    for d in ("news", "partner", "print"):
        (root / d).mkdir()
    for i in range(GROUPS):
        text = " ".join(f"{rng.choice(WORDS)}{rng.randrange(10**5)}" for _ in range(200))
        body = f"<article><h1>Story {i}</h1><p>{text}</p></article>"
        (root / "news" / f"{i}.html").write_text(
            f"<html><head><title>Story {i}</title></head><body><nav>Home News</nav>{body}"
            "</body></html>"
        )
        for d, chrome in (("partner", "Partner Wire Markets"), ("print", "Print view")):
            (root / d / f"{i}.html").write_text(
                f"<html><head><link rel='canonical' href='../news/{i}.html'></head><body>"
                f"<nav>{chrome}</nav>{body}<footer>{chrome}</footer></body></html>"
            )


@pytest.mark.parametrize("copies_first", [True, False])
def test_a_copy_and_its_declared_original_are_exported_once(
    tmp_path: Path, copies_first: bool
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _site(site)
    store = str(tmp_path / "c.sqlite")
    settings = {"NEARDUP_STORE": store, "NEARDUP_EXECUTOR": "thread", "NEARDUP_CANONICAL": True}
    with serve_directory(site) as base:
        originals = [f"{base}news/{i}.html" for i in range(GROUPS)]
        copies = [f"{base}{d}/{i}.html" for i in range(GROUPS) for d in ("partner", "print")]
        order = copies + originals if copies_first else originals + copies
        settings["CONCURRENT_REQUESTS"] = 1  # (the order given is the order fetched)
        result = crawl(tmp_path, "canonical", order, settings)
    exported = [i["url"].removeprefix(base) for i in result["items"]]
    story = [u.split("/")[-1] for u in exported]
    assert sorted(story) == sorted(f"{i}.html" for i in range(GROUPS)), exported
    if not copies_first:  # the original came first: it is the one exported
        assert all(u.startswith("news/") for u in exported), exported
    with open_store(store, read_only=True) as s:  # the store names the originals
        assert sorted(e.key for e in s.entries()) == sorted(originals)
    stats = result["stats"]
    assert stats["neardup/canonical/keyed"] == 2 * GROUPS
    assert stats["neardup/canonical/dropped"] == 2 * GROUPS


def test_without_the_setting_the_first_seen_wins(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _site(site)
    store = str(tmp_path / "c.sqlite")
    settings = {"NEARDUP_STORE": store, "NEARDUP_EXECUTOR": "thread", "CONCURRENT_REQUESTS": 1}
    with serve_directory(site) as base:
        order = [f"{base}partner/{i}.html" for i in range(GROUPS)]
        order += [f"{base}news/{i}.html" for i in range(GROUPS)]
        result = crawl(tmp_path, "first", order, settings)
    assert all("/partner/" in i["url"] for i in result["items"])
    with open_store(store, read_only=True) as s:
        assert all("/partner/" in e.key for e in s.entries())


def test_what_a_page_may_declare() -> None:
    page = "https://www.example.com/a?utm=1"
    head = "<html><head><link rel='canonical' href='/a'></head></html>"
    assert declared_key(page, head, None, "global") == "https://www.example.com/a"
    header = '<https://www.example.com/b>; rel="canonical"'
    assert declared_key(page, head, header, "global") == "https://www.example.com/b"
    other = "<html><head><link rel='canonical' href='https://partner.org/a'></head></html>"
    assert declared_key(page, other, None, "global") == "https://partner.org/a"
    assert declared_key(page, other, None, "domain") is None  # another site: outside the scope
    sub = "<html><head><link rel='canonical' href='https://news.example.com/a'></head></html>"
    assert declared_key(page, sub, None, "domain") == "https://news.example.com/a"
    assert declared_key(page, sub, None, "host") is None
    itself = "<html><head><link rel='canonical' href='https://www.example.com/a?utm=1'></head>"
    assert declared_key(page, itself, None, "global") is None
    ftp = "<html><head><link rel='canonical' href='ftp://www.example.com/a'></head></html>"
    assert declared_key(page, ftp, None, "global") is None
