"""The Redis stores' Lua, served as a function library where the server has them, else as a
script.

Why: a script sent with ``EVALSHA`` runs its whole chunk on every call, so each call first
defined the ~40 helper functions of the entries' and the search's Lua again:
16 µs of the ~64 µs a check took on the server at 200 k entries (Redis 7.0, measured by
returning early at each step). A function library (Redis 7: ``FUNCTION LOAD``, then
``FCALL``) runs the chunk once, when it loads; a call only runs its mode. The server's time
per check is what every crawler process sharing the store spends of one Redis thread, so it
caps how many processes a node serves.

Both forms are composed from the same Lua files, which keep a call's state in locals that
``setup()`` sets from ``KEYS`` and ``ARGV``; they differ only in a first and a last line
(tests run both: the second on a server where ``FUNCTION`` is renamed away). A library's
name carries a digest of its code, so processes of different versions sharing a server each
call their own code; a server restarted without persistence, or a failed-over replica that
never had it, answers "Function not found" and the library is loaded again. Redis before 7,
or an account whose ACL denies ``FUNCTION``/``FCALL``, gets the script.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
from collections.abc import Callable, Sequence
from typing import Any

from .keys import unavailable

__all__ = ["CLUSTER", "SINGLE3", "Program", "read_lua"]

logger = logging.getLogger(__name__)

# what a server says when it has no functions (Redis < 7, FUNCTION renamed away) or an ACL
# denies them to this account (redis-py strips the NOPERM code from the message)
_NO_FUNCTIONS = ("unknown command", "unknown subcommand", "no permissions", "NOPERM")


def read_lua(name: str) -> str:
    """The text of one of the package's Lua files."""
    return (importlib.resources.files(__package__) / name).read_text("utf-8")


class Program:
    """One Lua program (``files`` in order, then ``run``: the statements that answer a call
    once ``setup()`` has run) as a script and as a function library. ``read`` gives a file's
    text (the package's own; tests compose format 2's program with a file of their own)."""

    def __init__(
        self, files: Sequence[str], run: str, tag: str, read: Callable[[str], str] = read_lua
    ) -> None:
        body = "\n".join(read(name) for name in files)
        digest = hashlib.sha1((body + run).encode()).hexdigest()[:16]
        self.function = f"nearduppipe_{tag}_{digest}"
        # EVAL: KEYS and ARGV are globals; the locals of the same names are what setup() reads
        self.script = f"local KEYS, ARGV = KEYS, ARGV\n{body}\nsetup()\n{run}\n"
        self.sha = hashlib.sha1(self.script.encode()).hexdigest()
        call = f"function(keys, args)\n  KEYS, ARGV = keys, args\n  setup()\n  {run}\nend"
        # two names for one callback: a function without flags is refused once the server is
        # out of memory (a script only when it writes), so reads use the no-writes one
        self.library = (
            f"#!lua name={self.function}\nlocal KEYS, ARGV\n{body}\nlocal call = {call}\n"
            f"redis.register_function{{function_name = '{self.function}', callback = call}}\n"
            f"redis.register_function{{function_name = '{self.function}_ro', callback = call, "
            "flags = {'no-writes'}}\n"
        )

    def load(self, client: Any) -> bool:
        """Load the library on ``client``'s server: False if the server refuses it (call the
        script instead: no functions there, an ACL, a managed service's own rules); connection
        errors and "not now" replies (:func:`.keys.unavailable`) propagate."""
        import redis

        try:
            client.function_load(self.library)
        except redis.ResponseError as e:
            if "already exists" in str(e):
                return True
            if unavailable(e):  # out of memory, a read-only replica: not now, not never
                raise
            expected = any(s in str(e) for s in _NO_FUNCTIONS)
            logger.log(
                logging.INFO if expected else logging.WARNING,
                "Redis function library %s not loaded (%s): calling the store's script instead",
                self.function,
                e,
            )
            return False
        return True

    def head(self, functions: bool, n_keys: int, write: bool = True) -> list[bytes]:
        """The command's first words: ``FCALL name n`` or ``EVALSHA sha n``."""
        if functions:
            name = self.function if write else self.function + "_ro"
            return [b"FCALL", name.encode(), str(n_keys).encode()]
        return [b"EVALSHA", self.sha.encode(), str(n_keys).encode()]

    def recover(self, client: Any, error: object, functions: bool) -> bool | None:
        """After a call's reply ``error``: None if it is not a refusal to find the code (an
        error of the call itself, or no error), else whether to go on with the library (True)
        or the script (False) once ``client``'s server has what it lacked: the script loaded
        after NOSCRIPT, the library after "Function not found", nothing where FCALL itself is
        unknown or denied. The call is then sent again. ``functions``: what the caller used
        so far (already False: another thread's call, packed before the switch, was refused)."""
        import redis

        if isinstance(error, redis.exceptions.NoScriptError):
            client.script_load(self.script)
            return functions
        if not isinstance(error, redis.ResponseError):
            return None
        text = str(error)
        if "Function not found" in text:
            return functions and self.load(client)
        if "fcall" in text.lower() and any(s in text for s in _NO_FUNCTIONS):
            return False  # (FCALL itself unknown or denied, not a command inside the call)
        return None


# the single-node store (format 3: buckets addressed by key digests, redis_entries3.lua)
SINGLE3 = Program(
    ("redis_common.lua", "redis_entries3.lua", "redis_search.lua", "redis_check_and_add.lua"),
    "return modes()",
    "single3",
)
# the Redis Cluster store's shards (format 3 too: each shard is a single node's layout)
CLUSTER = Program(
    (
        "redis_common.lua",
        "redis_entries3.lua",
        "redis_search.lua",
        "redis_cluster.lua",
        "redis_check_and_add.lua",
    ),
    "local r = cluster_modes()\n  if r ~= nil then return r end\n  return modes()",
    "cluster",
)
