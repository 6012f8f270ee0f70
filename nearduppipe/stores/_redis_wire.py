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
from typing import Any

__all__ = ["Wire"]

_BACKOFF = (0.05, 0.1)


def _bytes(arg: Any) -> bytes:
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode("utf-8")
    return repr(arg).encode() if isinstance(arg, float) else str(arg).encode()


class Wire:
    def __init__(self, client: Any, script: Any, keys: list[str]) -> None:
        import redis

        self._redis = redis
        self._client = client
        self._script = script
        self._pool = client.connection_pool
        head = [b"EVALSHA", script.sha.encode(), str(len(keys)).encode()]
        self._keys = [*head, *(k.encode("utf-8") for k in keys)]
        # redis-py < 5.3 wants the command name, later versions warn when given one
        param = inspect.signature(self._pool.get_connection).parameters.get("command_name")
        self._get_args: tuple[str, ...] = (
            ("EVALSHA",) if param is not None and param.default is inspect.Parameter.empty else ()
        )
        self._held: dict[int, Any] = {}  # thread ident -> its connection
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _connection(self) -> Any:
        conn = self._held.get(threading.get_ident())
        if conn is not None and self._pid == os.getpid():
            return conn
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not its own
                self._held, self._pid = {}, os.getpid()
            alive = {t.ident for t in threading.enumerate()}
            for ident in [i for i in self._held if i not in alive]:
                self._pool.release(self._held.pop(ident))
            conn = self._pool.get_connection(*self._get_args)
            self._held[threading.get_ident()] = conn
            return conn

    def call(self, args: list[Any]) -> Any:
        items = [*self._keys, *map(_bytes, args)]
        parts = [b"*%d\r\n" % len(items)]
        for a in items:
            parts += (b"$%d\r\n" % len(a), a, b"\r\n")
        packed = b"".join(parts)
        r = self._redis
        for attempt in range(len(_BACKOFF) + 1):
            conn = self._connection()
            try:
                try:
                    conn.send_packed_command([packed])
                    return conn.read_response()
                except r.exceptions.NoScriptError:
                    self._client.script_load(self._script.script)
                    conn.send_packed_command([packed])
                    return conn.read_response()
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
