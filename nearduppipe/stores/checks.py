"""The checks every store call's arguments pass, once, in :class:`~.base.Store`'s public
methods: a backend receives keys, fingerprints, times and texts it can hold, so that no
backend cleans them its own way (they had drifted) and a refused argument writes nothing."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar, cast, overload

from ..errors import NearDupError
from ..fingerprint.rule import Fingerprints
from .counts import Source

# an Entry, Alias or Decision (stores/base.py, which calls these checks and is not imported back:
# the checks read their fields and return them through NamedTuple's _replace, of their type)
_R = TypeVar("_R", bound=tuple[Any, ...])

MAX_KEY_CHARS = 65_536
_SURROGATE = re.compile("[\ud800-\udfff]")


class BadKey(NearDupError, ValueError):
    """A key no store can hold (not text, empty, too long, or not encodable as UTF-8, e.g. a
    lone surrogate from a JSON feed). Only that page is affected; the store is untouched."""


def check_key(key: object) -> str:
    """The key, if a store can hold it; :class:`BadKey` otherwise."""
    if not isinstance(key, str):
        raise BadKey(f"store keys are strings, not {type(key).__name__}")
    if not key:
        raise BadKey("store keys are non-empty strings")
    if len(key) > MAX_KEY_CHARS:
        raise BadKey(f"store key of {len(key)} characters (at most {MAX_KEY_CHARS})")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as e:
        raise BadKey(f"store key is not valid Unicode text ({e.reason}): {key!r:.80}") from None
    return key


def check_time(t: object) -> float:
    """A stored time (seconds since the epoch) as a float; a time that is not a finite number
    is refused before anything is written (a sqlite record holding it could not be read)."""
    try:
        value = float(t)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"stored_at must be a number of seconds, not {t!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"stored_at must be a finite time, not {value}")
    return value


@overload
def clean_text(text: str) -> str: ...
@overload
def clean_text(text: None) -> None: ...
@overload
def clean_text(text: str | None) -> str | None: ...
def clean_text(text: str | None) -> str | None:
    """A text sample (or a crawl job's id) as every backend can store it: lone surrogates
    become U+FFFD (the sqlite store's UTF-8 rows cannot hold them)."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"text samples and crawl jobs are strings, not {type(text).__name__}")
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def clean_decision(decision: _R) -> _R:
    """A decision as every backend can store it (its keys and text through :func:`clean_text`:
    an imported decision may come from a store that kept lone surrogates)."""
    d: Any = decision
    return cast(
        _R,
        d._replace(
            key=clean_text(d.key), matched_key=clean_text(d.matched_key), text=clean_text(d.text)
        ),
    )


_WIDE_END = 1 << 512  # (CPython folds no constant this large: computed once here)


def check_fingerprints(fps: Fingerprints | int) -> Fingerprints:
    if (
        type(fps) is Fingerprints
        and type(fps.fp) is int
        and 0 <= fps.fp < 1 << 64
        and (fps.wide is None or (type(fps.wide) is int and 0 <= fps.wide < _WIDE_END))
    ):
        return fps  # (every check of a crawl: first, and cheap)
    if isinstance(fps, int) and not isinstance(fps, bool):
        fps = Fingerprints(fps, None)
    if not isinstance(fps, Fingerprints):
        raise TypeError(f"expected Fingerprints or an int, not {type(fps).__name__}")
    if not isinstance(fps.fp, int) or not 0 <= fps.fp < 1 << 64:
        raise ValueError("fingerprint must be an integer in [0, 2**64)")
    if fps.wide is not None and (not isinstance(fps.wide, int) or not 0 <= fps.wide < 1 << 512):
        raise ValueError("wide fingerprint must be an integer in [0, 2**512)")
    return fps


def check_source(source: object) -> Source:
    if source != "pages" and source != "items":
        raise ValueError(f"a check's source is 'pages' or 'items', not {source!r}")
    return source


def clean_aliases(aliases: Iterable[_R]) -> Iterator[_R]:
    """Each alias as every backend can store it, checked as it is read."""
    for alias in aliases:
        a: Any = alias
        fps = check_fingerprints(a.fingerprints)
        yield a._replace(
            key=check_key(a.key),
            fingerprint=fps.fp,
            stored_at=check_time(a.stored_at),
            root=check_key(a.root),
            wide=fps.wide,
            job=clean_text(a.job),
        )


def clean_entries(entries: Iterable[_R]) -> Iterator[_R]:
    """Each entry as every backend can store it, checked as it is read."""
    for entry in entries:
        e: Any = entry
        fps = check_fingerprints(e.fingerprints)
        yield e._replace(
            key=check_key(e.key),
            fingerprint=fps.fp,
            stored_at=check_time(e.stored_at),
            text=clean_text(e.text),
            wide=fps.wide,
            job=clean_text(e.job),
        )
