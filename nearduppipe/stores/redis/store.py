"""``redis://host:port/db``, ``rediss://…``, ``unix:///path/redis.sock?db=0``: one store shared by
many crawler processes and machines (store format 3; a format-2 store of an earlier release is
refused, for reading too, with the command that converts it in place: ``nearduppipe migrate
URI``, :mod:`.migrate`).

A check is one atomic call of ``redis_check_and_add.lua``: the own entry, the candidate
search, the verdict by the rule, the insert or the decision. On Redis 7 the call is an
``FCALL`` of the store's function library, else an ``EVALSHA`` of the same Lua as a script
(:mod:`.program`). The candidate search is split:
each client keeps the store's fingerprint index in memory (:mod:`.log`, read from the
log ``{P}:n`` at open) and sends the candidates it finds with the log position its index is
at; the script adds every entry logged since that position, drops candidates removed since,
and returns the members logged since, which the client's index takes in. So the verdict is
exactly what a search of the whole store at that moment would give, and two workers can
never both keep two near-duplicates sent at the same moment
(tests/stores/redis/test_redis_store.py races eight processes). A client more than 4,096
members behind (idle while others wrote) first
reads the log; one whose log was compacted or reset meanwhile reloads it, and so does one
whose server was restored from an older snapshot (the same epoch comes back with it: the log
is shorter than the client's position, or the member there is not the last one it read).

Keys: :mod:`.keys` lists them (format 3: 65,536 bucket hashes at the page keys' 8-byte
addresses, host prefixes and job names stored once, the log of 16-byte members).

**Cost** (``benchmarks/redis_bench.py``, docs/operations.md; why the index is in the client:
:mod:`.log`): one round trip per check; the server reads only the candidates' records and the
members logged since the client's last call.

**TTL.** Entries older than ``ttl`` never match and an expired own entry counts as none. Each
write looks at the entries of 16 log members (a cursor over the log) and deletes those older
than ``2 * ttl``; :meth:`prune` deletes all older than ``ttl``; each bucket and the log expire
``2 * ttl`` after their last write, so an abandoned store leaves Redis by itself (its meta,
decisions and prefix and job tables stay). A bucket that expires takes its records uncounted,
so the size of such a store is the buckets' count, not the meta's counter (``len()``).

**Time** is the server's: the script reads ``TIME`` for the TTL cutoffs and sweeps and stamps
the entries (``stored_at``) and decisions it writes with it, so a crawler on a machine whose
clock is off neither expires nor deletes the others' entries, nor stamps its own in the future
or past (issue #31). ``clock``: leave it ``None``; a callable given instead is trusted as the
time of every call of this client (tests and replays; every client of the store must then
use the same one). An explicit ``stored_at`` (``add``, imports, ``copy``) is kept as given.

**Retries.** The client retries connection errors twice (50-100 ms backoff) before
:class:`StoreUnavailable`. A retried check finds its first reply (keyed by a per-call token);
a retried ``add`` replaces the entry with itself; a retried import batch of decisions could
append them twice.

**A lost store** (:mod:`.loss`): a call on a store whose ``{P}:meta`` is gone (flushed,
deleted, evicted, a restart without persistence) raises :class:`StoreUnavailable` and so does
every later one; evictions are watched once a second; opening what is left says so. An
evicting ``maxmemory-policy`` is refused at open unless ``allow_eviction`` (``?allow_eviction=1``).
A store created anew under the prefix after a loss has another identity (``id`` in the meta; a
reset keeps it): a client that had the lost one open refuses it the same way.

**One TTL per store** (:mod:`..ttl_rule`): the meta records it; a writer with another one is
refused at open unless ``change_ttl``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, cast

from ...fingerprint.rule import Fingerprints, Rule
from ..base import (
    COUNTERS,
    DEFAULT_MAX_DECISIONS,
    Alias,
    Decision,
    Entry,
    Match,
    Source,
    StoreError,
    StoreUnavailable,
    Verdict,
    check_max_decisions,
    check_ttl,
)
from ..memory import MemoryStore
from . import buckets, bulk, client_options
from . import keys as rk
from .base import RedisBase
from .codec import decision_head, decode_decision
from .format3 import decode_record
from .log import compact
from .loss import Watch, fresh_ids, parse_flag
from .program import SINGLE3
from .shard import Guard, NodeShard

__all__ = ["RedisStore", "StoreUnavailable"]

_BATCH = 500
_STATUS = rk.REPLY_STATUS


class RedisStore(RedisBase):
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
        clock: Callable[[], float] | None = None,
        blocks: int | None = None,
        timeout: float = 5.0,
        params: dict[str, Any] | None = None,
        allow_eviction: bool = False,
        change_ttl: bool = False,
    ) -> None:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        self._redis = redis
        client_uri, ours = rk.split_uri(uri)
        self.uri = rk.redact(uri, uri)
        self.prefix = ours.get("prefix") or prefix or f"neardup:{name or 'default'}"
        self.ttl = check_ttl(rk.uri_ttl(ours, ttl, self.uri), self.uri)
        self.max_decisions = check_max_decisions(max_decisions, self.uri)
        self.read_only = bool(read_only)
        self.clock = clock
        self._f1: MemoryStore | None = None  # a format-1 store opened read-only
        self._instance = os.urandom(8).hex()
        self._reply_fields: set[str] = set()
        self._fixed_args: dict[tuple[int, bool], bytes] = {}
        self._absent = False
        self._change_ttl = bool(change_ttl)
        self._carried: str | None = None
        self._size = buckets.Size()  # (len() when the store's keys expire)
        if "allow_eviction" in ours:
            allow_eviction = parse_flag(ours["allow_eviction"], "allow_eviction", self.uri)
        where = f"{self.uri} prefix {self.prefix!r}"
        watch = Watch(where, self.ttl, bool(allow_eviction))
        self._guard = Guard(self.uri, uri, self.prefix, self.read_only, watch, meta=self._k("meta"))
        if reset and self.read_only:
            raise StoreError(f"{self.uri}: reset=True and read_only=True contradict each other")
        options: dict[str, Any] = {
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "health_check_interval": 30,
            "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
            "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        }
        client_options.check_options(
            self.uri, uri, params
        )  # (a bad value: one line, not a socket's error)
        try:
            # the user's options (NEARDUP_REDIS_PARAMS) win over these defaults
            self._client = redis.Redis.from_url(client_uri, **{**options, **(params or {})})
        except (ValueError, TypeError) as e:
            raise StoreError(f"{self.uri}: {rk.redact(str(e), uri)}") from e
        self._guard.client = self._client
        keys = rk.store_keys3(self.prefix)
        self._shard = NodeShard(self._client, self.prefix, keys, self._guard, SINGLE3)
        with client_options.bad_params(self.uri, uri, params), self._errors("open"):
            watch.start(self._client, self.read_only)  # (before anything is written)
            if reset:
                self._reset(blocks, rule)
            self._open_meta(rule, blocks)

    def __enter__(self) -> RedisStore:
        return self

    # -- the interface -----------------------------------------------------------------------
    def _check(
        self, fps: Fingerprints, key: str, text: str | None, job: str | None, source: Source
    ) -> Verdict:
        if self._f1 is not None or self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")
        now = rk.call_time(self.clock)
        t = rk.record_time(now)  # (the server's time replaces it: see TIME above)

        def encode() -> list[Any]:
            with self._errors("check", write=True):  # (a new host's or job's id: a round trip)
                return [
                    now,
                    self._names.address(key),
                    b"0" if job is None else b"1",
                    self._names.job_part(job),
                    self._record(fps, key, t, job, text),
                    decision_head(fps.fp, t, key, text),
                    b"items" if source == "items" else b"pages",
                ]

        reply: bytes = self._search_call("check", fps.fp, encode(), os.urandom(8), encode)
        status = _STATUS[reply[:1]]
        if len(reply) > 1:
            with self._errors("check"):
                match = self._names.match(reply, 1)[0]
            return Verdict(status, match)
        return Verdict(status)

    def _near(self, fps: Fingerprints, exclude: str | None) -> list[Match]:
        if self._f1 is not None:
            return self._f1.near(fps, exclude=exclude)
        now = rk.call_time(self.clock)

        def encode() -> list[Any]:
            with self._errors("near"):
                away = self._names.address(exclude, assign=False) if exclude else None
                return [now, away or b"", self._record(fps, "", rk.record_time(now), None, None)]

        reply: bytes = self._search_call("near", fps.fp, encode(), encode=encode)
        out, pos = [], 0
        with self._errors("near"):
            while pos < len(reply):
                m, pos = self._names.match(reply, pos)
                out.append(m)
        return out

    def _add(
        self,
        fps: Fingerprints,
        key: str,
        text: str | None,
        job: str | None,
        stored_at: float | None,
    ) -> None:
        now = rk.call_time(self.clock, stamp=stored_at is None)
        t = rk.record_time(now) if stored_at is None else stored_at

        def call(epoch: str) -> Any:
            rec = self._record(fps, key, t, job, text)
            args = [*self._head_args("add", now, epoch), self._names.address(key), rec]
            return self._shard.send(args)

        self._keyed("add", True, call)

    def _get(self, key: str) -> Entry | None:
        if self._f1 is not None:
            return self._f1.get(key)

        def call(epoch: str) -> bytes | None:
            address = self._names.address(key, assign=False)
            if address is None:  # (a host the store never saw)
                return None
            raw = self._shard.send([*self._head_args("get", 0.0, epoch), address])
            return raw or None

        raw = self._keyed("get", False, call)
        with self._errors("get"):
            return None if raw is None else self._names.entry(raw)

    def _remove(self, key: str) -> bool:

        def call(epoch: str) -> bool:
            address = self._names.address(key, assign=False)
            if address is None:
                return False
            args = [*self._head_args("remove", 0.0, epoch), address]
            return bool(self._shard.send(args))

        return bool(self._keyed("remove", True, call))

    def _lease(self, job: str, seconds: float) -> None:
        if self._f1 is not None or self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")
        now = rk.call_time(self.clock)

        def call(epoch: str) -> Any:
            part = self._names.job_part(job).hex()
            args = [*self._head_args("lease", now, epoch), part, seconds]
            return self._shard.send(args)

        self._keyed("lease", True, call)

    def __len__(self) -> int:
        if self._f1 is not None and not self._guard.closed:
            return len(self._f1)
        with self._errors("count"):
            return self._size(self._client, self.prefix, aliases=self.rule.aliases)

    @property
    def alias_count(self) -> int:
        """The meta's counter; counted in the buckets when the store's keys expire (an
        expired bucket's aliases leave uncounted, as its entries do: ``buckets.Size``)."""
        if not self.rule.aliases or self._f1 is not None:
            return 0
        with self._errors("count"):
            n = int(self._client.hget(self._k("meta"), "aliases") or 0)
            if n and self._client.pttl(self._k("n")) != -1:
                n = buckets.count_aliases(self._client, self.prefix)
        return n

    def _hint(self) -> int:
        """The meta's counters: the records a whole-store read plans its calls by (``len()``
        may count every bucket for it), aliases included (they are read too)."""
        live, aliases = self._client.hmget(self._k("meta"), ["live", "aliases"])
        return int(live or 0) + int(aliases or 0)

    def entries(self) -> Iterator[Entry]:
        if self._f1 is not None:
            yield from self._f1.entries()
            return

        def read() -> list[bytes]:
            return [raw for _, raw in buckets.records(self._client, self.prefix, self._hint())]

        with self._errors("scan"):  # (in the order stored: base.Store.entries)
            entries = self._names.scan(read, self._refresh_names, self._where())
        yield from entries

    def aliases(self) -> Iterator[Alias]:
        if self._f1 is not None or not self.rule.aliases:
            return
        now = rk.call_time(self.clock, stamp=False)

        def read() -> list[tuple[bytes, bytes]]:
            rows = list(buckets.records(self._client, self.prefix, self._hint(), aliases_only=True))
            roots = {raw[-16:-8] for _, raw in rows}  # (the kept pages' addresses)
            return rows + buckets.read_at(self._client, self.prefix, roots)

        with self._errors("scan"):  # (in the order stored)
            cutoff = rk.ttl_cutoff(self._client, now, self.ttl)
            decode = partial(self._names.aliases, cutoff=cutoff, root_at=_root_address)
            found = self._names.stable(read, decode, self._refresh_names, self._where())
        yield from found

    def _import_aliases(self, aliases: Iterable[Alias]) -> int:
        if self._f1 is not None or not self.rule.aliases:
            return super()._import_aliases(aliases)
        now = rk.call_time(self.clock, stamp=False)
        return bulk.import_aliases(self._shard, self._names, self._refresh_names, aliases, now)

    def decisions(self) -> Iterator[Decision]:
        start, step = 0, 1000
        while True:
            with self._errors("scan"):
                chunk = self._client.lrange(self._k("d"), start, start + step - 1)
            yield from (decode_decision(raw) for raw in cast(list[bytes], chunk))
            if len(chunk) < step:
                return
            start += step

    def decision_count(self) -> int:
        with self._errors("count"):
            return int(self._client.llen(self._k("d")))

    def counters(self) -> dict[str, int]:
        names = list(COUNTERS)
        with self._errors("count"):
            values = self._client.hmget(self._k("meta"), names)
        counts = {n: int(v or 0) for n, v in zip(names, values, strict=True)}
        if values[names.index("new_total")] is None:  # not counted yet (opened read-only)
            counts["new_total"] = len(self)
        return counts

    def _import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        now = rk.call_time(self.clock, stamp=False)
        return bulk.import_records(
            self._shard, self._names, self._refresh_names, entries, decisions, now
        )

    def now(self) -> float:
        t = rk.call_time(self.clock, stamp=False)
        with self._errors("time"):
            return rk.server_time(self._client) if isinstance(t, str) else t

    def prune(self) -> int:
        """Delete every entry older than the TTL now (the sweep only reaches 2 * ttl), and
        every alias whose kept page is gone."""
        if self.ttl is None and not self.rule.aliases:
            return 0
        now = rk.call_time(self.clock, stamp=False)
        with self._errors("prune", write=True):
            cutoff = rk.ttl_cutoff(self._client, now, self.ttl)
            old = []
            for address, raw in buckets.records(self._client, self.prefix, self._hint()):
                r = decode_record(raw)
                if r.stored_at < cutoff or r.root is not None:  # (the script judges again)
                    old.append(address)
        removed = 0  # (the script judges each again by its own time)
        for i in range(0, len(old), _BATCH):
            removed += int(self._run("prune", self._head_args("prune", now) + old[i : i + _BATCH]))
        self.compact(min_dead=1)
        return removed

    def compact(self, min_dead: int = 1) -> bool:
        """Rewrite the log without the members of removed entries when there are at least
        ``min_dead`` of them; the other clients' indexes reload it on their next call."""
        with self._errors("compact", write=True):
            dead = int(self._client.hget(self._k("meta"), "dead") or 0)
            if dead < min_dead or not compact(self._shard):
                return False
            self._log.load(self._client, self._k("meta"), self._k("n"))
            self._adopt(self._log.epoch)  # (a reset since the switch: the ids go too)
        return True

    def _keyed(self, what: str, write: bool, call: Callable[[str], Any]) -> Any:
        """``call(epoch)``, which encodes page keys with this client's host and job ids and
        runs an add, get or remove with ``epoch``, the one they were read under (the ids are
        the store's own, ``{P}:u``/``{P}:j``: :func:`.loss.fresh_ids`)."""
        return fresh_ids(
            lambda: call(self._shard.epoch),
            self._refresh_names,
            lambda: self._errors(what, write=write),
            f"{self._where()}: {what}",
        )

    def _refresh_names(self) -> None:
        """Drop the cached host and job ids, then publish the meta's epoch, read first: the
        next ids are read under it (dropped before it is published, so another thread that
        sends the new epoch cannot encode with the old ids)."""
        raw = self._client.hget(self._k("meta"), "epoch")
        if raw is not None and raw.decode() != self._shard.epoch:
            self._same_store()  # (not a reset: a store created anew after a loss)
        self._names.forget()
        self._shard.epoch = "-" if raw is None else raw.decode()

    def close(self) -> None:
        if self._guard.closed:
            return
        try:
            if self._reply_fields:
                self._client.hdel(self._k("r"), *list(self._reply_fields))
        except self._redis.RedisError:
            pass  # the replies expire with their hash
        finally:
            self._guard.closed = True
            self._client.close()


def _root_address(root: bytes) -> bytes:
    """Where an alias's kept page is on one node: the address its root begins with."""
    return root[:8]


def open_single(uri: str, rule: Rule | None = None, **options: Any) -> RedisStore:
    """A store on one Redis server (``redis://``, ``rediss://``, ``unix://``), its options
    checked: what the backend object (:mod:`.backend`) opens."""
    return rk.open_checked("redis store", RedisStore, rk.OPTIONS, uri, rule, **options)
