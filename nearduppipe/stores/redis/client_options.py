"""A Redis store's client options at open: a value redis-py would fail on at its first
connection, or an option it does not take, is one :class:`~..base.StoreError` naming the option
and where it came from (``NEARDUP_REDIS_PARAMS``, ``params=``, the URI's query), never a
``TypeError`` deep in a socket call. The checks of the values are
:mod:`nearduppipe.stores.redis_options`'s, which the crawl's settings read too."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

from ..base import StoreError
from ..redaction import redact
from ..redis_options import bad_query_values, bad_values, query_options

__all__ = ["PARAMS", "bad_params", "check_options", "option_source"]


PARAMS = "NEARDUP_REDIS_PARAMS (params=)"  # where a store's client options come from


def option_source(name: str, uri: str) -> str:
    """Where the client option ``name`` of a store at ``uri`` was given: the URI's query, else
    its client options (``NEARDUP_REDIS_PARAMS``, ``params=``)."""
    return f"the URI's query (?{name}=)" if name in query_options(uri) else PARAMS


def check_options(where: str, uri: str, params: dict[str, Any] | None) -> None:
    """Refuse, before any client is made, a client option whose value redis-py would fail on
    at its first connection (:mod:`..redis_options`): a wrong type, a timeout out of range."""
    problem = bad_values(params or {})
    if problem:
        raise StoreError(f"{where}: {PARAMS}: {problem}")
    problem = bad_query_values(uri)
    if problem:
        raise StoreError(f"{where}: the URI's query: {problem}")


def _in_client(error: BaseException) -> bool:
    """Whether ``error`` was raised in redis-py's code (or a socket call it made), not in
    nearduppipe's: an option's value it could not use."""
    import redis

    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = os.path.abspath(tb.tb_frame.f_code.co_filename)
    inside = os.path.dirname(os.path.abspath(redis.__file__)) + os.sep
    return path.startswith(inside) or os.path.basename(path) in ("socket.py", "ssl.py")


@contextlib.contextmanager
def bad_params(where: str, uri: str, params: dict[str, Any] | None = None) -> Iterator[None]:
    """A client option redis-py does not know (``NEARDUP_REDIS_PARAMS``, ``params=``, the
    URI's query) is a ``TypeError`` when the first connection is made: a :class:`StoreError`
    naming it and where it came from. So is an option's value redis-py fails on there that
    :func:`check_options` does not know of (an error raised in redis-py's code, when the
    user gave client options)."""
    try:
        yield
    except TypeError as e:
        found = _UNEXPECTED.search(str(e))
        if found is None:
            _refuse_value(e, where, uri, params)
            raise
        raise StoreError(
            f"{where}: {option_source(found.group(1), uri)} holds an option redis-py does not "
            f"take: {redact(str(e), uri)}"
        ) from None
    except (ValueError, AttributeError, OverflowError) as e:
        _refuse_value(e, where, uri, params)
        raise


_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'")


def _refuse_value(
    error: BaseException, where: str, uri: str, params: dict[str, Any] | None
) -> None:
    given = [*(f"{PARAMS} {name}" for name in sorted(params or {}))]
    given += [f"the URI's query ?{name}=" for name in sorted(query_options(uri))]
    if not given or not _in_client(error):
        return
    raise StoreError(
        f"{where}: redis-py cannot use a client option's value ({', '.join(given)}): "
        f"{type(error).__name__}: {redact(str(error), uri)}"
    ) from None
