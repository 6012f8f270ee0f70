"""The Redis stores' bulk imports (``import_records``: ``nearduppipe copy``, batch dedup's
write-back, format-1 migration; the Cluster store's ``add``): script calls of 500 entries
or decisions, 20 calls per round trip.

Why apart: the entries' page keys are encoded with the client's host and job ids, which a
reset of the store by another client makes stale (:meth:`.store.RedisStore._keyed`): a round
the script refuses as stale is encoded again with fresh ids and sent again. An ``add``
replaces an entry with itself, so the calls of that round that went through do no harm
when sent twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ...fingerprint.rule import Fingerprints
from ..base import (
    Decision,
    Entry,
    StoreUnavailable,
)
from .codec import encode_decision
from .loss import STALE

if TYPE_CHECKING:
    from .cluster import RedisClusterStore
    from .store import RedisStore

BATCH = 500  # entries or decisions per script call
ROUND = 20  # script calls per round trip
_Row = tuple[Entry, Fingerprints, float, int]  # an entry, checked: fingerprints, time, ticket

__all__ = ["import_cluster", "import_records"]


def import_records(
    store: RedisStore, entries: Iterable[Entry], decisions: Iterable[Decision], now: float | str
) -> int:
    """Write ``entries`` (kept as given, ``stored_at`` included), then ``decisions``, to a
    single-node store; returns the number of entries."""
    n = 0
    calls: list[list[_Row]] = []
    part: list[_Row] = []
    with store._errors("import", write=True):
        for e in entries:
            part.append(_row(e, 0))
            n += 1
            if len(part) >= BATCH:
                calls.append(part)
                part = []
                if len(calls) >= ROUND:
                    _send_single(store, calls, now)
                    calls = []
        if part:
            calls.append(part)
        _send_single(store, calls, now)
        pipe = store._client.pipeline(transaction=False)
        for batch in _decision_batches(decisions):
            store._script(
                keys=store._keys, args=store._head_args("decide", now) + batch, client=pipe
            )
            if len(pipe) >= ROUND:
                pipe.execute()
        if len(pipe):
            pipe.execute()
    return n


def import_cluster(
    store: RedisClusterStore,
    entries: Iterable[Entry],
    decisions: Iterable[Decision],
    now: float | str,
) -> int:
    """The same to a Redis Cluster store: 500 entries per shard and call; each entry gets a
    ticket in the order given (reserved 500 at a time)."""
    n = 0
    parts: dict[int, list[_Row]] = {}
    calls: list[tuple[int, list[_Row]]] = []
    tickets = range(0)
    for e in entries:
        s = store.shard(e.key)
        if not tickets:
            with store._errors("import", write=True):
                last = int(store._client.hincrby(store._global[0], "order", BATCH))
            tickets = range(last - BATCH + 1, last + 1)
        parts.setdefault(s, []).append(_row(e, tickets[0]))
        tickets = tickets[1:]
        n += 1
        if len(parts[s]) >= BATCH:
            calls.append((s, parts.pop(s)))
            if len(calls) >= ROUND:
                _send_cluster(store, calls, now)
                calls = []
    calls.extend(parts.items())
    _send_cluster(store, calls, now)
    decide = [
        (store._global, [*store._head("decide", now), *b]) for b in _decision_batches(decisions)
    ]
    for i in range(0, len(decide), ROUND):
        with store._errors("import", write=True):
            for reply in store._wire.call_many(decide[i : i + ROUND]):
                if isinstance(reply, Exception):
                    raise reply
    if n:
        store._empty = False
    return n


def _row(e: Entry, ticket: int) -> _Row:
    """An entry checked by :meth:`Store.import_records`, with what its record is made of."""
    return (e, e.fingerprints, e.stored_at, ticket)


def _send_single(store: RedisStore, calls: list[list[_Row]], now: float | str) -> None:
    """One round trip of ``add`` calls; those refused as stale are encoded again and sent
    again (only they: the others wrote, and a second add of an entry would log it twice)."""
    for _ in range(4):
        if not calls:
            return
        pipe = store._client.pipeline(transaction=False)
        head = store._head_args("add", now, store._names_epoch)  # (before the ids)
        for part in calls:
            args: list[Any] = [*head]
            for e, f, t, _ in part:
                args += (store._names.address(e.key), store._record(f, e.key, t, e.job, e.text))
            store._script(keys=store._keys, args=args, client=pipe)
        refused = _stale(pipe.execute(raise_on_error=False))
        calls = [c for c, stale in zip(calls, refused, strict=True) if stale]
        if calls:
            store._refresh_names()
    if calls:
        raise StoreUnavailable(f"{store._where()}: import: the store kept being reset under it")


def _send_cluster(
    store: RedisClusterStore, calls: list[tuple[int, list[_Row]]], now: float | str
) -> None:
    """As :func:`_send_single`, each call with its shard's epoch."""
    for _ in range(4):
        if not calls:
            return
        with store._errors("import", write=True):
            wire = []
            for s, part in calls:
                args: list[Any] = store._head("add", now, 0, store._names_epochs[s])
                for e, f, t, ticket in part:
                    rec = store._record(f, e.key, t, e.job, e.text, ticket)
                    args += (store._names.address(e.key), rec)
                wire.append((store._keys[s], args))
            refused = _stale(store._wire.call_many(wire))
            calls = [c for c, stale in zip(calls, refused, strict=True) if stale]
            if calls:
                store._refresh_names()
    if calls:
        raise StoreUnavailable(f"{store._where()}: import: the store kept being reset under it")


def _stale(replies: list[Any]) -> list[bool]:
    """Per call, whether it was refused as stale; any other refusal is raised."""
    for r in replies:
        if isinstance(r, Exception) and STALE not in str(r):
            raise r
    return [isinstance(r, Exception) for r in replies]


def _decision_batches(decisions: Iterable[Decision]) -> Iterable[list[bytes]]:
    batch: list[bytes] = []
    for d in decisions:
        batch.append(encode_decision(d))
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
