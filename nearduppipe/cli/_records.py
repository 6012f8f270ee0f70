"""Records a user edited by hand (or another program wrote) in a store a command reads.

A sqlite store's record errors name their row already. A Redis store's decoder sees only the
bytes (its callers read them in bulk), so a command that meets a damaged record scans the
store once more to name its key and field, and says how to remove it. ``copy`` also says what
it did not copy: rows of a kind no store writes, entry records no page key points to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ..stores import Store, StoreError
from ..stores.base import _scheme
from ..stores.redis.buckets import damaged
from ..stores.redis.codec import DamagedRecord, decode_decision
from ._io import CliError, redact
from ._stores import _client, _redis_call, is_redis, resolve_redis_prefix, sqlite_file

__all__ = ["copy_warnings", "named_damage"]

_SHOWN = 3  # damaged records named in one message


def _cli_bytes(raw: bytes) -> str:
    """A binary field as redis-cli takes it: ``"\\x00\\x00…"``."""
    return '"' + "".join(f"\\x{b:02x}" for b in raw) + '"'


def _find_damage(uri: str, prefix: str) -> list[tuple[str, str]]:
    """(where, what to run to remove it) for every record of the store that cannot be read."""
    client = _client(uri)
    base = "{" + prefix + "}"
    found: list[tuple[str, str]] = []

    def scan() -> None:
        for name, field, e in damaged(client, prefix):  # (format 3: the bucket hashes)
            where = f"{name} field {_cli_bytes(field)} ({e})"
            found.append((where, f"redis-cli HDEL '{name}' {_cli_bytes(field)}"))
        n = int(client.llen(f"{base}:d"))
        for start in range(0, n, 1000):
            for i, raw in enumerate(client.lrange(f"{base}:d", start, start + 999), start):
                try:
                    decode_decision(raw)
                except DamagedRecord as e:
                    fix = f"redis-cli LSET '{base}:d' {i} gone; redis-cli LREM '{base}:d' 1 gone"
                    found.append((f"{base}:d item {i} ({e})", fix))

    try:
        _redis_call(uri, "find the damaged records", scan)
    finally:
        client.close()
    return found


def _sqlite_not_utf8(path: str) -> list[str]:
    """The rows whose value sqlite cannot give as text (bytes that are not UTF-8)."""
    from ..stores.sqlite.files import TABLE, read_connection

    conn = read_connection(Path(path))
    conn.text_factory = bytes
    try:
        found = []
        for key, value in conn.execute(f'SELECT key, value FROM "{TABLE}"'):
            try:
                key.decode("utf-8")
                if isinstance(value, bytes):
                    value.decode("utf-8")
            except UnicodeDecodeError:
                found.append(key.decode("utf-8", "backslashreplace"))
        return found
    finally:
        conn.close()


@contextlib.contextmanager
def named_damage(uri: str, prefix: str | None = None) -> Iterator[None]:
    """Turn a Redis store's :class:`DamagedRecord` into one line naming the key and field of
    each damaged record (the first few) and how to remove them."""
    try:
        yield
    except DamagedRecord as e:
        after = getattr(e, "partial_copy", None)  # (cmd_copy: what the destination holds)
        e.args = (str(e).split("; DST ")[0],)
        then = f"; {after}" if after else ""
        if not is_redis(uri) or _scheme(uri).endswith("+cluster"):
            raise CliError(f"{redact(uri)}: {e}; restore the store from a backup{then}") from None
        name = resolve_redis_prefix(uri, prefix)
        found = _find_damage(uri, name)
        if not found:  # (rewritten since: the record the command met)
            raise CliError(
                f"{redact(uri)} prefix {name!r}: {e}; run the command again{then}"
            ) from None
        shown = "; ".join(where for where, _ in found[:_SHOWN])
        more = f" (and {len(found) - _SHOWN} more)" if len(found) > _SHOWN else ""
        fixes = " && ".join(fix for _, fix in found[:_SHOWN])
        raise CliError(
            f"{redact(uri)} prefix {name!r}: {len(found)} damaged record(s), edited by hand or "
            f"written by another program: {shown}{more}. Remove them ({fixes}) or restore the "
            f"store from a backup, then run the command again{then}"
        ) from None
    except StoreError as e:  # a sqlite row that is not UTF-8 text, met by a scan
        path = sqlite_file(uri)
        if not (path and "decode to UTF-8" in str(e)):
            raise
        rows = _sqlite_not_utf8(path)
        if not rows:
            raise
        from ..stores.sqlite.fields import hint

        where = f"{path}: record {rows[0]!r}"
        more = f" (and {len(rows) - 1} more rows)" if len(rows) > 1 else ""
        raise CliError(f"{where}{more} is damaged (not UTF-8 text); {hint(where)}") from None


def _sqlite_leftovers(path: str, copied: int) -> list[str]:
    from ..stores.sqlite.files import TABLE, read_connection

    known = " OR ".join(f"(key >= '{k}:' AND key < '{k};')" for k in "mkide")
    conn = read_connection(Path(path))
    try:
        unknown, first = conn.execute(
            f'SELECT count(*), min(key) FROM "{TABLE}" WHERE NOT ({known})'
        ).fetchone()
        (entry_rows,) = conn.execute(
            f"SELECT count(*) FROM \"{TABLE}\" WHERE key >= 'i:' AND key < 'i;'"
        ).fetchone()
    finally:
        conn.close()
    out = []
    if unknown:
        out.append(
            f"{unknown} row(s) of no kind a store writes (the first: {first!r:.60}) were not copied"
        )
    if entry_rows > copied:
        out.append(
            f"{entry_rows - copied} entry row(s) (i:…) that no page key (k:…) points to were not "
            "copied: they are no page of the store"
        )
    return out


def _redis_leftovers(uri: str, prefix: str, store: Store, copied: int) -> list[str]:
    from ..stores.redis.keys import FIXED_NAMES, glob_escape

    base = "{" + prefix + "}"
    client = _client(uri)
    try:

        def scan() -> list[bytes]:
            pattern = glob_escape(base) + ":*"
            names = {f"{base}:{n}".encode() for n in FIXED_NAMES}
            return sorted(k for k in client.scan_iter(match=pattern, count=1000) if k not in names)

        unknown: list[bytes] = _redis_call(uri, "list the store's keys", scan)
    finally:
        client.close()
    out = []
    if unknown:
        first = unknown[0].decode("utf-8", "replace")
        out.append(
            f"{len(unknown)} key(s) of no kind a store writes (the first: {first!r:.60}) were "
            "not copied"
        )
    pages = len(store)
    if pages != copied:
        out.append(
            f"the store counts {pages} pages ({base}:meta live) but held {copied} entry "
            f"records ({base}:b…): the copy holds the {copied}"
        )
    return out


def copy_warnings(uri: str, prefix: str | None, store: Store, copied: int) -> list[str]:
    """What a copy of ``store`` (``copied`` entries) left behind, each in a line; nothing for a
    store as nearduppipe writes it."""
    if store.format_version not in (2, 3):  # (format 1: several rows per key; not checked)
        return []
    path = sqlite_file(uri)
    if path:
        return _sqlite_leftovers(path, copied)
    if is_redis(uri) and not _scheme(uri).endswith("+cluster"):
        return _redis_leftovers(uri, resolve_redis_prefix(uri, prefix), store, copied)
    return []
