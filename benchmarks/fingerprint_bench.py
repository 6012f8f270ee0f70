"""Per-page CPU cost: fingerprinting a 3,000-character Chinese text vs trafilatura extraction of
the page's HTML, and vs jieba segmentation alone, measured side by side. Two pages carry the same
text: a realistic ~50 KB portal page, and the demo site's minimal template (a lower bound on
extraction cost, so the ratio there is an upper bound).

    python benchmarks/fingerprint_bench.py
"""

from __future__ import annotations

import logging
import random
import sys
from pathlib import Path

import jieba
import trafilatura
from _common import timed
from pages import article_paragraphs, portal_page

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nearduppipe import extract_text, features, fingerprint
from nearduppipe.fingerprint.simhash import fingerprints
from nearduppipe.fingerprint.tokenize import tokenize
from sample_spider.site_builder import template_a


def measure(name: str, html: str) -> None:
    text = extract_text(html)
    assert text is not None
    print(f"== {name}: {len(html.encode())} bytes of HTML, {len(text)} characters of main text")
    list(jieba.cut(text))  # load dictionaries before timing
    fingerprint(text)
    t_extract = timed(
        lambda: trafilatura.extract(html, include_comments=False, deduplicate=False), 30
    )
    t_fp = timed(lambda: fingerprint(text), 200)
    t_both = timed(lambda: fingerprints(text), 200)
    t_jieba = timed(lambda: list(jieba.cut(text)), 30)
    t_tokens = timed(lambda: tokenize(text), 200)
    t_feats = timed(lambda: features(text), 200)
    print(f"trafilatura.extract(html):      {t_extract * 1e3:7.2f} ms")
    print(f"jieba.cut(text) (pure Python):  {t_jieba * 1e3:7.2f} ms")
    print(f"tokenize(text) (rjieba):        {t_tokens * 1e3:7.2f} ms")
    print(f"features(text):                 {t_feats * 1e3:7.2f} ms")
    print(f"fingerprint(text) (64-bit only): {t_fp * 1e3:7.2f} ms")
    print(f"fingerprints(text) (64 + 512):  {t_both * 1e3:7.2f} ms")
    print(
        f"both fingerprints / extraction = {t_both / t_extract:.1%} (bar: <= 15%); "
        f"64-bit alone {t_fp / t_extract:.1%}; "
        f"fingerprint / jieba segmentation alone = {t_fp / t_jieba:.1%}"
    )


def main() -> None:
    jieba.setLogLevel(logging.WARNING)
    rng = random.Random(3)
    paragraphs = article_paragraphs(rng, 2900)
    measure("portal page (realistic chrome)", portal_page("测试页面", paragraphs, rng))
    measure("minimal page (demo-site template)", template_a("测试页面", "2026-11-22", paragraphs))


if __name__ == "__main__":
    main()
