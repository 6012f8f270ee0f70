"""Text → tokens: jieba segmentation for Chinese runs, word tokens for other scripts.

The text is NFKC-normalised and case-folded first, so full-width and half-width forms and upper
and lower case give the same features. It is then split into runs by script:

* Han runs (jieba's own range, U+4E00..U+9FD5) go to the segmenter. The default is ``rjieba``
  (jieba-rs), whose output on Han-only runs is identical to ``jieba.cut`` at ~25x the speed; the
  tests hold it to that on a corpus of real sentences. ``segmenter="jieba"`` uses jieba itself.
* Runs of scripts written without spaces that jieba does not segment (kana, Thai, Lao, Khmer,
  Myanmar) become overlapping character bigrams, a standard language-agnostic substitute.
* Everything else becomes word tokens (letters and digits, with inner apostrophes).

Punctuation and white space never become tokens.

:func:`token_counts` gives ``Counter(tokenize(text))`` (the same counts, in the same order)
without a Python step per token; the default pipeline uses it (see ``features.term_counts``).
"""

from __future__ import annotations

import functools
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Literal

import numpy as np

__all__ = ["Segmenter", "get_segmenter", "normalise", "token_counts", "tokenize"]

Segmenter = Literal["rjieba", "jieba", "chars", "bigrams"]

_HAN = "\u4e00-\u9fd5"  # jieba's re_han_default Han range: keep identical to jieba
_NOSPACE = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff"
_WORD = rf"[^\W_{_HAN}{_NOSPACE}]+(?:['’][^\W_{_HAN}{_NOSPACE}]+)*"
_TOKEN_RE = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<nospace>[{_NOSPACE}]+)|(?P<word>{_WORD})")
# The same tokens, except that Han runs with no token between them (only punctuation or space:
# characters no token contains) are matched as one group: a Chinese page has a handful of
# groups where it has hundreds of runs, and each group is segmented with one call.
_NOT_TOKEN = rf"(?:[^\w{_NOSPACE}]|_)"
_HAN_GROUP = rf"[{_HAN}]+(?:{_NOT_TOKEN}+[{_HAN}]+)*"
_MATCH_RE = re.compile(rf"{_WORD}|{_HAN_GROUP}|[{_NOSPACE}]+")  # first characters are disjoint
_SPECIAL_RE = re.compile(rf"[{_HAN}{_NOSPACE}]")
_NOSPACE_RE = re.compile(rf"[{_NOSPACE}]")
_HAN_RE = re.compile(rf"[{_HAN}]+")


def normalise(text: str) -> str:
    """NFKC + case-fold: the form every feature is taken from."""
    return _nfkc(text).casefold()


_FULLWIDTH = np.uint32(0xFF01)  # U+FF01..U+FF5E: the full-width forms of U+0021..U+007E
_FULLWIDTH_SPAN = np.uint32(0xFF5E - 0xFF01)
_FULLWIDTH_SHIFT = np.uint32(0xFF01 - 0x21)


def _nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, ten times faster on Chinese text.

    Chinese text is rarely NFKC-normal, for its full-width punctuation, digits and letters
    (，：１Ａ) and ideographic space, and ``normalize`` then takes ~80 ns per character. NFKC
    starts by replacing every character with its compatibility decomposition, so replacing
    any character with that decomposition beforehand changes nothing in the result. These
    characters' decompositions are single ASCII characters (U+FF01..U+FF5E -> U+0021..U+007E,
    U+3000 -> U+0020; tests/fingerprint/test_tokenize.py checks both, and the whole against
    ``normalize``): they are replaced as one numpy operation over the code points, and
    ``normalize`` runs only if what is left is still not NFKC-normal."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    wide = (points - _FULLWIDTH) <= _FULLWIDTH_SPAN  # (unsigned: below U+FF01 wraps around)
    out = np.where(wide, points - _FULLWIDTH_SHIFT, points)
    out[points == 0x3000] = 0x20
    text = out.tobytes().decode("utf-32-le", "surrogatepass")
    if unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", text)


@functools.cache
def get_segmenter(name: Segmenter = "rjieba") -> Callable[[str], list[str]]:
    """A function cutting a Han-only run into words, loaded once per process."""
    if name == "rjieba":
        import rjieba

        cut: Callable[[str], list[str]] = rjieba.cut
        return cut
    if name == "jieba":
        import jieba

        # jieba logs its dictionary loading to stderr at DEBUG through its own handler.
        jieba.setLogLevel(logging.WARNING)
        tokenizer = jieba.Tokenizer()

        def jieba_cut(run: str) -> list[str]:
            return list(tokenizer.cut(run))

        return jieba_cut
    if name in ("chars", "bigrams"):
        # Not word segmentation: Han characters or overlapping character pairs as features (a
        # newline between runs still separates them, as tokenize() expects).
        def by_chars(run: str) -> list[str]:
            out: list[str] = []
            for part in run.split("\n"):
                out.extend(part if name == "chars" else _bigrams(part))
                out.append("\n")
            return out[:-1]

        return by_chars
    raise ValueError(f"unknown segmenter {name!r}: use 'rjieba', 'jieba', 'chars' or 'bigrams'")


def _bigrams(run: str) -> Iterator[str]:
    if not run:
        return
    if len(run) == 1:
        yield run
        return
    for i in range(len(run) - 1):
        yield run[i : i + 2]


def tokenize(text: str, segmenter: Segmenter = "rjieba", *, normalised: bool = False) -> list[str]:
    """Tokens of ``text`` in order. Pass ``normalised=True`` if :func:`normalise` was applied."""
    if not normalised:
        text = normalise(text)
    pieces: list[str | None] = []  # None marks the place of the next Han run
    han_runs: list[str] = []
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "word":
            pieces.append(m.group())
        elif kind == "han":
            han_runs.append(m.group())
            pieces.append(None)
        else:
            pieces.extend(_bigrams(m.group()))
    if not han_runs:
        return pieces  # type: ignore[return-value]
    # One segmenter call for all runs: a newline is a hard boundary for jieba, so each run is
    # cut exactly as on its own, without ~1 us of call overhead per run.
    cut = get_segmenter(segmenter)("\n".join(han_runs))
    tokens: list[str] = []
    run_tokens = iter(cut)
    for piece in pieces:
        if piece is not None:
            tokens.append(piece)
            continue
        for token in run_tokens:
            if token == "\n":
                break
            tokens.append(token)
    return tokens


# ASCII bytes that no word contains (all but letters, digits and the apostrophe) -> space; the
# other bytes (UTF-8 sequences of non-ASCII characters) are kept
_ASCII_SEPARATORS = bytes(
    b if chr(b).isalnum() or b == 0x27 or b >= 0x80 else 0x20 for b in range(256)
)
_APOSTROPHE_RE = re.compile("['’]")


def _plain_words(text: str) -> list[str]:
    r"""``_MATCH_RE.findall(text)`` for a text without Han or no-space scripts.

    Such a text's tokens are its maximal runs of word characters (``str.isalnum``: the
    regex's ``[^\W_]``) and of apostrophes with a word character on either side. So the other
    characters are made spaces (each distinct non-ASCII one by ``str.replace``, found with
    numpy; the ASCII ones by one ``bytes.translate``; the apostrophes that join nothing one by
    one) and the tokens are what ``split`` leaves: in Latin, Cyrillic, Greek, Arabic or
    Devanagari text, 2-3x faster than the regex. tests/fingerprint/test_tokenize.py and
    tests/fingerprint/test_fingerprint_identity.py hold it to the regex."""
    if not text.isascii():  # the distinct non-ASCII characters, by numpy over the code points
        points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        for code in np.unique(points[points > 0x7F]).tolist():
            char = chr(code)
            if not char.isalnum() and char != "’":
                text = text.replace(char, " ")
    data = text.encode("utf-8", "surrogatepass").translate(_ASCII_SEPARATORS)
    text = data.decode("utf-8", "surrogatepass")
    if "'" in text or "’" in text:
        last = len(text) - 1
        cut = [
            p
            for m in _APOSTROPHE_RE.finditer(text)
            if not (0 < (p := m.start()) < last and text[p - 1].isalnum() and text[p + 1].isalnum())
        ]
        if cut:
            pieces = [text[a + 1 : b] for a, b in zip([-1, *cut], [*cut, len(text)], strict=True)]
            text = " ".join(pieces)
    return text.split()


def token_counts(
    text: str, segmenter: Segmenter = "rjieba", *, normalised: bool = False
) -> Counter[str]:
    """``Counter(tokenize(text, segmenter))``, the same counts in the same order (of first
    occurrence), built without a Python step per token: the tokens are fed to the counter
    straight from the regex and the segmenter's lists, and the segmenter's run separators
    (``"\\n"``, which no token is) are taken out of the counts at the end."""
    if not normalised:
        text = normalise(text)
    if not _SPECIAL_RE.search(text):  # no Han, no no-space script: every token is a word
        return Counter(_plain_words(text))
    found = _MATCH_RE.findall(text)
    # the words between Han groups and no-space runs as slices of the matches, each group as
    # the segmenter's tokens of its runs, each run as its bigrams: one stream to the counter
    parts: list[Iterable[str]] = []
    cut: Callable[[str], list[str]] | None = None
    start = 0
    for i, match in enumerate(found):  # a Chinese page has a handful of matches but words
        first = match[0]
        if first < "\u0e00":  # a word in a Latin, Greek, Cyrillic, Arabic... script
            continue
        if "\u4e00" <= first <= "\u9fd5":
            cut = cut or get_segmenter(segmenter)
            parts.append(found[start:i])
            parts.append(cut("\n".join(_HAN_RE.findall(match))))
        elif _NOSPACE_RE.match(first):
            parts.append(found[start:i])
            parts.append(_bigrams(match))
        else:
            continue
        start = i + 1
    parts.append(found[start:])
    counts = Counter(chain.from_iterable(parts))
    counts.pop("\n", None)
    return counts
