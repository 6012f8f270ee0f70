"""The Redis stores' bulk imports (``import_records``: ``nearduppipe copy``, batch dedup's
write-back, format-1 migration; the Cluster store's ``add``): script calls of 500 entries
or decisions, 20 calls per round trip, to the store's shards (:mod:`.shard`), with the page
keys encoded by the store's :class:`.names.Names`.

Why apart: the entries' page keys are encoded with the client's host and job ids, which a
reset of the store by another client makes stale (:func:`.loss.fresh_ids`): a round
the script refuses as stale is encoded again with fresh ids and sent again. An ``add``
replaces an entry with itself, so the calls of that round that went through do no harm
when sent twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from ...fingerprint.rule import Fingerprints
from ..base import Alias, Decision, Entry, StoreUnavailable
from .codec import encode_decision
from .loss import STALE
from .names import Names
from .shard import Shard, send_many

BATCH = 500  # entries or decisions per script call
ROUND = 20  # script calls per round trip
_Row = tuple[Entry, Fingerprints, float, int]  # an entry, checked: fingerprints, time, ticket
_Placed = tuple[Alias, bytes, int]  # an alias, its kept page's root, its ticket
_P = TypeVar("_P")  # what a call carries: entries, aliases
Refresh = Callable[[], None]  # drops the cached host and job ids, reads the shards' epochs

__all__ = ["import_aliases", "import_cluster", "import_cluster_aliases", "import_records"]


def import_records(
    shard: Shard,
    names: Names,
    refresh: Refresh,
    entries: Iterable[Entry],
    decisions: Iterable[Decision],
    now: float | str,
) -> int:
    """Write ``entries`` (kept as given, ``stored_at`` included), then ``decisions``, to a
    single-node store's ``shard``; returns the number of entries. ``refresh``: what the
    store does when a call was refused as stale."""
    n = 0
    calls: list[tuple[Shard, list[_Row]]] = []
    part: list[_Row] = []
    with shard.guard.errors("import", write=True):
        for e in entries:
            part.append(_row(e, 0))
            n += 1
            if len(part) >= BATCH:
                calls.append((shard, part))
                part = []
                if len(calls) >= ROUND:
                    _send(calls, names, refresh, now, "add", _entry_args)
                    calls = []
        if part:
            calls.append((shard, part))
        _send(calls, names, refresh, now, "add", _entry_args)
        _decide(shard, decisions, now)
    return n


def import_cluster(
    top: Shard,
    shards: Sequence[Shard],
    shard_of: Callable[[str], int],
    names: Names,
    refresh: Refresh,
    entries: Iterable[Entry],
    decisions: Iterable[Decision],
    now: float | str,
) -> int:
    """The same to a Redis Cluster store (``top``: its global keys; ``shard_of``: the index
    of a page key's shard): 500 entries per shard and call; each entry gets a ticket in the
    order given (reserved 500 at a time)."""
    n = 0
    parts: dict[int, list[_Row]] = {}
    calls: list[tuple[Shard, list[_Row]]] = []
    tickets = range(0)
    for e in entries:
        s = shard_of(e.key)
        if not tickets:
            with top.guard.errors("import", write=True):
                last = int(top.client.hincrby(top.key("meta"), "order", BATCH))
            tickets = range(last - BATCH + 1, last + 1)
        parts.setdefault(s, []).append(_row(e, tickets[0]))
        tickets = tickets[1:]
        n += 1
        if len(parts[s]) >= BATCH:
            calls.append((shards[s], parts.pop(s)))
            if len(calls) >= ROUND:
                _send(calls, names, refresh, now, "add", _entry_args)
                calls = []
    calls.extend((shards[s], part) for s, part in parts.items())
    _send(calls, names, refresh, now, "add", _entry_args)
    _decide(top, decisions, now)
    return n


def _row(e: Entry, ticket: int) -> _Row:
    """An entry checked by :meth:`Store.import_records`, with what its record is made of."""
    return (e, e.fingerprints, e.stored_at, ticket)


def _entry_args(names: Names, row: _Row) -> tuple[bytes | None, ...]:
    e, f, t, ticket = row
    return (names.address(e.key), names.record(f, e.key, t, e.job, e.text, ticket))


def _alias_args(names: Names, a: Alias) -> tuple[bytes | None, ...]:
    rec = names.record(a.fingerprints, a.key, a.stored_at, a.job, None)
    return (names.address(a.key), rec, names.address(a.root))


def _send(
    calls: list[tuple[Shard, list[_P]]],
    names: Names,
    refresh: Refresh,
    now: float | str,
    mode: str,
    encode: Callable[[Names, _P], tuple[bytes | None, ...]],
) -> list[Any]:
    """One round trip of ``mode`` calls, each with its shard's epoch (read before the ids);
    those refused as stale are encoded again and sent again (only they: the others wrote,
    and a second add of an entry would log it twice). Returns the calls' replies, in order."""
    out: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    for _ in range(4):
        if not todo:
            return out
        with calls[0][0].guard.errors("import", write=True):
            wire: list[tuple[Shard, list[Any]]] = []
            for i in todo:
                target, part = calls[i]
                args = target.head(mode, now, 0, target.epoch)  # (before the ids)
                for row in part:
                    args += encode(names, row)
                wire.append((target, args))
            replies = send_many(wire)
            refused = _stale(replies)
            for i, reply, stale in zip(todo, replies, refused, strict=True):
                if not stale:
                    out[i] = reply
            todo = [i for i, stale in zip(todo, refused, strict=True) if stale]
            if todo:
                refresh()
    if todo:
        where = calls[0][0].guard.where
        raise StoreUnavailable(f"{where}: import: the store kept being reset under it")
    return out


def import_aliases(
    shard: Shard, names: Names, refresh: Refresh, aliases: Iterable[Alias], now: float | str
) -> int:
    """Write ``aliases`` to a single-node store's ``shard`` (after the entries they stand
    for), 500 per call; returns the number the script stored (it skips an alias that would
    stand for nothing). A call sent again after a stale refusal wrote nothing the first time."""
    n = 0
    calls: list[tuple[Shard, list[Alias]]] = []
    part: list[Alias] = []
    with shard.guard.errors("import", write=True):
        for a in aliases:
            part.append(a)
            if len(part) >= BATCH:
                calls.append((shard, part))
                part = []
                if len(calls) >= ROUND:
                    n += sum(map(int, _send(calls, names, refresh, now, "alias", _alias_args)))
                    calls = []
        if part:
            calls.append((shard, part))
        n += sum(map(int, _send(calls, names, refresh, now, "alias", _alias_args)))
    return n


def import_cluster_aliases(
    top: Shard,
    shards: Sequence[Shard],
    shard_of: Callable[[str], int],
    names: Names,
    refresh: Refresh,
    aliases: Iterable[Alias],
    now: float | str,
) -> int:
    """The same to a Redis Cluster store, 500 aliases at a time: the kept pages' roots read
    from their shards (``refs``), then each alias written to its own key's shard with its
    root and a ticket (``alias``). A kept page changed between the two calls leaves its alias
    standing for nothing, as any later change does."""
    n = 0
    for chunk in _chunks(aliases, BATCH):
        by_root: dict[int, list[Alias]] = {}
        for a in chunk:
            by_root.setdefault(shard_of(a.root), []).append(a)
        calls = [(shards[s], part) for s, part in by_root.items()]
        refs = _send(calls, names, refresh, now, "refs", _root_args)
        found: list[tuple[Alias, bytes]] = []
        for (s, part), reply in zip(by_root.items(), refs, strict=True):
            tail = s.to_bytes(2, "big")
            found += [(a, ref + tail) for a, ref in zip(part, reply, strict=True) if ref]
        if not found:
            continue
        with top.guard.errors("import", write=True):
            last = int(top.client.hincrby(top.key("meta"), "order", len(found)))
        by_key: dict[int, list[_Placed]] = {}
        for ticket, (a, root) in enumerate(found, last - len(found) + 1):
            by_key.setdefault(shard_of(a.key), []).append((a, root, ticket))
        calls2 = [(shards[s], part2) for s, part2 in by_key.items()]
        n += sum(map(int, _send(calls2, names, refresh, now, "alias", _placed_args)))
    return n


def _chunks(items: Iterable[Alias], size: int) -> Iterator[list[Alias]]:
    chunk: list[Alias] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _root_args(names: Names, a: Alias) -> tuple[bytes | None, ...]:
    return (names.address(a.root, assign=False) or b"",)  # (b"": no such host, no such page)


def _placed_args(names: Names, row: _Placed) -> tuple[bytes | None, ...]:
    a, root, ticket = row
    rec = names.record(a.fingerprints, a.key, a.stored_at, a.job, None, ticket)
    return (names.address(a.key), rec, root)


def _decide(shard: Shard, decisions: Iterable[Decision], now: float | str) -> None:
    """``decisions`` appended to ``shard``'s list, 500 per call, 20 calls per round trip."""
    calls: list[tuple[Shard, list[Any]]] = []
    for batch in _decision_batches(decisions):
        calls.append((shard, [*shard.head("decide", now), *batch]))
        if len(calls) >= ROUND:
            _send_decisions(calls)
            calls = []
    _send_decisions(calls)


def _send_decisions(calls: list[tuple[Shard, list[Any]]]) -> None:
    if calls:
        with calls[0][0].guard.errors("import", write=True):
            for reply in send_many(calls):
                if isinstance(reply, Exception):
                    raise reply


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
