"""``fingerprint`` and ``explain``: commands over single texts and pages."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from ..fingerprint.rule import WIDE_BITS, Fingerprints, Rule, distances, implied_similarity
from ..fingerprint.text import TextLimits
from ..stores import Store
from ..stores.scope import scope_of, unmask
from ._io import CliError, bounded_int, clean, emit, say
from ._stores import add_rule_args, open_cli_store, rule_from_args

CRAWL_MIN_TEXT_LENGTH = 200  # NEARDUP_MIN_TEXT_LENGTH's default
MAX_BYTES = TextLimits().max_html_bytes  # NEARDUP_MAX_HTML_BYTES's default: 5,000,000

# A document that starts (after a BOM, white space and comments) with a doctype or an HTML tag.
_HTML_START = re.compile(
    rb"^(?:\xef\xbb\xbf)?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|meta|title|div|p|article|section|main|table|span|h[1-6]|a|ul|nav|header)\b",
    re.I | re.S,
)
_HTML_SUFFIXES = {".html", ".htm", ".xhtml", ".shtml"}
# An argument that names a file rather than holding a text: one word with a path separator or
# a file extension, and no URL scheme.
_PATHLIKE = re.compile(r"^(?!\w+://)[^\s]{1,4096}$")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,5}$")


def looks_like_html(data: bytes, name: str = "") -> bool:
    return Path(name).suffix.lower() in _HTML_SUFFIXES or bool(_HTML_START.match(data[:4096]))


def _read_file(label: str, name: str, limit: int = MAX_BYTES) -> bytes:
    """The file's bytes (``-``: standard input), at most ``limit``: a larger input (a device,
    a FIFO, a stream without end) is refused once ``limit`` bytes are read, not read to the
    end."""
    try:
        if name == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with Path(name).open("rb") as f:
                data = f.read(limit + 1)
        if len(data) > limit:
            raise CliError(
                f"{label} {name}: more than {limit:,} bytes (--max-bytes; a crawl refuses pages "
                "over NEARDUP_MAX_HTML_BYTES); not read further"
            )
        return data
    except FileNotFoundError:
        raise CliError(f"{label} {name}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{label} {name}: is a directory") from None
    except OSError as e:
        raise CliError(f"{label} {name}: cannot read: {e.strerror or e}") from None


def cmd_fingerprint(args: argparse.Namespace) -> int:
    from ..fingerprint.page import FingerprintParams, fingerprint_html, fingerprint_text

    data = _read_file("FILE", args.file, args.max_bytes)
    params = FingerprintParams(min_text_length=args.min_text_length)
    html = args.html or (not args.text and looks_like_html(data, args.file))
    if html:
        result = fingerprint_html(data, None, params)
    else:
        result = fingerprint_text(data.decode("utf-8", errors="replace"), params)
    if result.fingerprint is None:
        reason = result.skipped or "no_text"
        detail = (
            f": {result.text_length} characters < --min-text-length {args.min_text_length}"
            if reason == "too_short"
            else ""
        )
        say(
            f"nearduppipe fingerprint: no fingerprint ({reason}{detail}; "
            f"read as {'HTML' if html else 'text'})"
        )
        return 1
    emit(f"{result.fingerprint:016x}\n")
    return 0


def _looks_like_path(value: str) -> bool:
    return bool(_PATHLIKE.match(value)) and (
        "/" in value or "\\" in value or bool(_EXTENSION.search(value))
    )


def _text_of(label: str, value: str, store: Store | None, as_text: bool) -> str | Fingerprints:
    """A file's text (HTML extracted), a store key's kept text or fingerprint, or, with
    ``--text``, the argument itself."""
    from ..fingerprint.text import extract_text, require_extractor

    if as_text:
        return value
    if store is not None:
        scope = store.rule.scope  # (fingerprints are kept masked by their scope: stores/scope.py)
        entry = store.get(value) if value else None
        if entry is not None:
            return (
                entry.text if entry.text is not None else unmask(entry.fingerprints, value, scope)
            )
        for decision in store.decisions():
            if decision.key == value:
                return (
                    decision.text
                    if decision.text is not None
                    else unmask(Fingerprints(decision.fingerprint), value, scope)
                )
    path = Path(value)
    if _looks_like_path(value) and path.is_file():
        data = _read_file(label, value)
        if looks_like_html(data, value):
            # as the store's pages were extracted, when there is a store (fingerprint.versions)
            rule = store.rule if store is not None else Rule()
            html = data.decode("utf-8", errors="replace")
            extractor = require_extractor(rule.extractor)
            return extract_text(html, extractor=extractor, version=rule.extraction) or ""
        return data.decode("utf-8", errors="replace")
    if "://" in value and " " not in value:
        where = "in --store" if store is not None else "without --store"
        raise CliError(f"{label} {value}: looks like a key (URL), and there is no such key {where}")
    if path.is_dir():
        raise CliError(f"{label} {value}: is a directory, not a file")
    if _looks_like_path(value) or (value and not any(c.isspace() for c in value)):
        # one word is a mistyped key or file name, not a text worth comparing
        what = "no such key in --store, nor file" if store is not None else "no such file"
        raise CliError(
            f"{label} {value}: {what} (pass --text to compare the argument itself as text)"
        )
    return value


def _scopes_apart(a: str, b: str, rule: Rule) -> str | None:
    """Why two keys are never compared under a scope narrower than global, or ``None``."""
    if rule.scope == "global" or "://" not in a or "://" not in b:
        return None
    sa, sb = scope_of(a, rule.scope), scope_of(b, rule.scope)
    if sa == sb:
        return None
    return (
        f"verdict: distinct: never compared, the store's scope is {rule.scope} and A is of "
        f"{sa or '(no host)'}, B of {sb or '(no host)'}"
    )


def cmd_explain(args: argparse.Namespace) -> int:
    from ..explain import explain

    store = open_cli_store(args.store, read_only=True) if args.store else None
    try:
        a = _text_of("A", args.a, store, args.text)
        b = _text_of("B", args.b, store, args.text)
        rule = rule_from_args(args) or (store.rule if store is not None else Rule())
    finally:
        if store is not None:
            store.close()
    apart = _scopes_apart(args.a, args.b, rule)
    if apart:
        emit(apart + "\n")
        return 0
    if isinstance(a, Fingerprints) or isinstance(b, Fingerprints):
        lines = ["the store keeps fingerprints, not texts: pass the pages' files for the features"]
        fa = a if isinstance(a, Fingerprints) else None
        fb = b if isinstance(b, Fingerprints) else None
        for name, f in (("A", fa), ("B", fb)):
            lines.append(f"{name}: {f.fp:016x}" if f is not None else f"{name}: (text given)")
        if fa is not None and fb is not None:
            d, dw = distances(fa, fb)
            lines.append(f"64-bit distance: {d} (implies cosine {implied_similarity(d, 64):.3f})")
            if dw is not None:
                lines.append(
                    f"{WIDE_BITS}-bit distance: {dw} (implies cosine "
                    f"{implied_similarity(dw, WIDE_BITS):.3f})"
                )
            near = rule.is_near(d, dw)
            lines.append(
                f"verdict: {'near-duplicates' if near else 'distinct'} under {rule.describe()}"
            )
        emit("\n".join(lines) + "\n")
        return 0
    emit(clean(explain(a, b).render(rule)) + "\n")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "fingerprint",
        help="print the fingerprint of a text or page in hex",
        description="Print the 64-bit SimHash of a text file or HTML page as 16 hex digits. "
        "HTML is detected (by extension or content) and its main text extracted first; "
        "texts shorter than --min-text-length get no fingerprint, as in a crawl.",
    )
    p.add_argument("file", nargs="?", default="-", help="a file, or - for standard input (default)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--html", action="store_true", help="the input is HTML: extract its text")
    kind.add_argument(
        "--text", action="store_true", help="the input is plain text, even if it looks like HTML"
    )
    p.add_argument(
        "--min-text-length",
        "--min-length",
        type=bounded_int(0),
        default=CRAWL_MIN_TEXT_LENGTH,
        metavar="N",
        help="shortest text to fingerprint, in characters "
        f"(default {CRAWL_MIN_TEXT_LENGTH}, as NEARDUP_MIN_TEXT_LENGTH)",
    )
    p.add_argument(
        "--max-bytes",
        type=bounded_int(1),
        default=MAX_BYTES,
        metavar="N",
        help=f"largest input read, in bytes (default {MAX_BYTES}, as NEARDUP_MAX_HTML_BYTES): "
        "a larger one is refused, never read to its end",
    )
    p.set_defaults(func=cmd_fingerprint)

    p = sub.add_parser(
        "explain",
        help="why two texts or pages are (not) near-duplicates",
        description="Distance, the cosine it implies, shared features and what moved each "
        "differing bit, for two text files, HTML files, keys of --store, or (--text) two texts.",
    )
    p.add_argument(
        "a", help="a text file, an HTML file, a key in --store, or (--text) the text itself"
    )
    p.add_argument("b", help="the same for the second page")
    p.add_argument("--store", help="look A and B up as keys (URLs) in this store (read only)")
    p.add_argument("--text", action="store_true", help="A and B are the texts themselves")
    add_rule_args(p, "for the verdict (default: the store's, else the crawl default)")
    p.set_defaults(func=cmd_explain)
