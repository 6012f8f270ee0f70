"""``redis+cluster://host:port/?prefix=…`` (``rediss+cluster://`` with TLS): the Redis store
spread over a Redis Cluster, for stores that outgrow one node.

The store is split into ``S`` shards (12 unless ``shards=`` says otherwise when it is created;
recorded in its meta), each a single-node store's keys under its own hash tag, so the shards,
and with them the records, the logs and the memory, spread over the slots and the masters
(:mod:`.cluster_open`). A page key lives in shard ``crc32(key) % S``: everything about
one key (its entry, a revisit, a replacement) is one script call in one slot. Each client's
index (:mod:`.cluster_log`) follows every shard's log.

A check cannot be one atomic call when its near-duplicates may be in any shard. It is four
steps (docs/operations.md, "Redis Cluster", argues why exactly one page of a group of racing
near-duplicates is kept):

1. *reserve*, in the key's shard: the own entry (``again``, ``unchanged``: done), else the
   page is kept as a *pending* entry, apart from the stored ones (the key's old entry stays
   where it is until settle) and not logged (one pending check per key at a time);
2. a *ticket*: ``HINCRBY {P}:meta order 1``, the store's total order, taken after the entry
   is visible;
3. *look*, every shard at once: the ticket is written to the pending entry, and each shard
   answers its near entries (the client's candidates and what it logged since), each kept,
   pending with a ticket, or pending without one yet;
4. *settle*: a kept near entry makes the page a duplicate. Otherwise it waits for each near
   pending entry without a ticket or with an earlier one (polling their shards) until it is
   kept (duplicate) or gone; then it keeps itself (the record moves to its key's address and
   is logged; a check that saw it pending finds a marker saying so,
   :func:`.cluster_check.kept_for`), or removes itself and records the decision.

A pending entry whose client died lives ``pending_timeout`` seconds (30), judged by its
shard's clock; then it is gone for everyone and its owner's settle fails (the check starts
again). A connection error in a step is :class:`StoreUnavailable` after the wire's retries;
a retried reserve finds its pending entry by the check's token, the other steps are not
replayed from a stored reply as on one node (an abandoned pending entry expires).
TTL (by the server's time: each shard's ``TIME`` stamps its entries and cuts off its own,
unless a ``clock`` is given), ``max_decisions`` (one decisions list), counters (summed over
shards), the record format (format 3: each shard a single node's buckets, see
:mod:`.cluster_open`) and the log checks (a master restored from an older snapshot makes
its shards' logs reload) are the single-node store's; a record carries its ticket in the
sequence slot (:func:`.cluster_check.ticket_of`). A format-2 store (an earlier release's) is
refused until ``nearduppipe migrate URI`` converts it (:mod:`.cluster_migrate`).
"""

from __future__ import annotations

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
    StoreError,
    StoreUnavailable,
    check_max_decisions,
    check_ttl,
)
from . import buckets, bulk, client_options
from . import keys as rk
from .base import ALIASES_FORMAT
from .cluster_check import ClusterBase
from .cluster_log import READ_LUA, ShardLogs
from .cluster_open import (
    Recorded,
    check_params,
    client_uri,
    open_meta,
    reset_keys,
    shard_keys,
    shard_tags,
    warn_listpack,
)
from .cluster_wire import ClusterWire
from .codec import decode_decision
from .format3 import bucket_entries, decode_record
from .log import compact
from .loss import Watch, fresh_ids, parse_flag
from .names import Names
from .program import CLUSTER
from .shard import ClusterShard, Guard, Limits

__all__ = ["RedisClusterStore"]

_BATCH = 500


class RedisClusterStore(ClusterBase):
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
        shards: int | None = None,
        pending_timeout: float = 30.0,
        timeout: float = 5.0,
        params: dict[str, Any] | None = None,
        allow_eviction: bool = False,
        change_ttl: bool = False,
    ) -> None:
        import redis
        from redis.cluster import RedisCluster

        self._redis = redis
        self.uri = rk.redact(uri, uri)
        base, ours = client_uri(uri)
        self.prefix = ours.get("prefix") or prefix or f"neardup:{name or 'default'}"
        self.ttl = check_ttl(rk.uri_ttl(ours, ttl, self.uri), self.uri)
        self.max_decisions = check_max_decisions(max_decisions, self.uri)
        self.read_only = bool(read_only)
        self.clock = clock
        self.pending_timeout = float(pending_timeout)
        if "allow_eviction" in ours:
            allow_eviction = parse_flag(ours["allow_eviction"], "allow_eviction", self.uri)
        watch = Watch(f"{self.uri} prefix {self.prefix!r}", self.ttl, bool(allow_eviction))
        meta = f"{rk.key(self.prefix, 'meta')} or a shard's"  # (the key a loss names)
        guard = Guard(self.uri, uri, self.prefix, self.read_only, watch, meta=meta, cluster=True)
        self._guard = guard
        guard.closed = True  # (until connected)
        if reset and self.read_only:
            raise StoreError(f"{self.uri}: reset=True and read_only=True contradict each other")
        shard_tags(self.prefix, 1)  # a prefix with braces: refused before connecting
        try:
            defaults = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
            check_params(self.uri, params or {})
            client_options.check_options(self.uri, uri, params)
            with client_options.bad_params(
                self.uri, uri, params
            ):  # (the user's options win over the defaults)
                self._client = RedisCluster.from_url(base, **{**defaults, **(params or {})})
        except redis.exceptions.RedisClusterException as e:
            msg = rk.redact(str(e), uri)
            if "not enabled" in msg:
                raise StoreError(
                    f"{self._where()}: not a Redis Cluster ({msg}); a single server is redis://"
                ) from None
            raise StoreUnavailable(f"{self._where()}: cannot reach the cluster: {msg}") from None
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise StoreUnavailable(
                f"{self._where()}: cannot connect: {rk.redact(str(e), uri)}"
            ) from None
        except (ValueError, TypeError) as e:
            raise StoreError(f"{self.uri}: {rk.redact(str(e), uri)}") from e
        guard.client, guard.closed = self._client, False
        with self._errors("open"):
            watch.start(self._client, self.read_only)  # (every master; before writing)
            carried = reset_keys(self._client, self.prefix) if reset else None
            opened = open_meta(
                self._client,
                self._where(),
                self.uri,
                self.prefix,
                rule,
                blocks,
                shards,
                self.read_only,
                Recorded(self.ttl, bool(change_ttl), carried),
            )
            self.rule, self.layout, self.shards, self.bits = opened[:4]
            self.format_version = ALIASES_FORMAT if self.rule.aliases else 3
            guard.identity = opened.identity
            exists = opened.exists
            self._names = Names(self._client, self.prefix, self.bits)
            self._wire = ClusterWire(self._client, CLUSTER)
            limits = Limits(self.rule, self.ttl, self.max_decisions)
            self._top = ClusterShard(
                self._client, self.prefix, shard_keys(self.prefix), guard, self._wire
            )
            self._shards = [
                ClusterShard(self._client, tag, shard_keys(tag), guard, self._wire)
                for tag in shard_tags(self.prefix, self.shards)
            ]
            for shard in [self._top, *self._shards]:
                shard.limits = limits
            self._sizes = [buckets.Size() for _ in self._shards]  # (len() when keys expire)
            self._epochs_read = False
            self._refresh_names()
            self._logs = ShardLogs(self.layout, self.shards)
            self._read_script = self._client.register_script(READ_LUA)
            self._empty = not exists
            if not self.read_only:  # (as on one node: memory is the writers' business)
                lives = [int(self._client.hget(sh.key("meta"), "live") or 0) for sh in self._shards]
                fullest = bucket_entries(2 * max(lives), 1 << self.bits)  # (as on one node)
                warn_listpack(self._client, self._where(), fullest)
            if exists and not self.read_only:
                for s, shard in enumerate(self._shards):
                    log = shard.key("n")
                    if self.ttl is None and buckets.expiring(self._client, log, lives[s]):
                        self._client.persist(log)  # undo the expiry of an earlier TTL run
                        buckets.persist(self._client, shard.tag, self.bits)  # (and count)
                    # as on one node: compact a log whose dead members outnumber the live ones
                    dead, live = self._client.hmget(shard.key("meta"), ["dead", "live"])
                    if int(dead or 0) > max(10_000, int(live or 0)):
                        compact(shard)

    def __enter__(self) -> RedisClusterStore:
        return self

    # -- the rest of the interface ----------------------------------------------------------
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
        self._import([Entry(key, fps.fp, t, text, fps.wide, job)], [], now)

    def _get(self, key: str) -> Entry | None:
        if self._empty:
            return None
        raw = self._keyed("get", key, False)
        if not raw:  # (none, or a host the store never saw)
            return None
        with self._errors("get"):
            return self._names.entry(raw)

    def _remove(self, key: str) -> bool:
        return bool(self._keyed("remove", key, True))

    def _keyed(self, mode: str, key: str, write: bool) -> Any:
        """A get or remove of ``key`` in its shard, with the shard's epoch the cached host
        ids were read under: refused as stale after a reset by another client, whose new
        tables give them to other hosts (as :meth:`.store.RedisStore._keyed`)."""
        shard = self._shards[self.shard(key)]

        def attempt() -> Any:
            head = shard.head(mode, 0.0, 0, shard.epoch)  # (before the ids)
            address = self._names.address(key, assign=False)
            return None if address is None else shard.send([*head, address])

        errors = partial(self._errors, mode, write=write)
        return fresh_ids(attempt, self._refresh_names, errors, f"{self._where()}: {mode}")

    def _lease(self, job: str, seconds: float) -> None:
        """The lease goes to every shard's meta: a key's check reads it in the key's shard."""
        if self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")
        now = rk.call_time(self.clock)
        errors = partial(self._errors, "lease", write=True)
        for shard in self._shards:

            def attempt(shard: ClusterShard = shard) -> Any:
                head = shard.head("lease", now, 0, shard.epoch)  # (before the ids)
                part = self._names.job_part(job).hex()
                return shard.send([*head, part, seconds])

            fresh_ids(attempt, self._refresh_names, errors, f"{self._where()}: lease")

    def _refresh_names(self) -> None:
        """Drop the cached host and job ids, after reading the shards' epochs the next ones
        are read under ("-": a shard without a meta yet, never an epoch)."""
        pipe = self._client.pipeline(transaction=False)
        for shard in self._shards:
            pipe.hget(shard.key("meta"), "epoch")
        epochs = ["-" if e is None else e.decode() for e in pipe.execute()]
        if self._epochs_read and epochs != self._epochs():
            self._same_store()  # (not a reset: a store created anew after a loss)
        self._names.forget()  # (first: as on one node)
        for shard, epoch in zip(self._shards, epochs, strict=True):
            shard.epoch = epoch
        self._epochs_read = True

    def __len__(self) -> int:
        with self._errors("count"):  # (per shard, as on one node)
            return sum(
                size(self._client, shard.tag, self.bits, aliases=self.rule.aliases)
                for size, shard in zip(self._sizes, self._shards, strict=True)
            )

    @property
    def alias_count(self) -> int:
        """The shards' alias counters (records, as on one node; under a TTL an expired
        bucket's aliases leave uncounted, as its entries do)."""
        if not self.rule.aliases:
            return 0
        with self._errors("count"):
            pipe = self._client.pipeline(transaction=False)
            for shard in self._shards:
                pipe.hget(shard.key("meta"), "aliases")
            return sum(int(v or 0) for v in pipe.execute())

    def _records(self, shard: int) -> Iterator[tuple[bytes, bytes]]:
        """(address, record) of every entry stored in ``shard`` (pending ones are not)."""
        tag = self._shards[shard].tag
        live = int(self._client.hget(rk.key(tag, "meta"), "live") or 0)
        return buckets.records(self._client, tag, live, self.bits)

    def entries(self) -> Iterator[Entry]:

        def read() -> list[bytes]:
            return [raw for s in range(self.shards) for _, raw in self._records(s)]

        with self._errors("scan"):  # (tickets count up: the order stored)
            entries = self._names.scan(read, self._refresh_names, self._where())
        yield from entries

    def decisions(self) -> Iterator[Decision]:
        start, step = 0, 1000
        while True:
            with self._errors("scan"):
                chunk = self._client.lrange(self._top.key("d"), start, start + step - 1)
            yield from (decode_decision(raw) for raw in cast(list[bytes], chunk))
            if len(chunk) < step:
                return
            start += step

    def decision_count(self) -> int:
        with self._errors("count"):
            return int(self._client.llen(self._top.key("d")))

    def counters(self) -> dict[str, int]:
        names = list(COUNTERS)
        counts = dict.fromkeys(names, 0)
        with self._errors("count"):
            for shard in [self._top, *self._shards]:
                values = self._client.hmget(shard.key("meta"), names)
                for n, v in zip(names, values, strict=True):
                    counts[n] += int(v or 0)
        return counts

    def _import_records(self, entries: Iterable[Entry], decisions: Iterable[Decision]) -> int:
        """Batches of 500 entries per shard, 20 batches per round trip; each entry gets a
        ticket in the order given (tickets are reserved 500 at a time)."""
        return self._import(entries, decisions, rk.call_time(self.clock, stamp=False))

    def _import(
        self, entries: Iterable[Entry], decisions: Iterable[Decision], now: float | str
    ) -> int:
        n = bulk.import_cluster(
            self._top, self._shards, self.shard, self._names, self._refresh_names,
            entries, decisions, now,
        )  # fmt: skip
        if n:
            self._empty = False
        return n

    def _import_aliases(self, aliases: Iterable[Alias]) -> int:
        if not self.rule.aliases:
            return super()._import_aliases(aliases)
        now = rk.call_time(self.clock, stamp=False)
        return bulk.import_cluster_aliases(
            self._top, self._shards, self.shard, self._names, self._refresh_names, aliases, now
        )

    def aliases(self) -> Iterator[Alias]:
        """Every shard's aliases whose kept page (in any shard) is the entry they stand for."""
        if self.rule.aliases:
            yield from self._list_aliases()

    def now(self) -> float:
        t = rk.call_time(self.clock, stamp=False)
        with self._errors("time"):
            return rk.server_time(self._client) if isinstance(t, str) else t

    def prune(self) -> int:
        """Delete every entry older than the TTL now, shard by shard, and every alias whose
        kept page is gone (read from its shard: a shard's script cannot), then compact the
        logs."""
        if self.ttl is None and not self.rule.aliases:
            return 0
        now, removed = rk.call_time(self.clock, stamp=False), 0
        aliases: list[tuple[int, bytes, bytes]] = []  # shard, address, root
        for s in range(self.shards):
            with self._errors("prune", write=True):
                cutoff = rk.ttl_cutoff(self._client, now, self.ttl)
                old = []
                for address, raw in self._records(s):
                    r = decode_record(raw)
                    if r.stored_at < cutoff:
                        old.append(address)
                    elif r.root is not None:
                        aliases.append((s, address, r.root))
            for i in range(0, len(old), _BATCH):
                removed += int(
                    self._call("prune", s, [*self._head("prune", now), *old[i : i + _BATCH]])
                )
        removed += self._prune_dead(aliases, now)
        self.compact()
        return removed

    def compact(self, min_dead: int = 1) -> bool:
        """Rewrite each shard's log without the members of removed entries (and of dropped
        pending ones); every client's index reloads on its next call."""
        done = False
        for shard in self._shards:
            with self._errors("compact", write=True):
                if int(self._client.hget(shard.key("meta"), "dead") or 0) >= min_dead:
                    done = compact(shard) or done
        if done and self._logs.loaded:
            with self._errors("load"):
                self._logs.load(self._reader())
                self._adopt_logs()  # (as after any reload: a reset since the switch)
        return done

    def close(self) -> None:
        if not self._guard.closed:
            self._guard.closed = True
            self._client.close()


CLUSTER_OPTIONS = rk.OPTIONS | {"shards", "pending_timeout"}


def open_cluster(uri: str, rule: Rule | None = None, **options: Any) -> RedisClusterStore:
    """A store on a Redis Cluster (``redis+cluster://``), its options checked: what the
    backend object (:mod:`.backend`) opens."""
    return rk.open_checked(
        "redis cluster store", RedisClusterStore, CLUSTER_OPTIONS, uri, rule=rule, **options
    )
