"""The redis-py client options a user gives (``NEARDUP_REDIS_PARAMS``, scrapy-redis's
``REDIS_PARAMS``, ``params=``, a URI's query), checked before a client is made.

redis-py keeps its options as given and uses them at the first connection, deep in a socket
call: ``{"socket_timeout": "abc"}`` was a ``TypeError`` there ("'str' object cannot be
interpreted as an integer"), which ended a crawl as an unhandled error. Here the options whose
use is known are checked for their type and range, and the names redis-py's client takes are
known (:func:`unknown_options`), so either is one line naming the option and where it came
from. Importing this module needs no Redis client (:mod:`nearduppipe.settings_redis` uses it).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

__all__ = [
    "SECRET_OPTIONS",
    "bad_query_values",
    "bad_value",
    "bad_values",
    "query_options",
    "unknown_options",
]

# options whose value a message never shows (only its type)
SECRET_OPTIONS = frozenset({"password", "username", "ssl_password", "credential_provider"})
_MAX_SECONDS = 1e9  # (a socket timeout far above this overflows the platform's time_t)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _timeout(value: Any) -> str | None:
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or not 0 < value <= _MAX_SECONDS:
        return f"a number of seconds above 0 (up to {_MAX_SECONDS:g}), or None for no timeout"
    return None


def _interval(value: Any) -> str | None:
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        return "a number of seconds, 0 or more (0: no health checks)"
    return None


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _whole(low: int, none: bool = False) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if none and value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= low:
            return None
        return f"a whole number, {low} or more" + (", or None" if none else "")

    return check


def _text(value: Any) -> str | None:
    return None if value is None or isinstance(value, (str, bytes)) else "a string, or None"


def _keepalive_options(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping) and all(
        isinstance(k, int) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        return None
    return "a dict of TCP socket options, each a whole number to a whole number (e.g. TCP_KEEPIDLE)"


def _protocol(value: Any) -> str | None:
    return None if value is None or (value in (2, 3) and not isinstance(value, bool)) else "2 or 3"


def _retry(value: Any) -> str | None:
    if value is None or callable(getattr(value, "call_with_retry", None)):
        return None
    return "a redis.retry.Retry, or None"


def _errors(value: Any) -> str | None:
    if isinstance(value, (list, tuple, set, frozenset)) and all(
        isinstance(e, type) and issubclass(e, BaseException) for e in value
    ):
        return None
    return "a list of exception classes"


def _cert_reqs(value: Any) -> str | None:
    import ssl

    if value is None or isinstance(value, ssl.VerifyMode):
        return None
    if isinstance(value, str) and value.lower() in ("none", "optional", "required"):
        return None
    return "'none', 'optional' or 'required'"


# an option -> what its value must be (a description), or None when it is fine
_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "socket_timeout": _timeout,
    "socket_connect_timeout": _timeout,
    "health_check_interval": _interval,
    "socket_keepalive": _flag,
    "socket_keepalive_options": _keepalive_options,
    "retry_on_timeout": _flag,
    "ssl_check_hostname": _flag,
    "single_connection_client": _flag,
    "max_connections": _whole(1, none=True),
    "socket_read_size": _whole(1),
    "db": _whole(0),
    "protocol": _protocol,
    "password": _text,
    "username": _text,
    "client_name": _text,
    "retry": _retry,
    "retry_on_error": _errors,
    "ssl_cert_reqs": _cert_reqs,
}
# redis-py's parsers of a URI's query values (redis.connection.URL_QUERY_ARGUMENT_PARSERS): the
# value as the client will hold it, once its own parse has passed
_QUERY_NUMBERS: dict[str, Callable[[str], Any]] = {
    "socket_timeout": float,
    "socket_connect_timeout": float,
    "health_check_interval": int,
    "max_connections": int,
    "socket_read_size": int,
    "db": int,
}


def bad_value(name: str, value: Any) -> str | None:
    """What is wrong with ``value`` for the client option ``name`` (``"socket_timeout must be
    …, got 'abc'"``), or ``None`` when it is fine or not one whose use is known. A secret's
    value is never shown."""
    check = _CHECKS.get(name)
    wanted = None if check is None else check(value)
    if wanted is None:
        return None
    got = f"a value of type {type(value).__name__}" if name in SECRET_OPTIONS else f"{value!r:.60}"
    return f"{name} must be {wanted}, got {got}"


def bad_values(params: Mapping[str, Any]) -> str | None:
    """:func:`bad_value` of the first option of ``params`` that has a bad value, if any."""
    for name in sorted(params):
        problem = bad_value(name, params[name])
        if problem:
            return problem
    return None


def query_options(uri: str) -> dict[str, str]:
    """The client options a Redis URI's query gives (``?socket_timeout=1``): every query
    parameter but nearduppipe's own."""
    query = uri.partition("?")[2]
    return {
        k: v
        for k, v in parse_qsl(query, keep_blank_values=True)
        if k not in ("prefix", "ttl", "allow_eviction")
    }


def bad_query_values(uri: str) -> str | None:
    """A number in the URI's query that redis-py parses but cannot use (``?socket_timeout=-1``);
    a value it cannot parse is redis-py's own error at ``from_url``."""
    for name, text in sorted(query_options(uri).items()):
        parse = _QUERY_NUMBERS.get(name)
        if parse is None:
            continue
        try:
            value = parse(text)
        except ValueError:
            continue
        problem = bad_value(name, value)
        if problem:
            return problem
    return None


def _init_names(classes: Iterable[type]) -> set[str]:
    names: set[str] = set()
    for cls in classes:
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None or klass is object:
                continue
            params = inspect.signature(init).parameters.values()
            names.update(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
            names.update(p.name for p in params if p.kind is p.KEYWORD_ONLY)
    names.discard("self")
    return names


def unknown_options(url: str, names: Iterable[str]) -> list[str]:
    """Of ``names``, those ``redis.Redis.from_url(url, **options)`` does not take (its
    connection pool's and the connection class's of ``url``'s scheme), sorted; ``[]`` when
    redis-py is not installed (opening the store then says so) or the URL is not one it
    parses (its own error says why, then)."""
    try:
        from redis import connection
    except ImportError:
        return []
    parse: Any = connection.parse_url  # (untyped)
    try:
        parsed = parse(url)
    except (ValueError, TypeError):
        return []
    cls = parsed.get("connection_class", connection.Connection)
    known = _init_names([connection.ConnectionPool, cls]) | {"single_connection_client"}
    return sorted(set(names) - known)
