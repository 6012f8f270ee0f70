"""``nearduppipe migrate`` on a server it cannot use prints one line and exits 2, as every
other command does with a store it cannot open (issue 42, item 5): a refused connection, a
server that does not answer, a wrong or missing password, a ``redis+cluster://`` URI for a
single server, a Cluster that cannot be reached. No traceback, and never the password. Run in
child processes: the exit status and streams a shell sees."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import pytest

from ...support.cli import run_process
from ...support.redis_server import RedisServer, free_port

SECRET = "s3cret-Pw-42"


@pytest.fixture(scope="module")
def locked_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that wants a password."""
    server = RedisServer(tmp_path_factory.mktemp("redis-pw"), password=SECRET).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    """A port that takes connections and never answers (a hung server, a black hole)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def _uri(case: str, server: RedisServer, silent: int) -> str:
    return {
        "refused": f"redis://127.0.0.1:{free_port()}/0",
        "timeout": f"redis://:{SECRET}@127.0.0.1:{silent}/0?socket_timeout=1",
        "wrong password": server.url.replace(SECRET, "not-" + SECRET),
        "no password": server.url.replace(f":{SECRET}@", ""),
        "cluster URI, single server": server.url.replace("redis://", "redis+cluster://"),
        "cluster refused": f"redis+cluster://:{SECRET}@127.0.0.1:{free_port()}",
    }[case]


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("refused", "cannot reach Redis: .*Connection refused"),
        ("timeout", "cannot reach Redis: Timeout"),
        ("wrong password", "Redis refused the credentials: invalid username-password pair"),
        ("no password", "Redis refused the credentials"),
        ("cluster URI, single server", r"not a Redis Cluster .*; a single server is redis://"),
        ("cluster refused", "cannot reach the cluster: .*Connection refused"),
    ],
)
def test_migrate_on_a_server_it_cannot_use_says_one_line_and_exits_2(
    case: str, said: str, locked_server: RedisServer, silent_port: int
) -> None:
    uri = _uri(case, locked_server, silent_port)
    done = run_process("migrate", uri, "--prefix", "x")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("nearduppipe migrate: redis"), lines[0]
    assert " prefix 'x': " in lines[0]
    assert SECRET not in done.stderr
    assert re.search(said, lines[0]), lines[0]
