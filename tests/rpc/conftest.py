"""Fixtures for RPC tests: trackers and servers as child processes on 127.0.0.1, always stopped."""
from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from kiln.rpc.base import RPC_TRACKER_MAGIC
from kiln.rpc.server import Server
from kiln.rpc.tracker import Tracker

HOST = "127.0.0.1"
TEST_INIT = "kiln.rpc.testing:register"


class RawTrackerClient:
    """Speaks the tracker protocol by hand (what TVM's tools send), with a timeout on every read."""

    def __init__(self, port: int, timeout: float = 5.0, handshake: bool = True):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        if handshake:
            self.sock.sendall(struct.pack("<i", RPC_TRACKER_MAGIC))
            assert struct.unpack("<i", self._recv(4))[0] == RPC_TRACKER_MAGIC

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def send(self, value) -> None:
        data = json.dumps(value).encode()
        self.sock.sendall(struct.pack("<i", len(data)) + data)

    def recv(self):
        size = struct.unpack("<i", self._recv(4))[0]
        return json.loads(self._recv(size))

    def ask(self, value):
        self.send(value)
        return self.recv()

    def is_closed_by_peer(self, wait: float = 3.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()


def wait_until(predicate, timeout: float = 10.0, period: float = 0.05):
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(period)


def queue_of(tracker_port: int, key: str) -> dict:
    client = RawTrackerClient(tracker_port)
    try:
        status = client.ask([6])[1]
    finally:
        client.close()
    return status["queue_info"].get(key, {"free": 0, "pending": 0})


@pytest.fixture
def tracker():
    t = Tracker(HOST, 0, 0, silent=True)
    yield t
    t.terminate()


@pytest.fixture(scope="module")
def shared_tracker():
    t = Tracker(HOST, 0, 0, silent=True)
    yield t
    t.terminate()


@pytest.fixture
def make_server():
    """make_server(**kwargs) starts a Server child with the test functions; all are stopped afterwards."""
    servers = []

    def make(**kwargs):
        kwargs.setdefault("silent", True)
        kwargs.setdefault("server_init", TEST_INIT)
        server = Server(HOST, 0, 0, **kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.terminate()


@pytest.fixture(scope="module")
def standalone_server():
    server = Server(HOST, 0, 0, silent=True, server_init=TEST_INIT)
    yield server
    server.terminate()
