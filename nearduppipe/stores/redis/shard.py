"""A Redis store's shard: one node's part of a store, and the guard its calls pass.

A single-node store (:mod:`.store`) holds one :class:`NodeShard`, under its prefix; a Redis Cluster
store (:mod:`.cluster`) holds one :class:`ClusterShard` per shard, under the shard's hash tag,
and one more for its global keys (``{P}:meta`` with the ticket counter, the decisions list,
the host and job tables). A shard knows its client, its keys (``{tag}:<name>``: the ``KEYS``
of its script calls), the store's Lua program there and how it is called (the single node:
redis-py's script object, pipelined for imports, and :class:`.wire.Wire`'s ``FCALL`` for the
hot calls; a Cluster: :class:`.cluster_wire.ClusterWire`, one round trip for calls to many
shards), and the head every call starts with (mode, time, the rule and limits).

Every call passes the store's :class:`Guard`, which its shards share: a closed, read-only or
lost store refuses it, a due look for evictions is taken (:class:`.loss.Watch`), and redis-py's
errors become the store's (:class:`StoreUnavailable` when it is not reachable or not now,
:class:`StoreError` otherwise), never with the password. Whatever works on a shard (bulk
imports, log compaction, the eviction watch, the tables of names) takes a :class:`Shard`
and uses these public methods, never a store's private members.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from ...fingerprint.rule import Rule
from ..base import StoreError, StoreUnavailable
from . import keys as rk
from .cluster_wire import ClusterWire
from .loss import GONE, Watch, gone
from .program import Program
from .wire import Wire

__all__ = ["ClusterShard", "Guard", "Limits", "NodeShard", "Shard", "send_many"]


class Limits(NamedTuple):
    """What every call's head carries after its mode and time (:func:`.keys.call_head`)."""

    rule: Rule
    ttl: float | None
    max_decisions: int | None


class Guard:
    """A store's state that each call of its shards checks first, and the mapping of redis-py's
    errors to the store's (one per store: its shards share it).

    ``meta`` is the key a lost store's message names; ``cluster``: a Cluster store's, which
    words a moved slot as any other error (a single node's says to open it as a Cluster)."""

    def __init__(
        self,
        uri: str,
        raw_uri: str,
        prefix: str,
        read_only: bool,
        watch: Watch,
        *,
        meta: str,
        cluster: bool = False,
    ) -> None:
        import redis

        self._redis = redis
        self.uri = uri
        self.raw_uri = raw_uri
        self.where = f"{uri} prefix {prefix!r}"
        self.read_only = read_only
        self.watch = watch
        self.meta = meta
        self.cluster = cluster
        self.client: Any = None  # (set once connected: the watch's looks, a loss's message)
        self.closed = False
        self.lost: str | None = None  # why the store is lost: every later call fails
        self.identity: str | None = None  # the store's id when opened (:mod:`.loss`)

    def usable(self, write: bool) -> None:
        """Refuse a call of a closed store, a write of a read-only one, any call of a lost one;
        take the eviction watch's look when it is due."""
        if self.closed:
            raise StoreError(f"store {self.uri} is closed")
        if write and self.read_only:
            raise StoreError(f"store {self.uri} was opened read-only")
        if self.lost is not None:
            raise StoreUnavailable(self.lost)
        if self.watch.due <= time.monotonic():
            self.look()

    def look(self) -> None:
        """The eviction watch's look (:class:`.loss.Watch`)."""
        try:
            self.watch.look(self.client)
        except StoreUnavailable as e:
            raise self.lose(e) from None
        except self._redis.RedisError:
            pass  # (unreachable: the call itself says so)

    def lose(self, error: StoreUnavailable) -> StoreUnavailable:
        """Remember that the store is lost: every later call raises the same."""
        self.lost = str(error)
        return error

    def failure(self, what: str, e: Exception) -> StoreError:
        """Unreachable, timed out, out of memory, a read-only replica or a cluster down ->
        StoreUnavailable (the failure policy's business); the store's meta gone -> the store
        is lost; other server errors are bugs or misconfigurations -> StoreError. Messages
        never carry the password."""
        r = self._redis
        msg = rk.redact(str(e), self.raw_uri)
        if GONE in msg:
            return self.lose(gone(self.where, self.meta, self.client))
        if isinstance(e, (r.ConnectionError, r.TimeoutError, r.exceptions.ClusterError)):
            return StoreUnavailable(f"{self.where}: {what} failed: {msg}")
        if not self.cluster and isinstance(e, (r.exceptions.MovedError, r.exceptions.AskError)):
            msg = f"MOVED {msg} (a Redis Cluster node: open the store with redis+cluster://)"
        cls = StoreUnavailable if rk.unavailable(e) else StoreError
        return cls(f"{self.where}: {what} failed: {msg}")

    @contextmanager
    def errors(self, what: str, write: bool = False) -> Iterator[None]:
        """:meth:`usable`, then the calls within, their Redis errors as :meth:`failure` says."""
        self.usable(write)
        try:
            yield
        except self._redis.RedisError as e:
            raise self.failure(what, e) from None


class Shard:
    """One node's part of a store: its client, its keys under ``tag`` and the guard of its
    calls; how a call reaches the node is its kind's (:class:`NodeShard`,
    :class:`ClusterShard`). ``limits`` are set by the store once its rule is known;
    ``epoch`` is the epoch of the shard's meta under which the store's cached host and job
    ids were read ("-": none yet), which each call that sends page keys carries
    (:func:`.loss.fresh_ids`)."""

    def __init__(self, client: Any, tag: str, keys: list[str], guard: Guard) -> None:
        self.client = client
        self.tag = tag
        self.keys = keys
        self.guard = guard
        self.limits = Limits(Rule(), None, None)
        self.epoch = "-"

    def key(self, name: str) -> str:
        """The shard's key ``{tag}:name``."""
        return rk.key(self.tag, name)

    def head(self, mode: str, now: float | str, pos: int = 0, epoch: str | bytes = "") -> list[Any]:
        """``ARGV[1]`` to ``ARGV[11]`` of a call (:func:`.keys.call_head`)."""
        return rk.call_head(*self.limits, mode, now, pos, epoch)

    def send(self, args: Sequence[Any]) -> Any:
        """One script call; Redis errors are the caller's to map (:meth:`Guard.errors`)."""
        raise NotImplementedError

    def call(self, what: str, args: Sequence[Any], write: bool = True) -> Any:
        """One script call, its errors mapped (``what`` names it)."""
        with self.guard.errors(what, write=write):
            return self.send(args)

    def _send_many(self, calls: Sequence[tuple[Shard, Sequence[Any]]]) -> list[Any]:
        raise NotImplementedError


class NodeShard(Shard):
    """A single-node store's one shard: the store's script through redis-py (pipelined for
    imports), and :class:`.wire.Wire` (``wire``) for the hot calls, check and near."""

    def __init__(
        self, client: Any, tag: str, keys: list[str], guard: Guard, program: Program
    ) -> None:
        super().__init__(client, tag, keys, guard)
        self.script = client.register_script(program.script)
        self.wire = Wire(client, program, keys)

    def send(self, args: Sequence[Any]) -> Any:
        return self.script(keys=self.keys, args=args)

    def _send_many(self, calls: Sequence[tuple[Shard, Sequence[Any]]]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for shard, args in calls:
            if shard is not self:
                raise ValueError("a single node's calls go to its one shard")
            self.script(keys=self.keys, args=args, client=pipe)
        return list(pipe.execute(raise_on_error=False))


class ClusterShard(Shard):
    """A Redis Cluster store's shard (or its global keys): its calls go through the store's
    :class:`.cluster_wire.ClusterWire` (``wire``), which all its shards share."""

    def __init__(
        self, client: Any, tag: str, keys: list[str], guard: Guard, wire: ClusterWire
    ) -> None:
        super().__init__(client, tag, keys, guard)
        self.wire = wire

    def send(self, args: Sequence[Any]) -> Any:
        return self.wire.call(self.keys, args)

    def _send_many(self, calls: Sequence[tuple[Shard, Sequence[Any]]]) -> list[Any]:
        return self.wire.call_many([(shard.keys, args) for shard, args in calls])


def send_many(calls: Sequence[tuple[Shard, Sequence[Any]]]) -> list[Any]:
    """Script calls to shards of one store, in one round trip (a single node: a pipeline; a
    Cluster: every node at once). The replies in order, a call the server refused with its
    error as its reply; Redis errors of the round trip itself are the caller's to map."""
    return calls[0][0]._send_many(calls) if calls else []
