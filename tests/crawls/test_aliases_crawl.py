"""NEARDUP_ALIASES on real crawls against a loopback site (sqlite and Redis): a page dropped
for a kept page stays as an alias of it, so a later copy of the dropped page, too far from the
kept page to be judged near it directly (but within the alias bound), is dropped for the kept
page; without aliases it is kept."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from nearduppipe import open_store
from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
from nearduppipe.fingerprint.rule import Rule, distances

from ..support.server import serve_directory
from .test_changed_page_crawl import WORDS, crawl, page


def edited(words: list[str], rng: random.Random, n: int, avoid: set[int]) -> list[str]:
    out = list(words)
    for i in rng.sample(sorted(set(range(len(words))) - avoid), n):
        out[i] = f"{rng.choice(WORDS)}{rng.randrange(100_000)}"
        avoid.add(i)
    return out


def chain(root: Path) -> list[str]:
    """Three pages a, b, c, each a few words from the one before: b near a, c near b but not
    near a, and within the alias bound of a (the fingerprints are checked, not assumed)."""
    params = FingerprintParams(min_text_length=100)
    rule = Rule(aliases=True)
    bound = rule.alias_threshold
    assert bound is not None
    for seed in range(200):
        rng = random.Random(seed)
        a = [f"{rng.choice(WORDS)}{rng.randrange(100_000)}" for _ in range(150)]
        used: set[int] = set()
        b = edited(a, rng, 5, used)
        c = edited(b, rng, 5, used)
        html = {name: page(" ".join(ws)) for name, ws in (("a", a), ("b", b), ("c", c))}
        fps = {
            n: fingerprint_html(h, f"https://x/{n}", params).fingerprints for n, h in html.items()
        }
        ab, bc, ac = (distances(fps[x], fps[y]) for x, y in ("ab", "bc", "ac"))  # type: ignore[arg-type]
        if (
            rule.is_near(*ab)
            and rule.is_near(*bc)
            and not rule.is_near(*ac)
            and (ac[1] or 0) <= bound
        ):
            for name, h in html.items():
                (root / f"{name}.html").write_text(h, encoding="utf-8")
            return ["a", "b", "c"]
    raise AssertionError("no chain of three pages found")  # (the search is deterministic)


@pytest.mark.parametrize("aliases", [True, False, None])
def test_a_copy_of_a_dropped_copy_is_dropped_for_the_page_kept(
    tmp_path: Path, store_uri: str, aliases: bool | None
) -> None:
    """``None``: the setting unset, the default for a new store (aliases on)."""
    site = tmp_path / "site"
    site.mkdir()
    chain(site)
    settings = {"NEARDUP_RESET": True} | ({} if aliases is None else {"NEARDUP_ALIASES": aliases})
    aliases = aliases is not False
    with serve_directory(site) as base:
        first = crawl(tmp_path, [base + "a.html"], store_uri, "a", **settings)
        assert first["stats"]["neardup/unique"] == 1  # type: ignore[index]
        settings.pop("NEARDUP_RESET")
        second = crawl(tmp_path, [base + "b.html"], store_uri, "b", **settings)
        assert second["stats"].get("neardup/dropped") == 1  # type: ignore[union-attr]
        third = crawl(tmp_path, [base + "c.html"], store_uri, "c", **settings)
        stats = third["stats"]
    with open_store(store_uri, read_only=True) as store:
        assert store.rule.aliases is aliases
        decisions = list(store.decisions())
        kept = sorted(e.key for e in store.entries())
    if aliases:
        assert stats.get("neardup/dropped") == 1, stats  # type: ignore[union-attr]
        assert [d.matched_key for d in decisions] == [base + "a.html"] * 2
        assert kept == [base + "a.html"]
    else:
        assert stats.get("neardup/unique") == 1, stats  # type: ignore[union-attr]
        assert kept == [base + "a.html", base + "c.html"]
