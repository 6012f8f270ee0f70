"""Tokenisation: rjieba is held to jieba's output; scripts, normalisation and punctuation."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import jieba
import pytest

from nearduppipe.fingerprint.tokenize import get_segmenter, normalise, tokenize

DATA = Path(__file__).parent / "data"
SENTENCES = [s for s in (DATA / "zh_sentences.txt").read_text("utf-8").splitlines() if s]
HAN_RUN = re.compile("[\u4e00-\u9fd5]+")


def test_rjieba_segments_exactly_like_jieba() -> None:
    jieba.setLogLevel(logging.WARNING)
    reference = jieba.Tokenizer()
    fast = get_segmenter("rjieba")
    runs = [run for s in SENTENCES for run in HAN_RUN.findall(s)]
    assert len(runs) > 100
    for run in runs:
        assert fast(run) == list(reference.cut(run)), run
    # and the whole pipeline agrees token for token
    for s in SENTENCES:
        assert tokenize(s, "rjieba") == tokenize(s, "jieba"), s


def test_one_call_for_all_runs_equals_one_call_per_run() -> None:
    fast = get_segmenter("rjieba")
    for s in SENTENCES:
        per_run: list[str] = []
        for m in re.finditer(r"([\u4e00-\u9fd5]+)|([^\W_\u4e00-\u9fd5]+)", normalise(s)):
            per_run.extend(fast(m.group(1)) if m.group(1) else [m.group(2)])
        assert tokenize(s) == per_run, s


def test_mixed_scripts_and_punctuation() -> None:
    tokens = tokenize("Scrapy 爬虫抓取网页, don't panic! 東京タワー 2024年")
    assert "scrapy" in tokens and "don't" in tokens and "panic" in tokens
    assert "爬虫" in tokens and "网页" in tokens
    assert "タワ" in tokens  # kana → character bigrams
    assert "2024" in tokens and "年" in tokens
    assert not any(t in {",", "!", " ", "'"} for t in tokens)


def test_normalisation_folds_width_and_case() -> None:
    assert normalise("ＳＣＲＡＰＹ Ｓｃｒａｐｙ") == "scrapy scrapy"
    assert tokenize("ＡＢＣ，ｄｅｆ") == ["abc", "def"]
    assert tokenize("Straße") == tokenize("STRASSE")


def test_empty_and_symbols() -> None:
    assert tokenize("") == []
    assert tokenize("!!! ... ,,, ——") == []


def test_unknown_segmenter() -> None:
    with pytest.raises(ValueError):
        get_segmenter("icu")  # type: ignore[arg-type]
