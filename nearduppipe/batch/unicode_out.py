"""Strings that UTF-8 cannot encode, on their way out of a batch: lone surrogates
(U+D800-U+DFFF), which a JSON feed may hold (Scrapy's JSON exporters write ``"\\udc80"`` for
one) and a Python string keeps, but no UTF-8 file can.

One rule for every output of ``dedup``, so that nothing is lost and no write fails on one:

- JSON (``-o`` JSON lines or JSON, ``--pairs`` JSON lines, a WARC record's locator): a
  record holding one is written with its non-ASCII characters escaped (:func:`json_text`),
  which reads back as the very same string; every other record as before.
- a text (a field of ``-o`` CSV or XML, a text the report shows): each lone surrogate becomes
  U+FFFD, by the store's own rule for its text samples (``stores/checks.py`` ``clean_text``), so
  a crawl's report shows them the same.
- a key naming a record (in the reports, in Parquet pairs): each lone surrogate written as
  JSON writes it, ``\\udc80`` (:func:`escape_surrogates`), so two keys stay two (U+FFFD would
  make ``x\\udc80`` and ``x\\udc81`` one name) and match what the JSON outputs hold.

Strings without one (nearly all) are returned as they are, after one check.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["encodable", "escape_surrogates", "json_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> bool:
    """Whether UTF-8 can encode ``text`` (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written ``\\udc80`` (six ASCII characters)."""
    if encodable(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def json_text(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``, or, when that holds a lone surrogate, with
    every non-ASCII character escaped: the same value read back, in a text UTF-8 encodes."""
    text = json.dumps(value, ensure_ascii=False)
    return text if encodable(text) else json.dumps(value, ensure_ascii=True)
