"""Key names, URI handling and password redaction of the Redis store.

Every key of a store is ``{P}:<name>`` with ``P`` the prefix and ``<name>`` one of a fixed set
without a colon, so a key names exactly one (prefix, name) pair: deleting a store deletes these
names, never a pattern that another prefix could also match (a prefix may hold ``* ? [ ] \\ { }
:``). Format-1 stores had generation keys that must be found with ``SCAN``; :func:`glob_escape`
and :func:`format1_key_pattern` make that exact too.

The single-node store's keys, format 3 (``P`` is the prefix, default ``neardup:<name>``; in
braces, so all keys share a Redis Cluster slot; the names are fixed, so resetting a store never
needs a pattern):

* ``{P}:meta`` hash: ``format`` (3), ``rule`` (JSON of :meth:`Rule.as_dict`), ``blocks`` (the
  clients' index layout; ``blocks_auto`` when none was asked for), ``epoch`` (of the log),
  the counters, the entry sequence, ``live`` (the entries stored), the count of dead log
  members, the TTL sweep cursor (a log position) and the table counters.
  Opening a store with a rule of another radius is an error, ``rule=None`` takes the stored
  one.
* ``{P}:b0000`` to ``{P}:bffff``: 65,536 bucket hashes; an entry is one field, at its page
  key's 8-byte *address* (xxh3-64 of the key: the first two bytes name the bucket, the other
  six are the field), the value its record (:mod:`.format3`: the key as host-prefix id and
  rest, the job as an id; ~130 bytes at 60-character URLs, no key -> id index). A bucket stays
  a compact listpack when the server's ``hash-max-listpack-value`` is at least 256 (checked
  at open: a warning names the setting; the store works either way, at ~1.4x the memory).
* ``{P}:u``/``{P}:v`` and ``{P}:j``/``{P}:w``: host prefixes and job names, each stored once
  (:mod:`.names`).
* ``{P}:n`` list: the log, one 16-byte member (fingerprint, address) per entry stored, in
  order; a member is live while the record at its address has its fingerprint. An insert
  appends; a removal leaves its member, skipped by searches, until the log is compacted (at
  open or ``prune``, once dead members outnumber live entries).
* ``{P}:d`` list of decisions, trimmed to ``max_decisions`` in the same script call.
* ``{P}:r`` hash: the last reply per client thread, so a retried check is not applied twice.
* ``{P}:c``: the log being compacted (exists only during a compaction).
* ``{P}:l``: the lock of a ``nearduppipe migrate`` under way (:mod:`.migrate_lock`; expires
  30 s after its last renewal); a Cluster store's shards have one each while it converts them.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode

from ...fingerprint.rule import Rule
from ..base import StoreError
from ..counts import Status
from ..redaction import redact

__all__ = [
    "FIXED_NAMES",
    "FORMAT2_NAMES",
    "FORMAT3_NAMES",
    "REPLY_STATUS",
    "call_head",
    "call_time",
    "format1_key_pattern",
    "glob_escape",
    "index_blocks",
    "meta_int",
    "open_checked",
    "record_time",
    "redact",
    "rule_args",
    "server_time",
    "split_uri",
    "store_keys",
    "store_keys3",
    "ttl_cutoff",
    "unavailable",
    "uri_ttl",
]

# meta: format, rule, blocks, counters, sequence; k: page key -> entry id; e: entry id ->
# record; d: decisions list; r: the last reply per client thread (retries are idempotent);
# n: the log of every member stored, in order (each client's index reads it); c: the log
# being compacted.
# The single-node store's format 3 (store.py): meta; u, v: prefix id <-> prefix; j, w: job id
# <-> job; d, r, n, c as above; buckets b0000 to bffff (entries, :mod:`.buckets`). A Cluster
# store's shards use FORMAT3_NAMES too, and p, q, m (pending entries: cluster_open.py); format
# 2 (also an earlier release's Cluster shards) used FORMAT2_NAMES; FIXED_NAMES is every name a
# single-node store of either format writes (``nearduppipe copy`` reports any other key under
# a prefix).
FORMAT2_NAMES = ("meta", "k", "e", "d", "r", "n", "c")
FORMAT3_NAMES = ("meta", "u", "j", "d", "r", "n", "c", "v", "w")
FIXED_NAMES = (
    *FORMAT2_NAMES,
    *FORMAT3_NAMES[7:],
    "u",
    "j",
    "l",  # a migration's lock (migrate_lock.py)
    *(f"b{b:04x}" for b in range(1 << 16)),
)
_GLOB_SPECIAL = set("\\?*[]^-")


@functools.lru_cache(maxsize=64)  # (a store's are fixed at open: once, not per call)
def rule_args(rule: Rule, ttl: float | None, max_decisions: int | None) -> tuple[Any, ...]:
    """The rule and limits as every check script reads them, after its mode and time
    (``ARGV[3]`` to ``ARGV[7]`` of the head ``redis_common.lua`` reads): one place for both
    backends, which run the same head parsing."""
    w = rule.wide_threshold
    return (
        "" if ttl is None else repr(ttl),
        "" if max_decisions is None else max_decisions,
        rule.radius,
        # the verdict's threshold, and with aliases the bound to their kept page (w/bound)
        (-1 if w is None else w) if rule.alias_threshold is None else f"{w}/{rule.alias_threshold}",
        min(rule.radius, rule.legacy_distance),
    )


def call_head(
    rule: Rule, ttl: float | None, max_decisions: int | None, mode: str, now: float | str,
    pos: int = 0, epoch: str | bytes = "",
) -> list[Any]:  # fmt: skip
    """``ARGV[1]`` to ``ARGV[11]`` of a call that keeps no reply and sends no token: mode, time,
    the rule and limits, then an empty reply field and token, the log position and epoch (one
    place for both backends; a search call packs its own head, see ``RedisBase._fixed``).
    The time: a number (a ``clock`` given to the store), or ``SERVER_TIME`` / ``SERVER_KEEP``
    (:func:`call_time`)."""
    t = now if isinstance(now, str) else repr(float(now))
    return [mode, t, *rule_args(rule, ttl, max_decisions), "", "", pos, epoch]


# The time a call's script uses, as ARGV[2]: the server's TIME, which also stamps the records
# the call writes ("S"), or the server's TIME with the records keeping the times the client
# put in them ("T": an explicit stored_at, an import).
SERVER_TIME, SERVER_KEEP = "S", "T"


def call_time(clock: Callable[[], float] | None, stamp: bool = True) -> float | str:
    """ARGV[2] of a call: the server's time (no ``clock`` given: every client of a store then
    shares one clock, whatever its machine's says), else the given clock's."""
    if clock is None:
        return SERVER_TIME if stamp else SERVER_KEEP
    return float(clock())


def server_time(client: Any) -> float:
    """The server's clock (``TIME``; on a cluster, the node redis-py picks)."""
    sec, usec = client.time()
    return int(sec) + int(usec) / 1_000_000


def ttl_cutoff(client: Any, now: float | str, ttl: float | None) -> float:
    """The oldest ``stored_at`` still within ``ttl`` at a call's time ``now`` (:func:`call_time`):
    the server's time when ``now`` is a placeholder, else ``now``, minus the TTL; ``-inf`` when
    there is none (what a listing or ``prune`` keeps; the server's time is read either way)."""
    t = server_time(client) if isinstance(now, str) else now
    return -math.inf if ttl is None else t - ttl


def record_time(now: float | str) -> float:
    """The time to put into a record or decision the call writes: a placeholder (0.0) that
    the script replaces when the server's time stamps it."""
    return 0.0 if isinstance(now, str) else now


def meta_int(
    meta: dict[str, str], field: str, where: str, key: str, default: int | None = None
) -> int:
    """The whole number a store's meta (the hash ``key``) holds in ``field`` (``default`` when
    it holds none); anything else is a damaged meta: a :class:`StoreError` naming the field
    and the store ``where`` (edited by hand, or another program's hash), as a damaged sqlite
    store's record is."""
    raw = meta.get(field)
    if raw is None and default is not None:
        return default
    try:
        if raw is None:
            raise ValueError("missing")
        return int(raw)
    except ValueError:
        shown = "missing" if raw is None else f"{raw!r:.40}, not a whole number"
        raise StoreError(
            f"{where}: its meta is damaged: field {field!r} of {key} is {shown} (redis-cli "
            f"HGETALL '{key}' shows it); fix that field, restore the store from a backup, or "
            "reset it"
        ) from None


def index_blocks(meta: dict[str, str], where: str = "", key: str = "meta") -> int | None:
    """The ``blocks`` of the clients' index for a store's meta: ``None`` (each run of the index
    picks its table set by its size) for a store created without explicit blocks, which
    records ``blocks_auto``; else the recorded count. Stores created before that field keep
    their count: it cannot tell the default from an explicit request. Any layout finds the
    same pages; only speed differs."""
    return None if meta.get("blocks_auto") == "1" else meta_int(meta, "blocks", where, key)


def key(prefix: str, name: str) -> str:
    return "{" + prefix + "}:" + name


def store_keys(prefix: str, tables: int = 0) -> list[str]:
    """Every key a format-2 store holds (fixed names), then ``tables`` block-table names that
    development versions of format 2 wrote (reset deletes them too)."""
    return [key(prefix, n) for n in FORMAT2_NAMES] + [key(prefix, f"t{t}") for t in range(tables)]


def store_keys3(prefix: str) -> list[str]:
    """The KEYS of a format-3 store's script calls (its buckets are found by name)."""
    return [key(prefix, n) for n in FORMAT3_NAMES]


def glob_escape(text: str) -> str:
    """``text`` as a Redis glob pattern matching only itself (a backslash makes any byte
    literal in Redis's ``stringmatchlen``)."""
    return "".join("\\" + c if c in _GLOB_SPECIAL else c for c in text)


def format1_key_pattern(prefix: str) -> tuple[str, re.Pattern[bytes]]:
    """A SCAN pattern and the exact regex of a format-1 store's generation keys
    (``{P}:g<G>:e`` and ``{P}:g<G>:t<T>:<hex>``); the regex rejects other prefixes' keys that
    the glob also matches (prefix ``a}:g1`` has keys ``{a}:g1}:...``)."""
    pattern = glob_escape("{" + prefix + "}:g") + "*"
    exact = re.compile(
        re.escape(("{" + prefix + "}:g").encode()) + rb"-?\d+:(?:e|t\d+:[0-9a-f]+)\Z"
    )
    return pattern, exact


def split_uri(uri: str) -> tuple[str, dict[str, str]]:
    """Take nearduppipe's own query parameters (prefix, ttl, allow_eviction) out of a redis
    URI."""
    base, _, query = uri.partition("?")
    ours: dict[str, str] = {}
    rest = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name in ("prefix", "ttl", "allow_eviction"):
            ours[name] = value
        else:
            rest.append((name, value))
    # string surgery, not urlunsplit, which would turn unix:///path into unix:/path
    return (base + "?" + urlencode(rest) if rest else base), ours


def uri_ttl(ours: dict[str, str], ttl: float | None, where: str) -> float | None:
    """The URI's ``?ttl=`` (seconds) when it has one, else ``ttl``; a ``?ttl=`` that is not a
    number is a :class:`StoreError` naming it."""
    if not ours.get("ttl"):
        return ttl
    try:
        return float(ours["ttl"])
    except ValueError:
        raise StoreError(
            f"{where}: ?ttl= must be a number of seconds, got {ours['ttl']!r}"
        ) from None


# A check's reply letter -> its verdict (the scripts' revisit and check; a Cluster's reserve)
REPLY_STATUS: dict[bytes, Status] = {
    b"N": "new",
    b"C": "changed",
    b"A": "again",
    b"U": "unchanged",
    b"D": "duplicate",
    b"L": "claimed",
}


# Server replies that mean "not now" (the failure policy's business), not a bug: out of memory,
# a read-only replica, loading, a busy script, a cluster without a quorum or mid-failover.
_UNAVAILABLE = ("OOM", "READONLY", "LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN")
_UNAVAILABLE_CLASSES = (
    "OutOfMemoryError",
    "ReadOnlyError",
    "BusyLoadingError",
    "MasterDownError",
    "ClusterDownError",
    "TryAgainError",
)


def unavailable(error: Exception) -> bool:
    """Whether a server's error reply is one of those: redis-py turns most of them into a
    class of its own and strips the code from the message (an out-of-memory reply reads
    "command not allowed when used memory > 'maxmemory'"), and Redis 6 wraps a script's
    ("Error running script (...): @user_script:414: -OOM command not allowed ..."); all three
    are looked at."""
    import redis.exceptions

    classes = tuple(
        getattr(redis.exceptions, name)
        for name in _UNAVAILABLE_CLASSES
        if hasattr(redis.exceptions, name)
    )
    text = str(error)
    return (
        isinstance(error, classes)
        or text.startswith(_UNAVAILABLE)
        or any(f"-{code} " in text for code in _UNAVAILABLE)
    )


# options both Redis stores take (the cluster store adds its own)
OPTIONS = frozenset(
    {"prefix", "name", "reset", "ttl", "max_decisions", "read_only", "clock", "blocks"}
    | {"timeout", "params", "allow_eviction", "change_ttl"}
)
_S = TypeVar("_S")


def open_checked(
    what: str,
    factory: Callable[..., _S],
    known: frozenset[str],
    uri: str,
    rule: Any,
    **options: Any,
) -> _S:
    """``factory(uri, rule, **options)`` once redis-py is there and the options are ones it
    knows: the crawl's commit settings are dropped (every call is a server transaction), others
    are a :class:`StoreError` naming them, with the password redacted."""
    try:
        import redis  # noqa: F401  (the [redis] extra: only a Redis store needs it)
    except ImportError as e:
        raise StoreError(
            f"{what} {redact(uri, uri)}: the Redis client is not installed "
            f"(pip install 'nearduppipe[redis]'): {e}"
        ) from None
    for ignored in ("commit_every", "commit_interval"):
        options.pop(ignored, None)
    unknown = sorted(set(options) - known)
    if unknown:
        raise StoreError(f"{what} {redact(uri, uri)}: unknown options {unknown}")
    return factory(uri, rule, **options)
