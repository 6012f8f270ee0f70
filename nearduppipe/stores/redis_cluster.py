"""``redis+cluster://host:port/?prefix=…`` (``rediss+cluster://`` with TLS): the Redis store
spread over a Redis Cluster, for stores that outgrow one node.

The store is split into ``S`` shards (12 unless ``shards=`` says otherwise when it is created;
recorded in its meta), each a single-node store's keys under its own hash tag, so the shards,
and with them the records, the logs and the memory, spread over the slots and the masters
(:mod:`._redis_cluster_open`). A page key lives in shard ``crc32(key) % S``: everything about
one key (its entry, a revisit, a replacement) is one script call in one slot. Each client's
index (:mod:`._redis_cluster_log`) follows every shard's log.

A check cannot be one atomic call when its near-duplicates may be in any shard. It is four
steps (docs/operations.md, "Redis Cluster", argues why exactly one page of a group of racing
near-duplicates is kept):

1. *reserve*, in the key's shard: the own entry (``again``, ``unchanged``: done), else the
   page is stored as a *pending* entry and logged (one pending check per key at a time);
2. a *ticket*: ``HINCRBY {P}:meta order 1``, the store's total order, taken after the entry
   is visible;
3. *look*, every shard at once: the ticket is written to the pending entry, and each shard
   answers its near entries (the client's candidates and what it logged since), each kept,
   pending with a ticket, or pending without one yet;
4. *settle*: a kept near entry makes the page a duplicate. Otherwise it waits for each near
   pending entry without a ticket or with an earlier one (polling their shards) until it is
   kept (duplicate) or gone; then it keeps itself, or removes itself and records the decision.

A pending entry whose client died lives ``pending_timeout`` seconds (30), judged by its
shard's clock; then it is gone for everyone and its owner's settle fails (the check starts
again). TTL, ``max_decisions`` (one decisions list), counters (summed over shards) and the
record format are the single-node store's.
"""

from __future__ import annotations

import importlib.resources
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from ..rule import Fingerprints, Rule
from . import _redis_keys as rk
from ._redis_cluster_log import READ_LUA, ShardLogs, reader
from ._redis_cluster_open import client_uri, open_meta, reset_keys, shard_keys, shard_tags
from ._redis_cluster_wire import ClusterWire
from ._redis_codec import (
    decode_decision,
    decode_entry,
    decode_match,
    encode_decision,
    encode_entry,
    encode_job,
    entry_head,
)
from ._redis_log import compact
from .base import (
    COUNTERS,
    DEFAULT_MAX_DECISIONS,
    Decision,
    Entry,
    Match,
    Source,
    Store,
    StoreError,
    StoreUnavailable,
    Verdict,
    check_fingerprints,
    check_key,
    check_max_decisions,
    check_ttl,
    clean_text,
    register_store,
)

__all__ = ["RedisClusterStore"]

_LUA = "\n".join(
    (importlib.resources.files(__package__) / name).read_text("utf-8")
    for name in (
        "redis_entries.lua",
        "redis_search.lua",
        "redis_cluster.lua",
        "redis_check_and_add.lua",
    )
)
_BATCH = 500
_NO_TICKET = b"\0" * 8
_STATUS = {b"N": "new", b"C": "changed", b"A": "again", b"U": "unchanged", b"D": "duplicate"}
_UNAVAILABLE = ("OOM", "READONLY", "LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN")


class _Restart(Exception):
    """This check's pending entry passed its deadline: others treat it as gone; start again."""


def ticket_of(raw: bytes) -> int:
    """An entry's place in the store's order (the record's table-field slot; 0 if none)."""
    pos = entry_head(raw)[3]
    return int.from_bytes(raw[pos + 2 : pos + 10], "big") if raw[pos : pos + 2] == b"\0\2" else 0


class _Hit:
    __slots__ = ("id", "match", "shard", "state", "ticket")

    def __init__(self, state: bytes, shard: int, eid: bytes, match: Match, ticket: int) -> None:
        self.state, self.shard, self.id, self.match, self.ticket = state, shard, eid, match, ticket

    def order(self) -> tuple[int, int, int]:
        m = self.match
        return (
            8 * m.distance if m.wide_distance is None else m.wide_distance,
            m.distance,
            self.ticket,
        )


class RedisClusterStore(Store):
    def __init__(
        self,
        uri: str,
        rule: Rule | None = None,
        *,
        prefix: str | None = None,
        name: str | None = None,
        reset: bool = False,
        ttl: float | None = None,
        max_decisions: int | None = DEFAULT_MAX_DECISIONS,
        read_only: bool = False,
        clock: Callable[[], float] = time.time,
        blocks: int | None = None,
        shards: int | None = None,
        pending_timeout: float = 30.0,
        timeout: float = 5.0,
        params: dict[str, Any] | None = None,
    ) -> None:
        import redis
        from redis.cluster import RedisCluster

        self._redis = redis
        self._raw_uri = uri
        self.uri = rk.redact(uri, uri)
        base, ours = client_uri(uri)
        self.prefix = ours.get("prefix") or prefix or f"neardup:{name or 'default'}"
        self.ttl = check_ttl(float(ours["ttl"]) if ours.get("ttl") else ttl, self.uri)
        self.max_decisions = check_max_decisions(max_decisions, self.uri)
        self.read_only = bool(read_only)
        self.clock = clock
        self.pending_timeout = float(pending_timeout)
        self._closed = True
        if reset and self.read_only:
            raise StoreError(f"{self.uri}: reset=True and read_only=True contradict each other")
        shard_tags(self.prefix, 1)  # a prefix with braces: refused before connecting
        try:
            self._client = RedisCluster.from_url(
                base, socket_timeout=timeout, socket_connect_timeout=timeout, **(params or {})
            )
        except redis.exceptions.RedisClusterException as e:
            raise StoreError(
                f"{self._where()}: not a Redis Cluster ({e}); a single Redis server is redis://"
            ) from None
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise StoreUnavailable(
                f"{self._where()}: cannot connect: {rk.redact(str(e), uri)}"
            ) from None
        except (ValueError, TypeError) as e:
            raise StoreError(f"{self.uri}: {rk.redact(str(e), uri)}") from e
        self._closed = False
        with self._errors("open"):
            if reset:
                reset_keys(self._client, self.prefix)
            self.rule, self.layout, self.shards, exists = open_meta(
                self._client, self._where(), self.prefix, rule, blocks, shards, self.read_only
            )
            self._tags = shard_tags(self.prefix, self.shards)
            self._keys = [shard_keys(t) for t in self._tags]
            self._global = shard_keys(self.prefix)
            self._logs = ShardLogs(self.layout, self.shards)
            self._read_script = self._client.register_script(READ_LUA)
            script = self._client.register_script(_LUA)
            self._wire = ClusterWire(self._client, _LUA, script.sha)
            self._empty = not exists
            if exists and not self.read_only and self.ttl is None:
                for keys in self._keys:  # undo the expiry of an earlier TTL run
                    for k in (keys[1], keys[2], keys[5]):
                        self._client.persist(k)

    def __enter__(self) -> RedisClusterStore:
        return self

    # -- plumbing ----------------------------------------------------------------------------
    def _where(self) -> str:
        return f"{self.uri} prefix {self.prefix!r}"

    def _head(self, mode: str, now: float, pos: int = 0, epoch: str = "") -> list[Any]:
        w = self.rule.wide_threshold
        return [
            mode,
            repr(now),
            "" if self.ttl is None else repr(self.ttl),
            "" if self.max_decisions is None else self.max_decisions,
            self.rule.radius,
            -1 if w is None else w,
            min(self.rule.radius, self.rule.legacy_distance),
            "",
            "",
            pos,
            epoch,
        ]

    def shard(self, key: str) -> int:
        return zlib.crc32(key.encode("utf-8")) % self.shards

    def _call(self, what: str, shard: int, args: list[Any], write: bool = True) -> Any:
        keys = self._global if shard < 0 else self._keys[shard]
        with self._errors(what, write=write):
            return self._wire.call(keys, args)

    def _reader(self) -> Any:
        return reader(
            self._client, self._read_script, lambda s: (self._keys[s][0], self._keys[s][5])
        )

    def _record(
        self,
        fps: Fingerprints,
        key: str,
        t: float,
        job: str | None,
        text: str | None,
        ticket: bytes = _NO_TICKET,
    ) -> bytes:
        return encode_entry(fps.fp, fps.wide, t, ticket, job, key, text)

    @contextmanager
    def _errors(self, what: str, write: bool = False) -> Iterator[None]:
        """As the single-node store's: unreachable, timed out, out of memory, a cluster down
        -> StoreUnavailable; other server errors -> StoreError; never the password."""
        if self._closed:
            raise StoreError(f"store {self.uri} is closed")
        if write and self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")
        r = self._redis
        try:
            yield
        except (r.ConnectionError, r.TimeoutError, r.exceptions.ClusterError) as e:
            msg = rk.redact(str(e), self._raw_uri)
            raise StoreUnavailable(f"{self._where()}: {what} failed: {msg}") from None
        except r.RedisError as e:
            msg = rk.redact(str(e), self._raw_uri)
            cls = StoreUnavailable if msg.startswith(_UNAVAILABLE) else StoreError
            raise cls(f"{self._where()}: {what} failed: {msg}") from None

    # -- the search over every shard ---------------------------------------------------------
    def _look(
        self, fp: int, qrec: bytes, skip_key: str, own: tuple[int, bytes, bytes] | None, clean: bool
    ) -> list[_Hit]:
        """Every shard's near entries (not gone) for the query record; ``own`` (shard, pending
        id, ticket) also writes this check's ticket."""
        if not self._logs.loaded:
            with self._errors("load"):
                self._logs.load(self._reader())
        now = float(self.clock())
        todo = list(range(self.shards))
        hits: list[_Hit] = []
        for _ in range(8):
            cands = self._logs.candidates(fp, self.rule.radius)
            calls = []
            for s in todo:
                pos, epoch, cand = cands[s]
                mine = own is not None and own[0] == s
                tail = [own[1], own[2]] if mine and own else ["", ""]
                args = [
                    *self._head("look", now, pos, epoch),
                    qrec,
                    cand,
                    skip_key,
                    *tail,
                    "1" if clean else "0",
                ]
                calls.append((self._keys[s], args))
            with self._errors("search"):
                replies = self._wire.call_many(calls)
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
                    m, end = decode_match(blob, pos + 9)
                    raw = blob[pos + 17 : end]
                    hits.append(_Hit(state, s, eid, m, ticket_of(raw)))
                    pos = end
            if reload:
                with self._errors("load"):
                    self._logs.load(self._reader())
            if not again:
                return hits
            todo = again
        raise StoreUnavailable(f"{self._where()}: search: the logs kept changing under this client")

    def _wait(self, hits: list[_Hit], ticket: int) -> _Hit | None:
        """The nearest kept entry this check yields to, after waiting out every near pending
        entry without a ticket or with an earlier one; None: the check keeps its page."""
        kept = [h for h in hits if h.state == b"K"]
        waiting = [h for h in hits if h.state == b"C" or (h.state == b"P" and h.ticket < ticket)]
        delay, give_up = 0.001, time.monotonic() + 2 * self.pending_timeout + 10
        while waiting and not kept:
            if time.monotonic() > give_up:
                raise StoreUnavailable(f"{self._where()}: check: waited too long for other checks")
            time.sleep(delay)
            delay = min(2 * delay, 0.01)
            by_shard: dict[int, list[_Hit]] = {}
            for h in waiting:
                by_shard.setdefault(h.shard, []).append(h)
            calls = [
                (self._keys[s], [*self._head("poll", 0.0), *(h.id for h in hs)])
                for s, hs in by_shard.items()
            ]
            with self._errors("check", write=True):
                replies = self._wire.call_many(calls)
            waiting = []
            for hs, reply in zip(by_shard.values(), replies, strict=True):
                if isinstance(reply, Exception):
                    with self._errors("check"):
                        raise reply
                for h, st in zip(hs, reply, strict=True):
                    if st == b"K":
                        kept.append(h)
                    elif st == b"C" or (st[:1] == b"P" and int.from_bytes(st[1:9], "big") < ticket):
                        waiting.append(h)
        return min(kept, key=_Hit.order) if kept else None

    # -- the interface -----------------------------------------------------------------------
    def check(
        self,
        fps: Fingerprints | int,
        key: str,
        *,
        text: str | None = None,
        job: str | None = None,
        source: Source = "pages",
    ) -> Verdict:
        fps = check_fingerprints(fps)
        check_key(key)
        text = clean_text(text)
        if self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")
        s = self.shard(key)
        src = "items" if source == "items" else "pages"
        delay, give_up = 0.001, time.monotonic() + 2 * self.pending_timeout + 10
        while True:
            now = float(self.clock())
            rec = self._record(fps, key, now, job, text)
            args = [
                *self._head("reserve", now),
                key,
                "0" if job is None else "1",
                encode_job(job),
                rec,
                src,
                self.pending_timeout,
            ]
            reply = self._call("check", s, args)
            kind = reply[0][:1]
            if kind == b"W":  # another check of this key is under way
                if time.monotonic() > give_up:
                    raise StoreUnavailable(f"{self._where()}: check: {key!r} stayed pending")
                time.sleep(delay)
                delay = min(2 * delay, 0.01)
                continue
            if kind != b"P":
                if len(reply[0]) > 1:
                    return Verdict(_STATUS[kind], decode_match(reply[0], 1)[0])  # type: ignore[arg-type]
                return Verdict(_STATUS[kind])  # type: ignore[arg-type]
            pid = reply[1]
            with self._errors("check", write=True):
                ticket = int(self._client.hincrby(self._global[0], "order", 1))
            try:
                hits = self._look(fps.fp, rec, key, (s, pid, ticket.to_bytes(8, "big")), True)
                best = self._wait(hits, ticket)
            except _Restart:
                continue
            settle = [*self._head("settle", now), pid, key, "D" if best else "K", src]
            status = self._call("check", s, settle)
            if status == b"X":
                continue
            if best is None:
                return Verdict(_STATUS[status[:1]])  # type: ignore[arg-type]
            m = best.match
            d = Decision(key, fps.fp, m.key, m.fingerprint, m.distance, now, text, m.wide_distance)
            self._call("check", -1, [*self._head("decide", now), encode_decision(d)])
            return Verdict("duplicate", m)

    def near(self, fps: Fingerprints | int, *, exclude: str | None = None) -> list[Match]:
        fps = check_fingerprints(fps)
        if exclude is not None:
            check_key(exclude)
        if self._empty:
            return []
        now = float(self.clock())
        hits = self._look(
            fps.fp, self._record(fps, "", now, None, None), exclude or "", None, False
        )
        return [h.match for h in sorted((h for h in hits if h.state == b"K"), key=_Hit.order)]

    def add(
        self,
        fps: Fingerprints | int,
        key: str,
        *,
        text: str | None = None,
        job: str | None = None,
        stored_at: float | None = None,
    ) -> None:
        fps = check_fingerprints(fps)
        check_key(key)
        t = float(self.clock()) if stored_at is None else float(stored_at)
        self.import_records([Entry(key, fps.fp, t, text, fps.wide, job)], [])

    def get(self, key: str) -> Entry | None:
        check_key(key)
        if self._empty:
            return None
        raw = self._call("get", self.shard(key), [*self._head("get", 0.0), key], write=False)
        return decode_entry(raw) if raw else None

    def remove(self, key: str) -> bool:
        check_key(key)
        return bool(self._call("remove", self.shard(key), [*self._head("remove", 0.0), key]))

    def __len__(self) -> int:
        with self._errors("count"):
            return sum(int(self._client.hlen(keys[1])) for keys in self._keys)

    def entries(self) -> Iterator[Entry]:
        rows = []
        with self._errors("scan"):
            for keys in self._keys:
                pending = set(self._client.hkeys(keys[7]))
                for eid, raw in self._client.hscan_iter(keys[2], count=1000):
                    if eid not in pending:
                        rows.append((ticket_of(raw), raw))
        rows.sort(key=lambda r: r[0])  # tickets count up: the order stored
        for _, raw in rows:
            yield decode_entry(raw)

    def decisions(self) -> Iterator[Decision]:
        start, step = 0, 1000
        while True:
            with self._errors("scan"):
                chunk = self._client.lrange(self._global[3], start, start + step - 1)
            yield from (decode_decision(raw) for raw in cast(list[bytes], chunk))
            if len(chunk) < step:
                return
            start += step

    def decision_count(self) -> int:
        with self._errors("count"):
            return int(self._client.llen(self._global[3]))

    def counters(self) -> dict[str, int]:
        names = list(COUNTERS)
        counts = dict.fromkeys(names, 0)
        with self._errors("count"):
            for keys in [self._global, *self._keys]:
                values = self._client.hmget(keys[0], names)
                for n, v in zip(names, values, strict=True):
                    counts[n] += int(v or 0)
        return counts

    def import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        """Batches of 500 entries per shard; each entry gets a ticket (the store's order)."""
        now = float(self.clock())
        batches: dict[int, list[tuple[Entry, Fingerprints]]] = {}
        calls: list[tuple[list[str], list[Any]]] = []
        n = 0

        def flush(s: int) -> None:
            batch = batches.pop(s)
            with self._errors("import", write=True):
                last = int(self._client.hincrby(self._global[0], "order", len(batch)))
            args = self._head("add", now)
            for i, (e, f) in enumerate(batch):
                ticket = (last - len(batch) + 1 + i).to_bytes(8, "big")
                args += [
                    e.key,
                    self._record(f, e.key, e.stored_at, e.job, clean_text(e.text), ticket),
                ]
            calls.append((self._keys[s], args))
            if len(calls) >= 20:
                send()

        def send() -> None:
            with self._errors("import", write=True):
                for reply in self._wire.call_many(calls):
                    if isinstance(reply, Exception):
                        raise reply
            calls.clear()

        for e in entries:
            f = check_fingerprints(e.fingerprints)
            s = self.shard(check_key(e.key))
            batches.setdefault(s, []).append((e, f))
            n += 1
            if len(batches[s]) >= _BATCH:
                flush(s)
        for s in list(batches):
            flush(s)
        batch_d: list[bytes] = []
        for d in decisions:
            batch_d.append(encode_decision(d._replace(text=clean_text(d.text))))
            if len(batch_d) >= _BATCH:
                calls.append((self._global, [*self._head("decide", now), *batch_d]))
                batch_d = []
        if batch_d:
            calls.append((self._global, [*self._head("decide", now), *batch_d]))
        if calls:
            send()
        if n:
            self._empty = False
        return n

    def prune(self) -> int:
        """Delete every entry older than the TTL now, shard by shard, then compact the logs."""
        if self.ttl is None:
            return 0
        now, removed = float(self.clock()), 0
        for s, keys in enumerate(self._keys):
            with self._errors("prune", write=True):
                old = [
                    eid
                    for eid, raw in self._client.hscan_iter(keys[2], count=1000)
                    if entry_head(raw)[1] < now - self.ttl
                ]
            for i in range(0, len(old), _BATCH):
                removed += int(
                    self._call("prune", s, [*self._head("prune", now), *old[i : i + _BATCH]])
                )
        self.compact()
        return removed

    def compact(self, min_dead: int = 1) -> bool:
        """Rewrite each shard's log without the members of removed entries (and of dropped
        pending ones); every client's index reloads on its next call."""
        done = False
        for s, keys in enumerate(self._keys):
            with self._errors("compact", write=True):
                if int(self._client.hget(keys[0], "dead") or 0) >= min_dead:
                    done = compact(_ShardView(self, s)) or done
        if done and self._logs.loaded:
            with self._errors("load"):
                self._logs.load(self._reader())
        return done

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()


class _ShardView:
    """One shard as :func:`._redis_log.compact` sees a store."""

    def __init__(self, store: RedisClusterStore, shard: int) -> None:
        self._store, self._shard, self._client = store, shard, store._client

    def _k(self, name: str) -> str:
        return rk.key(self._store._tags[self._shard], name)

    def _head_args(self, mode: str, now: float, epoch: str = "") -> list[Any]:
        return self._store._head(mode, now, 0, epoch)

    def _run(self, what: str, args: list[Any]) -> Any:
        return self._store._call(what, self._shard, args)


_OPTIONS = {
    "prefix",
    "name",
    "reset",
    "ttl",
    "max_decisions",
    "read_only",
    "clock",
    "blocks",
    "shards",
    "pending_timeout",
    "timeout",
    "params",
}


def _open(uri: str, rule: Rule | None = None, **options: Any) -> RedisClusterStore:
    for ignored in ("commit_every", "commit_interval"):  # every call is a server transaction
        options.pop(ignored, None)
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise StoreError(f"redis cluster store {rk.redact(uri, uri)}: unknown options {unknown}")
    return RedisClusterStore(uri, rule, **options)


for _scheme in ("redis+cluster", "rediss+cluster"):
    register_store(_scheme, _open)
