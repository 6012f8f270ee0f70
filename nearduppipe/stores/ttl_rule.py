"""One TTL per store: the store records it, and a writer that asks for another is refused.

Why: the TTL is not only how old a match may be. A writer's TTL drives deletions on the
store's shared data: on Redis every write sweeps entries older than ``2 * ttl`` and a writer
without a TTL makes the expiring keys last again; on sqlite a writer with a TTL prunes every
entry older than it when it opens the store. Before, writers with 5 s, 1 h and no TTL wrote one
store without a word, and the 5-second writer's sweeps deleted the others' entries.

So a store records its TTL when it is created (Redis: ``ttl`` in ``{P}:meta``; sqlite: the row
``m:ttl``), and a writer opening it with another TTL is refused with one line naming both,
unless it changes the TTL on purpose (``change_ttl=True``; the crawl setting
``NEARDUP_TTL_CHANGE = True``), which records the new one. Readers (``read_only=True``:
reports, info, explain) are exempt: they delete nothing. A store created before this rule (no
TTL recorded) takes the first writer's TTL without refusal. A reset records the resetting
writer's TTL: it deletes what the old TTL was about.
"""

from __future__ import annotations

from .base import StoreError

__all__ = ["NONE", "decode_ttl", "describe_ttl", "encode_ttl", "settle_ttl"]

NONE = "none"  # the recorded TTL of a store whose entries never expire


def encode_ttl(ttl: float | None) -> str:
    """The TTL as the store records it: seconds (``repr`` of the float), or ``none``."""
    return NONE if ttl is None else repr(float(ttl))


def decode_ttl(text: str, where: str) -> float | None:
    """A recorded TTL; a value that is neither seconds nor ``none`` is a damaged meta."""
    if text == NONE:
        return None
    try:
        return float(text)
    except ValueError:
        raise StoreError(f"{where}: the store's recorded TTL {text!r} is damaged") from None


def describe_ttl(ttl: float | None) -> str:
    """``3600 s``, or ``none`` (entries never expire), for messages."""
    return "none" if ttl is None else f"{ttl:g} s"


def settle_ttl(where: str, recorded: str | None, asked: float | None, change: bool) -> str | None:
    """What a writer that asks for TTL ``asked`` must record in a store that records
    ``recorded`` (``None``: nothing recorded, a store from before this rule): the encoded TTL
    to write, or ``None`` when the store already records it. A different TTL is refused
    unless ``change`` (the writer changes it on purpose)."""
    wanted = encode_ttl(asked)
    if recorded is None or recorded == wanted:
        return None if recorded == wanted else wanted
    stored = decode_ttl(recorded, where)
    if stored == asked:  # (the same seconds written another way)
        return None
    if change:
        return wanted
    raise StoreError(
        f"{where}: the store's TTL is {describe_ttl(stored)} but this writer asks for "
        f"{describe_ttl(asked)} (NEARDUP_TTL, ttl=, ?ttl=); the writers of a store share one "
        "TTL, as each one's sweeps and prunes delete the entries older than its own. Open it "
        f"with the store's TTL, or change the store's TTL on purpose with NEARDUP_TTL_CHANGE "
        "= True (change_ttl=True with open_store)"
    )
