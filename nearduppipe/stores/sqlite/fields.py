"""The checks every field of a sqlite record passes before it is used: a row edited by hand or
written by another program is refused by name, with what to do about it, never passed on (no
fingerprint beyond its bits, no time that is not a finite number, no text that is not text)."""

from __future__ import annotations

import math
from typing import Any

from ..base import StoreError
from .files import decode

__all__ = [
    "FIX_HINT",
    "FP_END",
    "HEX_DIGITS",
    "WIDE_END",
    "damaged",
    "decode_row",
    "finite_number",
    "hex_number",
    "hint",
    "text_or_none",
    "whole_number",
]

FP_END, WIDE_END = 1 << 64, 1 << 512
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
# what a record damaged by hand (or by another program) is told with: where to go from there
FIX_HINT = (
    "fix or delete that row (with the sqlite3 shell: DELETE FROM neardup WHERE key = '{key}'),"
    " or restore the store from a backup"
)


def hint(where: str) -> str:
    """What to do about the damaged row ``where`` names (``…: record i:00000000002a``)."""
    key = where.rpartition("record ")[2].strip("'") or "<its key>"
    return FIX_HINT.format(key=key.replace("'", "''"))


def hex_number(value: Any, end: int, what: str) -> int:
    """A fingerprint written as hex digits, below ``end``; anything else (a JSON number, a
    sign, 100,000 digits) is a ``ValueError`` naming ``what``."""
    if not isinstance(value, str) or not value or not HEX_DIGITS.issuperset(value):
        raise ValueError(f"{what} is not a string of hex digits: {value!r:.40}")
    n = int(value, 16)
    if n >= end:
        raise ValueError(f"{what} is out of range ({len(value)} hex digits)")
    return n


def text_or_none(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{what} is not a string: {value!r:.40}")


def finite_number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} is not a number: {value!r:.40}")
    t = float(value)
    if not math.isfinite(t):
        raise ValueError(f"{what} is not a finite number: {value!r:.40}")
    return t


def whole_number(value: Any, top: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise ValueError(f"{what} is not a whole number from 0 to {top}: {value!r:.40}")
    return value


def damaged(where: str, kind: str, reason: object) -> StoreError:
    """The error for a record that cannot be read: ``where`` names the file and row."""
    return StoreError(f"{where}: malformed {kind} record ({reason}); {hint(where)}")


def decode_row(value: Any, where: str) -> Any:
    """:func:`decode` with what to do about a row that is not JSON."""
    try:
        return decode(value, where)
    except StoreError as e:
        raise StoreError(f"{e}; {hint(where)}") from None
