"""The Redis store's hot call, packed and sent on a pooled connection without redis-py's
per-command machinery.

Why: once the fingerprint index moved into the client, a check is one script call whose
server side takes ~60 us; redis-py's generic path (argument encoding and packing, connection
checkout, retry wrapper, response callbacks) then cost as much client CPU as the index search.
Here the command is packed in one join, the connection comes from the same pool (same
authentication, TLS, health checks, timeouts), and the failure semantics match the client's
own: connection and timeout errors disconnect and retry twice with backoff (a retried check
finds its first reply by its token), an unknown script is loaded and sent again.

Each thread takes one connection from the pool and keeps it: checking a connection out and in
again per call cost ~45 µs of client CPU with redis-py 8 (its checkout polls the socket for
stray data and records metrics), as much as the rest of the call, measured. A kept connection
never holds stray data: every reply is read whole, and anything that interrupts a reply
disconnects it. Connections of threads that ended go back to the pool when another thread
takes one; a forked child takes its own.
"""

from __future__ import annotations

import inspect
import os
import threading
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from .program import Program

__all__ = ["Kept", "Packed", "Wire", "bulk"]

_BACKOFF = (0.05, 0.1)


def _bytes(arg: Any) -> bytes:
    if type(arg) is bytes:  # (most arguments of the hot calls, first)
        return arg
    if isinstance(arg, bytes):
        return bytes(arg)
    if isinstance(arg, str):
        return arg.encode("utf-8")
    return repr(arg).encode() if isinstance(arg, float) else str(arg).encode()


def bulk(items: Iterable[bytes]) -> bytes:
    """``items`` as RESP bulk strings, end to end (a command is ``*<count>`` and these)."""
    return b"".join([b"$%d\r\n%b\r\n" % (len(a), a) for a in items])


class Packed(NamedTuple):
    """A call's arguments packed already (:func:`bulk`), and how many: a hot call packs what
    does not change between its calls once, and the rest without a type test per argument."""

    size: int
    body: bytes


class Kept:
    """Per thread, one connection from each pool it asks, kept between calls."""

    def __init__(self) -> None:
        self._held: dict[tuple[int, int], tuple[Any, Any]] = {}  # (thread, pool id) -> both
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._get_args: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return len(self._held)

    def get(self, pool: Any) -> Any:
        held = self._held.get((threading.get_ident(), id(pool)))
        if held is not None and held[0] is pool and self._pid == os.getpid():
            return held[1]
        return self._take(pool)

    def _take(self, pool: Any) -> Any:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not its own
                self._held, self._pid = {}, os.getpid()
            alive = {t.ident for t in threading.enumerate()}
            key = (threading.get_ident(), id(pool))
            for k in [k for k in self._held if k[0] not in alive or k == key]:
                gone_pool, conn = self._held.pop(k)  # (k == key: a pool since replaced)
                gone_pool.release(conn)
            if self._get_args is None:  # redis-py < 5.3 wants the command name, later warn
                param = inspect.signature(pool.get_connection).parameters.get("command_name")
                wanted = param is not None and param.default is inspect.Parameter.empty
                self._get_args = ("EVALSHA",) if wanted else ()
            conn = pool.get_connection(*self._get_args)
            self._held[key] = (pool, conn)
            return conn

    def keep_only(self, pools: list[Any]) -> None:
        """Give back the connections of pools no longer in use (a cluster's old nodes)."""
        with self._lock:
            for k in [k for k, (p, _) in self._held.items() if all(p is not q for q in pools)]:
                gone_pool, conn = self._held.pop(k)
                gone_pool.release(conn)


class Wire:
    """The hot calls (check, near) of one store: ``FCALL`` of the store's function library
    (:mod:`.program`), or ``EVALSHA`` of its script where the server has no functions."""

    def __init__(self, client: Any, program: Program, keys: list[str]) -> None:
        import redis

        self._redis = redis
        self._client = client
        self._program = program
        self._pool = client.connection_pool
        self._keys = [k.encode("utf-8") for k in keys]
        self.functions = True  # until the server says it has none
        self._heads: dict[tuple[bool, bool], tuple[int, bytes]] = {}  # (functions, write)
        self._kept = Kept()

    def _head(self, write: bool) -> tuple[int, bytes]:
        """The packed first words and their count (packed once per kind of call)."""
        functions = self.functions
        head = self._heads.get((functions, write))
        if head is None:
            items = [*self._program.head(functions, len(self._keys), write), *self._keys]
            head = self._heads[functions, write] = (len(items), bulk(items))
        return head

    def _send(self, conn: Any, args: list[Any] | Packed, write: bool) -> Any:
        count, head = self._head(write)
        if type(args) is Packed:
            n, body = args
        else:
            n, body = len(args), bulk(map(_bytes, args))
        conn.send_packed_command([b"*%d\r\n" % (count + n) + head + body])
        return conn.read_response()

    def _unserved(self, conn: Any, args: list[Any] | Packed, write: bool, error: Exception) -> Any:
        """The call again, once the server has what it refused to find: the library (loaded,
        or the script instead where it serves no functions) or the script."""
        functions = self._program.recover(self._client, error, self.functions)
        if functions is None:
            raise error
        self.functions = functions
        return self._send(conn, args, write)

    def call(self, args: list[Any] | Packed, write: bool = True) -> Any:
        r = self._redis
        for attempt in range(len(_BACKOFF) + 1):
            conn = self._kept.get(self._pool)
            try:
                try:
                    return self._send(conn, args, write)
                except r.ResponseError as e:
                    try:  # (a second refusal: a script not yet loaded after the fallback)
                        return self._unserved(conn, args, write, e)
                    except r.ResponseError as again:
                        return self._unserved(conn, args, write, again)
            except (r.ConnectionError, r.TimeoutError):
                conn.disconnect()
                if attempt == len(_BACKOFF):
                    raise
                time.sleep(_BACKOFF[attempt])
            except r.ResponseError:
                raise  # an error reply, read whole: the connection stays in step
            except BaseException:
                conn.disconnect()  # interrupted within a reply
                raise
        raise AssertionError("unreachable")
