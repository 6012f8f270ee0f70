"""One ``nearduppipe migrate`` at a time per store: the migration's lock ``{P}:l``.

Why: two migrations at once both scan ``{P}:e`` and both delete and refill ``{P}:c`` while
rebuilding the log; the one that switches its log in last wins with a log missing what the
other deleted under it, and a client reads the log to find near-duplicates (measured on
200,000 entries: a fresh client then found near-copies of 107 of 1,000 sampled entries).

How:

* The lock is a string key set with ``NX`` and an expiry of :data:`LOCK_TTL` (30 s), holding
  who holds it (host, pid, start time, a random token) as JSON. A second migration finds it
  and is refused with one line naming the first, or, asked to wait, polls until it is gone.
* A thread renews it every :data:`RENEW_EVERY` (5 s) while the migration runs (compare the
  token, then ``PEXPIRE``). A migration killed (SIGKILL, a lost host) stops renewing; its lock
  expires at most 30 s after the last renewal, and the takeover rule is that expiry: the next
  ``migrate`` sets the key again (``NX`` succeeds once it is gone) and resumes from the cursor
  and phase recorded in the meta. A live migration's lock never expires unless it cannot
  reach the server for 30 s. A lock whose holder ran on this host (same host name) under a
  pid that no longer exists is taken over at once (compare-and-set): rerunning a migration
  killed here need not wait for its lock to lapse. Were that judgement ever wrong (two
  machines with one host name), the fence below stops the other run at its next write.
* Every write of a migration is a script that first compares the token in the *fence* key of
  its slot: the lock itself on a single node; on a Redis Cluster, ``{tag}:l`` of the shard
  being converted, set by the holder of the store's lock before its first write to that shard
  (a script reaches one slot only). A migration that lost its lock (paused longer than the
  expiry, then resumed) has its next write refused and stops: whatever the timing, the writes
  of two migrations never interleave, so the log rebuilt is every stored entry's.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base import StoreError

__all__ = ["FENCE_LUA", "LOCK_TTL", "LOST", "RENEW_EVERY", "Holder", "MigrationLock"]

LOCK_TTL = 30.0  # seconds a lock outlives its last renewal (a killed migration's, at most)
RENEW_EVERY = 5.0  # seconds between renewals: six chances before it expires
LOST = "NEARDUP_MIGRATE_LOCK_LOST"  # the fenced scripts' error reply

# The start of every fenced script: KEYS[1] is the fence, ARGV[1] the holder's lock value.
FENCE_LUA = f"""if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('{LOST} this migration no longer holds the store\\'s lock')
end
"""
# KEYS[1]: a lock or fence; ARGV: the holder's value, milliseconds to live. 1 if still ours.
_RENEW_LUA = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0"""
# KEYS[1]: the lock; ARGV: the dead holder's value, ours, milliseconds to live. 1 if taken.
_TAKEOVER_LUA = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0"""
# KEYS[1]: a lock or fence; ARGV[1]: the holder's value. Deleted only by its holder.
_RELEASE_LUA = """if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0"""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as its value records it (what a refused migration prints)."""

    host: str
    pid: int
    started: float
    token: str

    @classmethod
    def mine(cls) -> Holder:
        return cls(socket.gethostname(), os.getpid(), time.time(), os.urandom(8).hex())

    @classmethod
    def parse(cls, raw: bytes | str | None) -> Holder | None:
        """The holder a lock value names; None for a value this version did not write."""
        try:
            d = json.loads(raw or b"")
            return cls(str(d["host"]), int(d["pid"]), float(d["started"]), str(d["token"]))
        except (ValueError, TypeError, KeyError):
            return None

    def value(self) -> str:
        return json.dumps(
            {"host": self.host, "pid": self.pid, "started": self.started, "token": self.token},
            sort_keys=True,
        )

    def dead_here(self) -> bool:
        """Whether this holder ran on this host under a pid that no longer exists (a zombie
        not yet reaped, or a pid taken again, counts as alive: the lock then lapses)."""
        if self.host != socket.gethostname() or self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # (EPERM: a process of another user has that pid)
            return False
        return False

    def describe(self, now: float) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return f"pid {self.pid} on {self.host}, started {when} ({now - self.started:.0f} s ago)"


class MigrationLock:
    """The lock at ``key`` for one migration run: :meth:`acquire`, then fenced writes (the
    token is :attr:`value`), :meth:`fence` for each Cluster shard's slot, :meth:`release`.
    A thread renews the lock and the fences every ``renew`` seconds until released."""

    def __init__(
        self,
        client: Any,
        key: str,
        where: str,
        *,
        ttl: float = LOCK_TTL,
        renew: float = RENEW_EVERY,
    ) -> None:
        self.client = client
        self.key = key
        self.where = where
        self.ttl_ms = max(1, round(ttl * 1000))
        self.renew_every = renew
        self.holder = Holder.mine()
        self.value = self.holder.value()
        self._held: list[str] = []
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._renew = client.register_script(_RENEW_LUA)
        self._takeover = client.register_script(_TAKEOVER_LUA)
        self._release = client.register_script(_RELEASE_LUA)

    def acquire(self, wait: bool = False, say: Callable[[str], None] | None = None) -> None:
        """Take the lock, or raise a :class:`StoreError` naming who holds it; with ``wait``,
        poll once a second until it is released or expires (a dead holder's: within
        ``ttl``)."""
        told = False
        while not self.client.set(self.key, self.value, nx=True, px=self.ttl_ms):
            raw = self.client.get(self.key)
            if raw is None:
                continue  # (released between the two calls: try again at once)
            if self._take_from_dead(raw):
                if say:
                    say(
                        f"{self.where}: the migration holding the lock {self.key} "
                        f"({self._who(raw)}) is no longer running; took the lock over, "
                        "resuming its work"
                    )
                break
            busy = self._busy(raw)
            if not wait:
                raise StoreError(f"{busy}; run again when it has finished, or add --wait")
            if say and not told:
                say(f"{busy}; waiting for it")
                told = True
            time.sleep(1.0)
        self._held.append(self.key)
        self._thread = threading.Thread(target=self._renewing, name="migrate-lock", daemon=True)
        self._thread.start()

    def _take_from_dead(self, raw: bytes) -> bool:
        """Take the lock over from a holder :meth:`Holder.dead_here`; whether it was taken."""
        holder = Holder.parse(raw)
        if holder is None or not holder.dead_here():
            return False
        return bool(int(self._takeover(keys=[self.key], args=[raw, self.value, self.ttl_ms])))

    @staticmethod
    def _who(raw: bytes) -> str:
        holder = Holder.parse(raw)
        return holder.describe(time.time()) if holder else f"lock value {raw[:80]!r}"

    def _busy(self, raw: bytes) -> str:
        """Who holds the lock, for a refused (or waiting) run's one line."""
        return (
            f"{self.where}: another migration is running ({self._who(raw)}; its lock {self.key} is "
            f"renewed every {self.renew_every:.0f} s and lapses {self.ttl_ms / 1000:.0f} s "
            "after that run is killed)"
        )

    def fence(self, key: str) -> None:
        """Make ``key`` (a Cluster shard's ``{tag}:l``) hold this run's value, renewed with the
        lock: the fence of that shard's scripts. Set unconditionally: only the lock's holder
        calls this, and a fence left by a migration that lost the lock is to be overwritten."""
        self.client.set(key, self.value, px=self.ttl_ms)
        with self._guard:
            self._held.append(key)

    def unfence(self, key: str) -> None:
        with self._guard:
            if key in self._held:
                self._held.remove(key)
        self._release(keys=[key], args=[self.value])

    def _renewing(self) -> None:
        """Renew every held key until released; a key found no longer ours is dropped (the
        next fenced write fails and says so)."""
        while not self._stop.wait(self.renew_every):
            with self._guard:
                held = list(self._held)
            for key in held:
                try:
                    if not int(self._renew(keys=[key], args=[self.value, self.ttl_ms])):
                        with self._guard:
                            if key in self._held:
                                self._held.remove(key)
                except Exception:  # (a server away for a moment: try again next time)
                    pass

    def release(self) -> None:
        """Stop renewing and delete the lock and fences still ours (a lock taken over by
        another migration is left to it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._guard:
            held, self._held = self._held, []
        for key in reversed(held):
            try:
                self._release(keys=[key], args=[self.value])
            except Exception:  # (a server gone: the lock lapses by itself within its expiry)
                break
