"""Defect 9 of issue 15: an RPC server's handshakes must not block each other, and a frame header
must not make anyone allocate memory for data that never arrives. 127.0.0.1 only, bounded in time."""
import socket
import struct
import threading
import time
import tracemalloc

import pytest

from kiln import rpc
from kiln.rpc.protocol import FRAME_MAGIC, SessionLost, recv_frame
from kiln.rpc.server import Server

HOST = "127.0.0.1"


@pytest.fixture
def server():
    srv = Server(host=HOST, port=9300, port_end=9400, server_init="kiln.rpc.testing:register")
    try:
        yield srv
    finally:
        srv.terminate()


def test_idle_connection_does_not_delay_a_client(server):
    idle = [socket.create_connection((HOST, server.port), timeout=30) for _ in range(3)]
    try:
        time.sleep(0.2)  # the server has accepted the idle connections
        start = time.monotonic()
        remote = rpc.connect(HOST, server.port)
        assert remote.get_function("rpc.test.addone")(4) == 5
        remote.close()
        assert time.monotonic() - start < 5.0, "an idle TCP connection delayed the real client"
    finally:
        for s in idle:
            s.close()


def test_half_handshake_does_not_delay_a_client(server):
    # magic sent, key never: the server waits on this one in its own thread only
    slow = socket.create_connection((HOST, server.port), timeout=30)
    slow.sendall(struct.pack("<i", rpc.base.RPC_MAGIC))
    try:
        start = time.monotonic()
        remote = rpc.connect(HOST, server.port)
        assert remote.get_function("rpc.test.addone")(1) == 2
        remote.close()
        assert time.monotonic() - start < 5.0
    finally:
        slow.close()


def _peak_while_receiving(claimed_blob: int, sent: bytes) -> tuple:
    a, b = socket.socketpair()
    a.settimeout(10)
    result = {}

    def reader():
        try:
            recv_frame(a, max_blob=1 << 30)
        except SessionLost as err:
            result["err"] = err

    tracemalloc.start()
    try:
        t = threading.Thread(target=reader)
        t.start()
        b.sendall(struct.pack("<IIQ", FRAME_MAGIC, 2, claimed_blob) + b"{}" + sent)
        b.close()
        t.join(20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        a.close()
    return peak, result


def test_frame_header_claiming_900mb_allocates_nothing_ahead():
    peak, result = _peak_while_receiving(900 << 20, b"x" * 1000)
    assert isinstance(result.get("err"), SessionLost)
    assert peak < 64 << 20, f"receiving 1 KB of a claimed 900 MB blob peaked at {peak >> 20} MB"


def test_frame_blob_that_arrives_is_received_whole():
    a, b = socket.socketpair()
    try:
        payload = bytes(range(256)) * (40 << 10)  # 10 MB: past one receive chunk
        sender = threading.Thread(target=lambda: b.sendall(
            struct.pack("<IIQ", FRAME_MAGIC, 2, len(payload)) + b"{}" + payload))
        sender.start()
        msg, blob = recv_frame(a, max_blob=1 << 30)
        sender.join(10)
        assert msg == {} and isinstance(blob, bytearray) and blob == payload
    finally:
        a.close()
        b.close()
