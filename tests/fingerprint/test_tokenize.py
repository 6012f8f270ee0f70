"""Tokenisation: rjieba is held to jieba's output; scripts, normalisation and punctuation."""

from __future__ import annotations

import logging
import random
import re
import unicodedata
from pathlib import Path

import jieba
import pytest

from nearduppipe.fingerprint.tokenize import (
    _ASCII_SEPARATORS,
    _MATCH_RE,
    _SPECIAL_RE,
    _plain_words,
    get_segmenter,
    normalise,
    tokenize,
)

DATA = Path(__file__).parents[1] / "data"
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


def test_fast_nfkc_replaces_only_by_compatibility_decompositions() -> None:
    # the premise of tokenize._nfkc: each character it replaces up front is replaced by its
    # own compatibility decomposition, which NFKC would have put in its place anyway
    for c in [*range(0xFF01, 0xFF5F), 0x3000]:
        expected = unicodedata.normalize("NFKD", chr(c))
        assert len(expected) == 1 and ord(expected) < 0x80, hex(c)
        assert normalise(chr(c)) == unicodedata.normalize("NFKC", chr(c)).casefold()


def test_normalise_equals_unicodedata_nfkc_casefold() -> None:
    # full-width forms next to what composes with or around them: combining marks (which
    # compose with the ASCII a full-width letter becomes), Hangul jamo, ligatures, compatibility
    # characters left for normalize(), lone surrogates, and text already normal
    pool = [
        *map(chr, range(0xFF00, 0xFF62)),
        "\u3000", "\u0301", "\u0308", "\u0327", "\u0323", "\u1100", "\u1161", "\u11a8",
        "\ufb01", "\u2460", "\u2026", "\u00bd", "\u212b", "\u1e9b", "\ud800", "\udfff",
        "a", "Z", "é", "İ", "ß", "中", "文", "。", "，", " ", "\n", "1",
    ]  # fmt: skip
    rng = random.Random(5)
    texts = [SENTENCES[0], "ＡＢＣ\u0301１２", "Ｅ\u0308\u0323ｘ"]
    texts += ["".join(rng.choice(pool) for _ in range(rng.randint(0, 30))) for _ in range(20000)]
    for text in texts:
        assert normalise(text) == unicodedata.normalize("NFKC", text).casefold(), ascii(text)


def test_plain_word_characters_are_what_the_regex_calls_word_characters() -> None:
    # the premises of tokenize._plain_words, over every code point: str.isalnum is the regex's
    # [^\W_]; no word character is white space (so split() never cuts inside a word); the ASCII
    # table keeps exactly the ASCII word characters and the apostrophe
    word = re.compile(r"[^\W_]")
    for code in range(0x110000):
        c = chr(code)
        assert c.isalnum() == bool(word.fullmatch(c)), hex(code)
        assert not (c.isalnum() and c.isspace()), hex(code)
    for b in range(0x80):
        kept = _ASCII_SEPARATORS[b] == b != 0x20
        assert kept == (chr(b).isalnum() or chr(b) == "'"), b
        assert kept or _ASCII_SEPARATORS[b] == 0x20, b


def test_plain_words_equal_the_regex_on_random_text() -> None:
    # texts without Han or no-space scripts (the ones _plain_words is used for) made of what
    # cuts or joins words: apostrophes in every position, ASCII and other punctuation, white
    # space of every kind, letters, digits and numerals of other scripts, combining marks,
    # connector punctuation, symbols, lone surrogates
    pool = [
        *"abcXYZ0189'''’’’ _-.,;:!?\"()[]{}/\\@#$%&*+=<>|~^`\t\n\r\x0b\x0c\x1c\x1f\x00\x7f",
        "é", "ß", "ü", "Ω", "ж", "ا", "ה", "ğ", "ǅ", "²", "½", "①", "٣", "ⅷ", "\u0301",
        "\u0308", "\u200d", "\u00a0", "\u2028", "\u3000", "\u2009", "“", "”", "—", "…", "«",
        "»", "‿", "€", "😀", "\ud800", "\udfff", "\ufeff", "ʼ", "‘", "`", "´", "क", "ा", "ि", "।", "\u064e", "،",
    ]  # fmt: skip
    rng = random.Random(11)
    texts = ["don't rock’n’roll 'tis o''brien ’90s x'y'z a'’b", "", "'", "’", "a'", "'a"]
    texts += ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(30000)]
    texts += [" ".join(rng.choice(texts) for _ in range(50)) for _ in range(200)]
    for text in texts:
        assert not _SPECIAL_RE.search(text)
        assert _plain_words(text) == _MATCH_RE.findall(text), ascii(text)
