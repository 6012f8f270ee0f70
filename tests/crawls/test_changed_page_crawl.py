"""A page whose text changed between two crawls, beyond the near-duplicate threshold, on real
crawls against a loopback site (sqlite and Redis): the second crawl keeps it and its entry takes
the new fingerprint, so a third crawl drops a copy of the new text against it and keeps a copy of
the old text."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from nearduppipe import open_store
from nearduppipe.fingerprint.simhash import fingerprints
from nearduppipe.fingerprint.text import extract_text

from ..support.crawl_settings import ON_THREADS
from ..support.server import serve_directory

ROOT = Path(__file__).resolve().parents[2]
WORDS = (
    "harbour river council budget school library market station bridge festival museum garden "
    "railway hospital theatre election weather forecast storm harvest ferry tunnel stadium"
).split()


def article(rng: random.Random, words: int = 120) -> str:
    return " ".join(f"{rng.choice(WORDS)}{rng.randrange(100_000)}" for _ in range(words))


def page(text: str, chrome: str = "Home | News") -> str:
    return f"<html><body><nav>{chrome}</nav><article><p>{text}</p></article></body></html>"


def crawl(
    tmp_path: Path, urls: list[str], store: str, name: str, **settings: object
) -> dict[str, object]:
    config = tmp_path / f"{name}.json"
    output = tmp_path / f"{name}.out.json"
    config.write_text(
        json.dumps(
            {
                "start_urls": urls,
                "output": str(output),
                "settings": {
                    "DOWNLOADER_MIDDLEWARES": {"nearduppipe.middlewares.NearDupMiddleware": 543},
                    "NEARDUP_STORE": store,
                    "NEARDUP_MIN_TEXT_LENGTH": 100,
                    "CONCURRENT_REQUESTS": 1,
                    "LOG_LEVEL": "WARNING",
                    **ON_THREADS,
                    **settings,
                },
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.crawl", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, object] = json.loads(output.read_text())
    return result


def test_a_changed_page_replaces_its_entry(tmp_path: Path, store_uri: str) -> None:
    rng = random.Random(5)
    old, new, other = article(rng), article(rng), article(rng)
    site = tmp_path / "site"
    site.mkdir()
    (site / "story.html").write_text(page(old), encoding="utf-8")
    (site / "other.html").write_text(page(other), encoding="utf-8")
    with serve_directory(site) as base:
        story = base + "story.html"
        first = crawl(tmp_path, [story, base + "other.html"], store_uri, "first")
        assert first["stats"]["neardup/unique"] == 2  # type: ignore[index]

        (site / "story.html").write_text(page(new), encoding="utf-8")  # rewritten
        second = crawl(tmp_path, [story], store_uri, "second")
        stats = second["stats"]
        assert stats.get("neardup/revisit/changed") == 1, stats  # type: ignore[union-attr]
        assert story in second["reached"]  # type: ignore[operator]  # kept
        with open_store(store_uri, read_only=True) as store:
            entry = store.get(story)
            assert entry is not None
            want = fingerprints(extract_text(page(new).encode(), story) or "")
            assert entry.fingerprint == want.fp  # the entry holds the new fingerprint
            assert len(store) == 2

        # copies on new URLs, with other page chrome
        (site / "copy-new.html").write_text(page(new, "Start | Login"), encoding="utf-8")
        (site / "copy-old.html").write_text(page(old, "Start | Login"), encoding="utf-8")
        third = crawl(tmp_path, [base + "copy-new.html", base + "copy-old.html"], store_uri, "3")
    reached = third["reached"]
    assert base + "copy-old.html" in reached  # type: ignore[operator]  # the old text is gone
    assert base + "copy-new.html" not in reached  # type: ignore[operator]
    stats = third["stats"]
    assert stats.get("neardup/dropped") == 1 and stats.get("neardup/unique") == 1, stats  # type: ignore[union-attr]
    with open_store(store_uri, read_only=True) as store:
        [decision] = [d for d in store.decisions() if d.key == base + "copy-new.html"]
        assert decision.matched_key == story
