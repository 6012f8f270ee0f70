"""The Redis Cluster store's plumbing and its check protocol (reserve, ticket, look, settle;
see ``cluster.py`` and docs/operations.md, "Redis Cluster"), apart so each module stays
short. :class:`ClusterBase` is the base of :class:`~.cluster.RedisClusterStore`.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ...errors import NearDupError
from ...fingerprint.rule import Fingerprints
from ...index.layout import Layout
from ..base import (
    Decision,
    Match,
    Source,
    StoreError,
    StoreUnavailable,
    Verdict,
)
from . import keys as rk
from .cluster_aliases import ClusterAliases
from .cluster_log import ShardLogs, reader
from .cluster_wire import ClusterWire
from .codec import NO_WIDE, encode_decision
from .loss import recreated
from .names import Names
from .shard import ClusterShard, Guard, send_many

__all__ = ["ClusterBase", "kept_for", "ticket_of"]

_STATUS = rk.REPLY_STATUS


# How long a check of a store with aliases that has found a kept near page still waits for
# earlier near checks (they may be kept nearer, or dropped into aliases of a nearer page): a
# live check settles in milliseconds; a dead client's lives pending_timeout (30 s), and the
# page is a duplicate either way. Past it, the page is dropped for the nearest kept one.
ORDER_WAIT = 5.0


class _Restart(NearDupError):
    """This check's pending entry passed its deadline: others treat it as gone; start again."""


def ticket_of(raw: bytes) -> int:
    """An entry's place in the store's order: its ticket, in a format-3 record's sequence
    slot (0: a pending entry without one yet)."""
    return int.from_bytes(raw[17:23], "big")


def kept_for(pending_timeout: float) -> float:
    """Seconds a kept pending entry's marker answers 'K' to polls (``redis_cluster.lua``).

    Why this is enough: a check polls an entry only after its look saw it pending (before
    its deadline), so the entry was kept at a time ``t_k`` after that look; the check polls
    until it sees 'K' or 'G', and gives up ``2 * pending_timeout + 10`` seconds after its
    wait starts (``_wait``), right after the look. So every poll comes less than
    ``2 * pending_timeout + 10`` seconds (plus the look's reply time and any pause of the
    client between the look and the wait) after ``t_k``; the marker lives
    ``3 * pending_timeout + 60``, the margin covering such a pause of ``pending_timeout + 50``
    seconds. The pending_timeout is each client's own option: the marker uses at least the
    default (30 s), so clients that keep the default or less are covered whatever the
    settling client's; clients with a longer one should all use the same."""
    return 3 * max(pending_timeout, 30.0) + 60


class _Hit:
    """A near entry a look found: kept ('K') or pending ('P', 'C'), in shard ``shard`` at
    address (or pending id) ``id``. ``root``: a kept entry's reference as an alias of it
    records it (address, sequence slot, shard: 16 bytes; empty for a pending entry, whose
    root is read by key once it is kept: :meth:`ClusterBase._root_of`); ``rank``: the order
    of the alias it was found through (its own distances and ticket), else its own."""

    __slots__ = ("id", "match", "rank", "root", "shard", "state", "ticket")

    def __init__(
        self,
        state: bytes,
        shard: int,
        eid: bytes,
        match: Match,
        ticket: int,
        root: bytes = b"",
        rank: tuple[int, int, int] | None = None,
    ) -> None:
        self.state, self.shard, self.id, self.match, self.ticket = state, shard, eid, match, ticket
        self.root, self.rank = root, rank

    def order(self) -> tuple[int, int, int]:
        if self.rank is not None:
            return self.rank
        m = self.match
        return (
            8 * m.distance if m.wide_distance is None else m.wide_distance,
            m.distance,
            self.ticket,
        )


class ClusterBase(ClusterAliases):
    """State, calls and the check protocol of the Redis Cluster store."""

    format_version = 3  # (each shard a format-3 layout; cluster_open.py)

    prefix: str
    layout: Layout
    clock: Callable[[], float] | None  # None: the server's TIME (keys.call_time)
    pending_timeout: float
    shards: int
    _redis: Any
    _client: Any
    _guard: Guard  # closed, read-only, lost; the store's id; Redis errors -> the store's
    _empty: bool
    _shards: list[ClusterShard]  # each with its epoch: the cached ids' (cluster.py _keyed)
    _top: ClusterShard  # the store's global keys (tickets, decisions, tables)
    _names: Names
    _names_read = 0  # times the cached host and job ids were dropped (see check())
    bits: int  # bucket bits per shard (cluster_open.bucket_bits)
    _logs: ShardLogs
    _read_script: Any
    _wire: ClusterWire  # (the shards')

    # -- plumbing ----------------------------------------------------------------------------
    def _where(self) -> str:
        return self._guard.where

    def _head(
        self, mode: str, now: float | str, pos: int = 0, epoch: str | bytes = ""
    ) -> list[Any]:
        return self._top.head(mode, now, pos, epoch)

    def shard(self, key: str) -> int:
        return zlib.crc32(key.encode("utf-8")) % self.shards

    def _call(self, what: str, shard: int, args: list[Any], write: bool = True) -> Any:
        """A call to shard ``shard`` (-1: the global keys), its errors mapped."""
        return (self._top if shard < 0 else self._shards[shard]).call(what, args, write)

    def _reader(self) -> Any:
        shards = self._shards
        return reader(
            self._client, self._read_script, lambda s: (shards[s].key("meta"), shards[s].key("n"))
        )

    def _epochs(self) -> list[str]:
        """Each shard's epoch under which the cached host and job ids were read."""
        return [shard.epoch for shard in self._shards]

    def _adopt_logs(self) -> None:
        """After the logs were (re)loaded: the ids are read again under their epochs."""
        self._names.forget()  # (first: cluster.py _refresh_names)
        for shard, epoch in zip(self._shards, self._logs.epoch, strict=True):
            shard.epoch = epoch or "-"
        self._names_read += 1

    def _record(
        self,
        fps: Fingerprints,
        key: str,
        t: float,
        job: str | None,
        text: str | None,
        ticket: int = 0,
    ) -> bytes:
        """A format-3 record (:mod:`.names`) with ``ticket`` in its sequence slot."""
        return self._names.record(fps, key, t, job, text, ticket)

    def _errors(self, what: str, write: bool = False) -> AbstractContextManager[None]:
        """As the single-node store's (:class:`.shard.Guard`): unreachable, timed out, out of
        memory, a cluster down -> StoreUnavailable; other server errors -> StoreError."""
        return self._guard.errors(what, write)

    def _same_store(self) -> None:
        """After a shard's epoch changed: refuse a store created anew under the prefix (its
        global meta has another id: the old store was lost) rather than follow it as a reset,
        which keeps the id (as on one node: ``RedisBase._same_store``)."""
        had = self._guard.identity
        if had is None:
            return
        with self._errors("load"):
            raw = self._client.hget(self._top.key("meta"), "id")
        found = None if raw is None else raw.decode()
        if found != had:
            raise self._guard.lose(recreated(self._where(), had, found))

    # -- the search over every shard ---------------------------------------------------------
    def _look(
        self,
        fps: Fingerprints,
        qrec: bytes,
        skip_key: bytes,
        own: tuple[int, bytes, bytes] | None,
        clean: bool,
        skip: str | None = None,
    ) -> list[_Hit]:
        """Every shard's near entries (not gone) for the query record, but those of the key
        whose key bytes are ``skip_key`` (the page key ``skip``); ``own`` (shard, pending id,
        ticket) also writes this check's ticket. An alias found stands for its kept page
        (:meth:`._kept_pages`)."""
        hits: list[_Hit] = []
        aliases: list[tuple[tuple[int, int, int], bytes]] = []  # (rank, root) of each alias
        fp = fps.fp
        if not self._logs.loaded:
            with self._errors("load"):
                self._logs.load(self._reader())
            self._same_store()
            if [e or "-" for e in self._logs.epoch] != self._epochs():
                self._adopt_logs()  # (a reset since an add or get read the ids)
        now = rk.call_time(self.clock)
        todo = list(range(self.shards))
        for _ in range(8):
            cands = self._logs.candidates(fp, self.rule.radius)
            calls = []
            for s in todo:
                pos, epoch, cand, last = cands[s]
                mine = own is not None and own[0] == s
                tail = [own[1], own[2]] if mine and own else ["", ""]
                args = [
                    *self._head("look", now, pos, epoch.encode() + b"/" + last if last else epoch),
                    qrec,
                    cand,
                    skip_key,
                    *tail,
                    "1" if clean else "0",
                ]
                calls.append((self._shards[s], args))
            with self._errors("search"):
                replies = send_many(calls)
            again, reload = [], False
            for s, reply in zip(todo, replies, strict=True):
                if isinstance(reply, Exception):
                    with self._errors("search"):
                        raise reply
                blob, start, members = reply
                kind = blob[:1]
                if kind == b"X":
                    raise _Restart
                if kind in (b"E", b"R"):
                    again.append(s)
                    with self._errors("load"):
                        reload = (
                            reload or kind == b"E" or not self._logs.catch_up(s, self._reader())
                        )
                    continue
                self._logs.apply(s, int(start), members, cands[s][1])
                pos = 1
                while pos < len(blob):
                    state, eid = blob[pos : pos + 1], blob[pos + 1 : pos + 9]
                    d, wide, n = struct.unpack_from(">HHI", blob, pos + 9)
                    raw = blob[pos + 17 : pos + 17 + n]
                    if state == b"K" and raw[:1] >= b"\x04":  # (an alias: its kept page is read)
                        w = None if wide == NO_WIDE else wide
                        aliases.append(((8 * d if w is None else w, d, ticket_of(raw)), raw[-16:]))
                        pos += 17 + n
                        continue
                    with self._errors("search"):  # (a host not seen yet: its name is read)
                        m, pos = self._names.match(blob, pos + 9)
                    # (a pending hit's root, if it is kept, is read by key: _root_of)
                    root = eid + raw[17:23] + s.to_bytes(2, "big") if state == b"K" else b""
                    hits.append(_Hit(state, s, eid, m, ticket_of(raw), root))
            if reload:
                with self._errors("load"):
                    self._logs.load(self._reader())
                self._same_store()  # (a reset keeps the store's id; a new store has its own)
                # (a log compacted, or the store reset: then its host and job ids are new)
                self._adopt_logs()
            if not again:
                found = self._kept_pages(aliases, fps, now, skip)  # (the aliases' pages)
                return hits + [_Hit(b"K", rs, r[:8], m, t, r, rank) for rs, r, m, t, rank in found]
            todo = again
        raise StoreUnavailable(f"{self._where()}: search: the logs kept changing under this client")

    def _root_of(self, best: _Hit, now: float | str) -> bytes:
        """What the dropped page's alias records of the kept page ``best`` (its root; empty:
        no alias): the look's, or read for a page kept while this check waited for it."""
        if best.state == b"K":
            return best.root
        return self._waited_root(best.shard, best.match.key, best.ticket, now)

    def _wait(self, hits: list[_Hit], ticket: int) -> tuple[_Hit | None, bool]:
        """The nearest kept entry this check yields to, after waiting out every near pending
        entry without a ticket or with an earlier one (None: the check keeps its page), and
        whether one of those went (dropped, or its check gave up)."""
        gone = False
        kept = [h for h in hits if h.state == b"K"]
        waiting = [h for h in hits if h.state == b"C" or (h.state == b"P" and h.ticket < ticket)]
        start = time.monotonic()
        delay, give_up = 0.001, start + 2 * self.pending_timeout + 10
        # with aliases, which kept page a page is dropped for matters (its alias stands for
        # it): wait for every earlier near check, as their order would decide; once a kept
        # page is found, at most ORDER_WAIT seconds (a dead client's check: dropped anyway)
        while waiting and (
            not kept or (self.rule.aliases and time.monotonic() - start < ORDER_WAIT)
        ):
            if time.monotonic() > give_up:
                raise StoreUnavailable(f"{self._where()}: check: waited too long for other checks")
            time.sleep(delay)
            delay = min(2 * delay, 0.01)
            by_shard: dict[int, list[_Hit]] = {}
            for h in waiting:
                by_shard.setdefault(h.shard, []).append(h)
            calls = [
                (self._shards[s], [*self._head("poll", 0.0), *(h.id for h in hs)])
                for s, hs in by_shard.items()
            ]
            with self._errors("check", write=True):
                replies = send_many(calls)
            waiting = []
            for hs, reply in zip(by_shard.values(), replies, strict=True):
                if isinstance(reply, Exception):
                    with self._errors("check"):
                        raise reply
                for h, st in zip(hs, reply, strict=True):
                    if st[:1] == b"P":
                        h.ticket = int.from_bytes(st[1:9], "big")  # (the root an alias keeps)
                    if st == b"K":
                        kept.append(h)
                    elif st == b"C" or (st[:1] == b"P" and h.ticket < ticket):
                        waiting.append(h)
                    elif st == b"G":
                        gone = True
        return (min(kept, key=_Hit.order) if kept else None), gone

    # -- the interface -----------------------------------------------------------------------
    def _check(
        self, fps: Fingerprints, key: str, text: str | None, job: str | None, source: Source
    ) -> Verdict:
        if self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")
        s = self.shard(key)
        src = "items" if source == "items" else "pages"
        delay, give_up = 0.001, time.monotonic() + 2 * self.pending_timeout + 10
        for _ in range(1_000_000):
            if time.monotonic() > give_up:
                raise StoreUnavailable(f"{self._where()}: check of {key!r}: gave up waiting")
            now = rk.call_time(self.clock)
            names_read = self._names_read
            with self._errors("check", write=True):  # (a new host's or job's id: a round trip)
                address = self._names.address(key)
                assert address is not None
                args = [
                    *self._head("reserve", now),
                    address,
                    "0" if job is None else "1",
                    self._names.job_part(job),
                    self._record(fps, key, rk.record_time(now), job, text),
                    src,
                    self.pending_timeout,
                    os.urandom(8),  # a retried reserve (a lost reply) gets its entry back
                ]
            reply = self._call("check", s, args)
            kind = reply[0][:1]
            if kind == b"W":  # another check of this key is under way
                time.sleep(delay)
                delay = min(2 * delay, 0.01)
                continue
            if kind != b"P":
                if len(reply[0]) > 1:
                    with self._errors("check"):
                        match = self._names.match(reply[0], 1)[0]
                    return Verdict(_STATUS[kind], match)
                return Verdict(_STATUS[kind])
            pid = reply[1]
            ticket = int(self._call("check", -1, self._head("ticket", now)))
            query = self._record(fps, "", 0.0, None, None)  # the fingerprints, not the text
            try:
                own = (s, pid, ticket.to_bytes(8, "big"))
                hits = self._look(fps, query, address[16:], own, True, key)
                best, gone = self._wait(hits, ticket)
                for _ in range(8):
                    if not gone or not self.rule.aliases:
                        break
                    # an earlier check this one waited for went: dropped, it may now be an
                    # alias of a kept page this page is near (docs/operations.md, "Redis
                    # Cluster"): look again, as a check after it would
                    hits = self._look(fps, query, address[16:], own, True, key)
                    best, gone = self._wait(hits, ticket)
            except _Restart:
                continue
            if self._names_read != names_read:
                # the logs were reloaded: if the store was reset, the ids this record was
                # encoded with may name other hosts now: drop it and encode it again
                self._call("check", s, [*self._head("settle", now), pid, address, "D", "", 0])
                continue
            settle = [
                *self._head("settle", now),
                pid,
                address,
                "D" if best else "K",
                src,
                kept_for(self.pending_timeout),
                self._root_of(best, now) if best and self.rule.aliases else b"",
            ]
            status = self._call("check", s, settle)
            if status == b"X":
                continue
            if best is None:
                return Verdict(_STATUS[status[:1]])
            m = best.match
            at = rk.record_time(now)  # (the server's time replaces it: stamped below)
            d = Decision(key, fps.fp, m.key, m.fingerprint, m.distance, at, text, m.wide_distance)
            self._call("check", -1, [*self._head("decide", now), encode_decision(d)])
            return Verdict("duplicate", m)
        raise AssertionError("unreachable")

    def _near(self, fps: Fingerprints, exclude: str | None) -> list[Match]:
        if self._empty:
            return []
        skip = b""
        if exclude is not None:
            with self._errors("near"):
                away = self._names.address(exclude, assign=False)
            skip = b"" if away is None else away[16:]  # (its key bytes)
        hits = self._look(fps, self._record(fps, "", 0.0, None, None), skip, None, False, exclude)
        seen: set[str] = set()  # (a page found directly and through aliases: at its nearest)
        out = []
        for h in sorted((h for h in hits if h.state == b"K"), key=_Hit.order):
            if h.match.key not in seen:
                seen.add(h.match.key)
                out.append(h.match)
        return out
