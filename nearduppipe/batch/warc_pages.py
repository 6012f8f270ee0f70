"""What both WARC readers make of a record, defined once so that they agree: warcio's
(:mod:`.warc`, the reference) and fastwarc's (:mod:`.warc_fast`, which must answer as warcio
does: tests/batch/test_warc_readers.py). Which responses are pages (:data:`HTML_TYPES`), the
kind the others are skipped as (:data:`NOT_HTML`), the item's key of the record's offset
(:data:`OFFSET`) and the charset a page is decoded with (:func:`declared_charset`). Here, not
in either reader, so that the fast path does not import the module that calls it.
"""

from __future__ import annotations

import codecs

__all__ = ["HTML_TYPES", "NOT_HTML", "OFFSET", "declared_charset"]

HTML_TYPES = ("text/html", "application/xhtml+xml")
OFFSET = "\0warc-offset"  # the record dict's key for the record's offset (no feed has it)
NOT_HTML = "response not HTML"


def declared_charset(content_type: str) -> str | None:
    """The ``charset=`` of a Content-Type, if Python knows that codec."""
    for part in content_type.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "charset":
            value = value.strip().strip("\"'")
            try:
                return codecs.lookup(value).name
            except LookupError:
                return None
    return None
