"""The Redis store's hot call, packed and sent on a pooled connection without redis-py's
per-command machinery.

Why: once the fingerprint index moved into the client, a check is one script call whose
server side takes ~60 us; redis-py's generic path (argument encoding and packing, connection
checkout, retry wrapper, response callbacks) then cost as much client CPU as the index search.
Here the command is packed in one join, the connection comes from the same pool (same
authentication, TLS, health checks, timeouts), and the failure semantics match the client's
own: connection and timeout errors disconnect and retry twice with backoff (a retried check
finds its first reply by its token), an unknown script is loaded and sent again.
"""

from __future__ import annotations

import inspect
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

    def call(self, args: list[Any]) -> Any:
        items = [*self._keys, *map(_bytes, args)]
        parts = [b"*%d\r\n" % len(items)]
        for a in items:
            parts += (b"$%d\r\n" % len(a), a, b"\r\n")
        packed = b"".join(parts)
        r = self._redis
        for attempt in range(len(_BACKOFF) + 1):
            conn = self._pool.get_connection(*self._get_args)
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
            finally:
                self._pool.release(conn)
        raise AssertionError("unreachable")
