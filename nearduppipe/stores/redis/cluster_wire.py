"""Script calls to a Redis Cluster's shards, sent to every node at once.

Why not redis-py's cluster pipeline: it refuses ``EVALSHA`` (a blocked pipeline command), and
a check asks every shard in the same step. Here the calls are grouped by the node that serves
each shard's slot; each node gets its calls in one write on a connection from that node's pool
(its authentication, TLS and timeouts, kept by the thread between calls), then the replies are
read node by node, so a step costs one round trip, not one per shard. The calls are ``FCALL``s
of the store's function library (:mod:`.program`), loaded on a node when it answers
that it does not have it, or ``EVALSHA``s of its script once a node serves no functions; an
unknown script is loaded on that node and sent again; a moved slot (resharding, failover)
refreshes the slot map and sends the calls again; a connection error disconnects and retries
twice with backoff, like the single-node store.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .program import Program
from .wire import Kept, _bytes, bulk

__all__ = ["ClusterWire"]

_BACKOFF = (0.05, 0.1)
Call = tuple[Sequence[str], Sequence[Any]]  # keys (all in one slot), arguments
# Out of memory, Redis refuses a function without flags outright, and a script only at a write
# that may grow memory: modes that write nothing call the no-writes function, modes that only
# delete are sent as the script (a check cannot go on, but forgetting pages still works).
_READS = frozenset({"get", "live"})
_DELETES = frozenset({"remove", "prune"})


class ClusterWire:
    def __init__(self, cluster: Any, program: Program) -> None:
        import redis

        self._redis = redis
        self._cluster = cluster
        self._program = program
        self.functions = True  # until a node says it serves none
        self._kept = Kept()  # per thread, a connection to each node (as the single-node wire)

    def _node(self, key: str) -> Any:
        return self._cluster.get_redis_connection(self._cluster.get_node_from_key(key))

    def _refresh(self) -> None:
        self._cluster.nodes_manager.initialize()
        pools = [self._cluster.get_redis_connection(n) for n in self._cluster.get_nodes()]
        self._kept.keep_only([r.connection_pool for r in pools])

    def _pack(self, call: Call) -> bytes:
        keys, args = call
        mode = args[0]
        # (a look without a pending entry of its own and without cleaning: a near() search)
        reads = mode in _READS or (mode == "look" and args[14] == "" and args[16] != "1")
        functions = self.functions and mode not in _DELETES
        items = self._program.head(functions, len(keys), write=not reads)
        items += [k.encode("utf-8") for k in keys] + [_bytes(a) for a in args]
        return b"*%d\r\n" % len(items) + bulk(items)

    def call(self, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One call; a server error is raised."""
        (reply,) = self.call_many([(keys, args)])
        if isinstance(reply, Exception):
            raise reply
        return reply

    def call_many(self, calls: Sequence[Call]) -> list[Any]:
        """The replies in order; a call the server refused has its error as its reply."""
        r = self._redis
        for attempt in range(len(_BACKOFF) + 1):
            try:
                out = self._once(calls)
                moved = [
                    x
                    for x in out
                    if isinstance(x, (r.exceptions.MovedError, r.exceptions.AskError))
                ]
                if not moved or attempt == len(_BACKOFF):
                    return out
            except (r.ConnectionError, r.TimeoutError):
                if attempt == len(_BACKOFF):
                    raise
            time.sleep(_BACKOFF[attempt])
            self._refresh()
        raise AssertionError("unreachable")

    def _once(self, calls: Sequence[Call], again: int = 2) -> list[Any]:
        r = self._redis
        groups: dict[int, tuple[Any, list[int]]] = {}
        for i, (keys, _) in enumerate(calls):
            node = self._node(keys[0])
            groups.setdefault(id(node), (node, []))[1].append(i)
        out: list[Any] = [None] * len(calls)
        taken = [(self._kept.get(node.connection_pool), idx) for node, idx in groups.values()]
        try:
            for conn, idx in taken:
                conn.send_packed_command([b"".join(self._pack(calls[i]) for i in idx)])
            for conn, idx in taken:
                for i in idx:
                    try:
                        out[i] = conn.read_response()
                    except r.ResponseError as e:  # (read whole: the connection stays in step)
                        out[i] = e
        except BaseException:  # a connection error, or interrupted within a reply
            for conn, _ in taken:
                conn.disconnect()
            raise
        redo = [i for i, x in enumerate(out) if again and self._unserved(calls[i][0][0], x)]
        if redo:  # (at most twice: a refused function, then a script not yet loaded)
            for i, x in zip(redo, self._once([calls[i] for i in redo], again - 1), strict=True):
                out[i] = x
        return out

    def _unserved(self, key: str, reply: Any) -> bool:
        """Whether ``reply`` is a refusal to find the code (then the node has it now, or the
        calls go to the script): the call is sent again."""
        functions = self._program.recover(self._node(key), reply, self.functions)
        if functions is None:
            return False
        self.functions = functions
        return True
