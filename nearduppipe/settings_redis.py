"""Where a crawl's Redis store is and how its client connects, from Scrapy settings.

``NEARDUP_STORE = "redis"`` puts the store next to scrapy-redis, read as scrapy-redis reads its
own settings (``scrapy_redis.connection.get_redis_from_settings``): ``REDIS_URL``, else
``REDIS_HOST`` / ``REDIS_PORT`` / ``REDIS_DB`` (default ``localhost:6379``, database 0), with the
client options of ``REDIS_PARAMS`` that the store can use. ``NEARDUP_REDIS_PARAMS`` wins over
them and applies to every Redis URI. Like :mod:`nearduppipe.settings`, nothing here imports
Scrapy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import NearDupError

__all__ = ["IGNORED_REDIS_PARAMS", "RedisSettings", "read_redis_settings"]

# scrapy-redis client options the store cannot take: another client class, and reply decoding
# (the store's replies are binary records); the address options are read, not passed on
IGNORED_REDIS_PARAMS = ("redis_cls", "decode_responses", "encoding", "encoding_errors")
_ADDRESS = ("url", "host", "port", "db")


class RedisSettingsError(NearDupError, ValueError):
    """A Redis setting has a value nearduppipe cannot use (a NearDupConfigError's cause)."""


@dataclass(frozen=True)
class RedisSettings:
    url: str | None = None  # the scrapy-redis address (only for NEARDUP_STORE = "redis")
    params: dict[str, Any] = field(default_factory=dict)  # client options for the store
    ignored: tuple[str, ...] = ()  # REDIS_PARAMS options left out, named in one warning


def _as_dict(value: Any, name: str, example: str) -> dict[str, Any]:
    given = value
    if hasattr(value, "copy_to_dict"):  # a Scrapy BaseSettings
        value = value.copy_to_dict()
    if isinstance(value, str):  # from the command line: JSON
        try:
            value = json.loads(value or "{}")
        except ValueError as e:
            raise RedisSettingsError(
                f"{name} must be a dict of redis.Redis options (from the command line, JSON: "
                f"'{example}'); got {given!r}: {e}"
            ) from None
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise RedisSettingsError(f"{name} must be a dict of redis.Redis options, got {given!r}")
    return dict(value)


def _check_values(params: dict[str, Any], name: str) -> None:
    """A client option whose value redis-py would fail on at its first connection (a wrong
    type, a timeout out of range): one line naming the setting and the option."""
    from .stores.redis_options import bad_values  # (no Redis client needed)

    problem = bad_values(params)
    if problem:
        raise RedisSettingsError(f"{name}: {problem}")


def _check_names(url: str, params: dict[str, Any], name: str) -> None:
    """Options redis-py's client does not take (for scrapy-redis's ``REDIS_PARAMS``, which the
    store takes with ``NEARDUP_REDIS_PARAMS`` as its client options): named with the setting
    they came from, before the store says only where its client options came from."""
    from .stores.redis_options import unknown_options

    unknown = unknown_options(url, params)
    if unknown:
        raise RedisSettingsError(
            f"{name} holds options redis-py does not take: {', '.join(unknown)}"
        )


def read_redis_settings(settings: Any, neardup_params: Any, scrapy_redis: bool) -> RedisSettings:
    """``neardup_params``: the value of ``NEARDUP_REDIS_PARAMS``; ``scrapy_redis``: whether the
    store is ``"redis"`` (the address and options of scrapy-redis's settings apply)."""
    ours = _as_dict(neardup_params, "NEARDUP_REDIS_PARAMS", '{"socket_timeout": 10}')
    _check_values(ours, "NEARDUP_REDIS_PARAMS")
    if not scrapy_redis:
        return RedisSettings(params=ours)
    theirs = _as_dict(settings.get("REDIS_PARAMS"), "REDIS_PARAMS", '{"socket_timeout": 10}')
    url = settings.get("REDIS_URL") or theirs.get("url")
    if not url:
        host = settings.get("REDIS_HOST") or theirs.get("host") or "localhost"
        port = settings.get("REDIS_PORT") or theirs.get("port") or 6379
        db = settings.get("REDIS_DB") or theirs.get("db") or 0
        url = f"redis://{host}:{port}/{db}"
    if not isinstance(url, str) or not url.strip():
        raise RedisSettingsError(f"REDIS_URL must be a Redis URL, got {url!r}")
    ignored = tuple(sorted(k for k in theirs if k in IGNORED_REDIS_PARAMS))
    params = {k: v for k, v in theirs.items() if k not in IGNORED_REDIS_PARAMS + _ADDRESS}
    _check_values(params, "REDIS_PARAMS")
    _check_names(url.strip(), params, "REDIS_PARAMS")
    return RedisSettings(url.strip(), {**params, **ours}, ignored)
