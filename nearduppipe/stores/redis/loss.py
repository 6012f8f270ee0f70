"""A Redis store whose keys the server lost: noticed, said plainly, never papered over.

Why: Redis may drop a store's keys behind its back: a restart without persistence, ``FLUSHDB``
or ``FLUSHALL``, a ``DEL``, or eviction under an ``allkeys-*`` ``maxmemory-policy``. Before, a
running crawl wrote on into the empty server as if nothing had happened (its writes re-created
``{P}:meta`` with counters only, and the next open called that "not a store this nearduppipe
can read"), and under ``allkeys-lru`` every near-copy of an evicted page was kept, silently.

Three guards, all off the hot path or inside calls the store makes anyway:

* ``{P}:meta`` is the store's sentinel: a check's script already reads its ``epoch``, and
  every other mode does one ``EXISTS`` on it in the same call; a store without it answers
  ``NEARDUP_GONE`` and :func:`gone` turns that into :class:`StoreUnavailable` (the failure
  policy's business). The client then refuses every later call (a new store written under
  the same prefix by someone else is not the one this client had open).
* :class:`Watch` reads ``INFO stats`` / ``INFO memory`` at most once a second, and reports the
  store lost once the server's ``evicted_keys`` grew under a policy that may evict its keys.
* At open, an evicting policy (``allkeys-*``; ``volatile-*`` when the store has a TTL, as its
  data keys then carry an expiry) is refused unless the caller allows it (``allow_eviction``);
  ``INFO`` rather than ``CONFIG GET``, which managed services often disable.

A client that made no call while the store was gone meets the new store another client
created under the prefix only as a new log epoch, which is also what a reset or a compaction
looks like. So a store carries an identity (``id`` in ``{P}:meta``: random, written at
creation; a reset keeps it, a store created after a loss gets its own): on each new epoch the
client compares it with the one it opened and refuses a store it did not open
(:func:`recreated`) instead of following it, its earlier pages gone.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..base import StoreError, StoreUnavailable

__all__ = [
    "GONE",
    "STALE",
    "Watch",
    "evicts",
    "fresh_ids",
    "gone",
    "lost_at_open",
    "new_identity",
    "parse_flag",
    "recreated",
]

logger = logging.getLogger("nearduppipe.stores.redis")
T = TypeVar("T")

GONE = "NEARDUP_GONE"  # the scripts' error reply when the store's meta is missing
STALE = "NEARDUP_STALE"  # ... when a call's host and job ids predate a reset (fresh_ids)
_RECOVER = (
    "To start afresh, crawl with -s NEARDUP_RESET=1 (reset=True with open_store, --reset for "
    "nearduppipe copy's destination), which deletes what is left under the prefix; to get the "
    "pages back, restore the server from a copy of its RDB/AOF files made before the loss. "
    "Give Redis persistence (appendonly yes) and maxmemory-policy noeviction so that it cannot "
    "happen again"
)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def fresh_ids(
    attempt: Callable[[], T],
    refresh: Callable[[], None],
    errors: Callable[[], AbstractContextManager[None]],
    what: str,
) -> T:
    """``attempt()``, a call that sends page keys encoded with the client's host and job ids
    and the epoch they were read under, again after ``refresh()`` each time the script
    refuses it as stale (``STALE``: another client reset the store, whose new tables give
    those ids to other hosts; a compaction's new epoch costs one such retry). Every error,
    within ``errors()`` (the store's mapping of server errors); ``what`` names the call."""
    for _ in range(4):
        with errors():
            try:
                return attempt()
            except Exception as e:  # (redis-py's ResponseError: redis is imported lazily)
                if STALE not in str(e):
                    raise
                refresh()
    raise StoreUnavailable(f"{what}: the store kept being reset under this client")


def parse_flag(value: str, name: str, where: str) -> bool:
    """A URI's ``?name=1`` (or ``true``/``yes``/``on``; ``0``/``false``/``no``/``off``)."""
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise StoreError(f"{where}: ?{name}= must be 1 or 0, got {value!r}")


def evicts(policy: str | None, ttl: float | None) -> bool:
    """Whether ``maxmemory-policy`` lets Redis evict the store's keys: every key under
    ``allkeys-*``; under ``volatile-*`` only keys with an expiry, which the store's data keys
    carry only when it has a TTL (the replies hash ``{P}:r`` always has one; losing it only
    undoes a retry's idempotence)."""
    if not policy:
        return False
    return policy.startswith("allkeys-") or (policy.startswith("volatile-") and ttl is not None)


def gone(where: str, meta_key: str, client: Any = None) -> StoreUnavailable:
    """The store's meta vanished while this client had it open; with ``client``, the
    message names the server's eviction policy and count when it evicts (one ``INFO``)."""
    seen = ""
    if client is not None:
        try:
            policy, evicted = _info(client)
        except Exception:  # (only to word the message: the loss is what matters)
            policy, evicted = None, None
        if policy and policy != "noeviction":
            seen = f"; the server's maxmemory-policy is {policy} and it evicted {evicted} keys"
    return StoreUnavailable(
        f"{where}: the store is gone: its meta key {meta_key} is missing from the server (a "
        "restart without persistence, FLUSHDB/FLUSHALL, a DEL, or eviction under maxmemory-policy "
        f"allkeys-*{seen}). What it held is lost; this client will not write a new store in its "
        f"place, and every check fails from here on (NEARDUP_ON_STORE_ERROR decides). {_RECOVER}"
    )


def new_identity() -> str:
    """A store's identity: random, so that a store created anew never has its predecessor's."""
    return os.urandom(8).hex()


def recreated(where: str, had: str, found: str | None) -> StoreUnavailable:
    """The store under the prefix is not the one this client opened (identity ``had``; now
    ``found``, or none: a store an older nearduppipe created): the one it opened was lost."""
    now = f"another store (identity {found})" if found else "a store without an identity"
    return StoreUnavailable(
        f"{where}: the store this client opened (identity {had}) was lost, and {now} was "
        "created under its prefix since (a restart without persistence, FLUSHDB/FLUSHALL or a "
        "DEL, then another client's open): what this client wrote before is not in it, so it "
        "will not join it, and every call fails from here on (NEARDUP_ON_STORE_ERROR decides). "
        "A new crawl opens the new store; to get the pages back, restore the server from a "
        "copy of its RDB/AOF files made before the loss"
    )


def lost_at_open(where: str, meta_key: str, left: list[str], what: str | None = None) -> StoreError:
    """Opening a store whose meta is missing while other keys of it remain (``left``; none:
    its meta holds no format, only counters that a client older than this check wrote into
    a lost store; or ``what`` says what is wrong with the meta)."""
    if what is None:
        what = (
            f"is missing but its other keys remain ({', '.join(left)})"
            if left
            else "holds no format, only counters written after the store was lost"
        )
    return StoreError(
        f"{where}: the store's meta key {meta_key} {what}: the server lost part of the "
        "store (a restart without persistence or a flush while a crawl wrote, eviction under "
        "maxmemory-policy allkeys-*, a DEL, or a partial restore), so its entries cannot be "
        f"trusted or extended. {_RECOVER}"
    )


def _info(client: Any) -> tuple[str | None, int | None]:
    """``maxmemory_policy`` and ``evicted_keys``, or None where ``INFO`` is refused. On a
    Redis Cluster, of every master: the policy that evicts most (``allkeys-*`` first) and the
    sum of their evictions."""
    import redis

    try:
        if hasattr(client, "get_primaries"):  # (RedisCluster: one reply per master)
            masters = client.get_primaries()
            memory = _per_node(client.info("memory", target_nodes=masters))
            stats = _per_node(client.info("stats", target_nodes=masters))
        else:
            pipe = client.pipeline(transaction=False)
            pipe.info("memory")
            pipe.info("stats")
            memory, stats = ([x] for x in pipe.execute())
    except redis.ResponseError:  # INFO renamed or denied: nothing to watch
        return None, None
    policies = [str(m["maxmemory_policy"]) for m in memory if "maxmemory_policy" in m]
    counts = [int(s["evicted_keys"]) for s in stats if "evicted_keys" in s]
    policies.sort(key=lambda p: (not p.startswith("allkeys-"), p == "noeviction"))  # (worst)
    return (policies[0] if policies else None), (sum(counts) if counts else None)


def _per_node(reply: dict[str, Any]) -> list[dict[str, Any]]:
    if reply and all(isinstance(v, dict) for v in reply.values()):
        return list(reply.values())
    return [reply]  # (one master: redis-py answers its reply alone)


class Watch:
    """The server's eviction policy and count, read at open and then at most once a second
    (one pipelined ``INFO memory`` + ``INFO stats`` round trip, by whichever call comes due)."""

    EVERY = 1.0  # seconds between looks

    def __init__(self, where: str, ttl: float | None, allow: bool) -> None:
        self.where, self.ttl, self.allow = where, ttl, allow
        self.policy: str | None = None
        self.evicted: int | None = None
        self.due = float("inf")  # (no looks before :meth:`start`)
        self._quiet_until = 0.0

    def start(self, client: Any, read_only: bool) -> None:
        """At open, before anything is written: refuse an evicting policy (or warn)."""
        self.policy, self.evicted = _info(client)
        self.due = time.monotonic() + self.EVERY
        if self.policy is None:
            logger.warning(
                "%s: cannot read the server's maxmemory_policy (INFO refused): make sure it is "
                "noeviction, or the store may lose keys without notice",
                self.where,
            )
            self.due = float("inf")
        elif evicts(self.policy, self.ttl):
            self._refuse_or_warn(read_only)

    def _refuse_or_warn(self, read_only: bool) -> None:
        why = (
            "evicts any key when memory is full"
            if self.policy and self.policy.startswith("allkeys-")
            else "evicts keys with an expiry when memory is full, and this store's data keys "
            "have one (it has a TTL)"
        )
        text = (
            f"{self.where}: the server's maxmemory-policy is {self.policy}, which {why}: the "
            "store would lose entries (near-duplicates then kept) or its meta without notice"
        )
        if self.allow or read_only:
            logger.warning("%s; allowed (allow_eviction)", text)
            return
        raise StoreError(
            f"{text}. Set maxmemory-policy noeviction (or volatile-* for a store without a TTL) "
            "on the server, or allow it anyway with ?allow_eviction=1 in the store URI "
            "(open_store(..., allow_eviction=True))"
        )

    def look(self, client: Any) -> None:
        """Raise :class:`StoreUnavailable` once the server evicted keys since the last look
        under a policy that may have taken the store's; allowed, log a warning instead."""
        self.due = time.monotonic() + self.EVERY
        policy, evicted = _info(client)
        before, self.evicted, self.policy = self.evicted, evicted, policy or self.policy
        if evicted is None or before is None or evicted <= before:
            return  # (fewer: the server restarted or its stats were reset; the meta tells)
        if policy and policy.startswith("volatile-") and self.ttl is None:
            return  # keys of others with an expiry: none of this store's data keys
        text = (
            f"{self.where}: the server evicted {evicted - before} keys since this client last "
            f"looked (maxmemory-policy {policy})"
        )
        if self.allow:
            if time.monotonic() >= self._quiet_until:  # (at most one warning a minute)
                self._quiet_until = time.monotonic() + 60
                logger.warning("%s; this store may have lost entries (allow_eviction)", text)
            return
        raise StoreUnavailable(
            f"{text}: this store may have lost entries or its log, so its verdicts can no longer "
            "be trusted, and every check fails from here on (NEARDUP_ON_STORE_ERROR decides). "
            f"{_RECOVER}"
        )
