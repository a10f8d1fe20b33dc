"""The tracker speaks TVM's protocol: magic, [size][json] messages, PUT/REQUEST/SUMMARY/PING/..."""
from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from kiln import rpc
from kiln.error import RPCError
from kiln.rpc.base import RPC_TRACKER_MAGIC, TrackerCode
from kiln.rpc.tracker import Tracker, format_summary

from .conftest import HOST, RawTrackerClient, queue_of, wait_until

pytestmark = pytest.mark.timeout(30)


def test_magic_ping_and_codes(shared_tracker):
    assert RPC_TRACKER_MAGIC == 0x2F271
    assert (TrackerCode.FAIL, TrackerCode.SUCCESS, TrackerCode.PING, TrackerCode.STOP, TrackerCode.PUT,
            TrackerCode.REQUEST, TrackerCode.UPDATE_INFO, TrackerCode.SUMMARY,
            TrackerCode.GET_PENDING_MATCHKEYS) == (-1, 0, 1, 2, 3, 4, 5, 6, 7)
    client = RawTrackerClient(shared_tracker.port)
    assert client.ask([TrackerCode.PING]) == TrackerCode.SUCCESS
    # STOP with the wrong key is refused and the tracker stays up
    assert client.ask([TrackerCode.STOP, "not-the-key"]) == TrackerCode.FAIL
    assert client.ask([TrackerCode.PING]) == TrackerCode.SUCCESS
    client.close()


def test_put_request_summary(shared_tracker):
    key = "tp-put"
    server = RawTrackerClient(shared_tracker.port)
    assert server.ask([TrackerCode.UPDATE_INFO, {"key": "server:" + key, "addr": [None, 9999]}]) == 0
    assert server.ask([TrackerCode.PUT, key, [9999, key + ":0.25"], None]) == 0
    assert server.ask([TrackerCode.GET_PENDING_MATCHKEYS]) == [key + ":0.25"]

    code, status = RawTrackerClient(shared_tracker.port).ask([TrackerCode.SUMMARY])
    assert code == TrackerCode.SUCCESS
    assert status["queue_info"][key] == {"free": 1, "pending": 0}
    # UPDATE_INFO's None address became the peer's address
    assert {"key": "server:" + key, "addr": [HOST, 9999]} in status["server_info"]

    client = RawTrackerClient(shared_tracker.port)
    assert client.ask([TrackerCode.REQUEST, key, "", 1]) == [TrackerCode.SUCCESS, [HOST, 9999, key + ":0.25"]]
    # the key is no longer pending: it was handed out
    assert server.ask([TrackerCode.GET_PENDING_MATCHKEYS]) == []
    assert queue_of(shared_tracker.port, key) == {"free": 0, "pending": 0}

    # a custom address in PUT is what clients get
    assert server.ask([TrackerCode.PUT, key, [9998, key + ":0.5"], "10.1.2.3"]) == 0
    assert client.ask([TrackerCode.REQUEST, key, "", 1])[1] == ["10.1.2.3", 9998, key + ":0.5"]

    text = rpc.connect_tracker(HOST, shared_tracker.port, timeout=5).text_summary()
    assert "server:" + key in text and "Queue Status" in text
    server.close()
    client.close()


def test_request_waits_then_priority_then_fifo(shared_tracker):
    key = "tp-prio"
    low1 = RawTrackerClient(shared_tracker.port)
    low2 = RawTrackerClient(shared_tracker.port)
    high = RawTrackerClient(shared_tracker.port)
    low1.send([TrackerCode.REQUEST, key, "", 1])
    wait_until(lambda: queue_of(shared_tracker.port, key)["pending"] == 1)
    low2.send([TrackerCode.REQUEST, key, "", 1])
    wait_until(lambda: queue_of(shared_tracker.port, key)["pending"] == 2)
    high.send([TrackerCode.REQUEST, key, "", 10])
    wait_until(lambda: queue_of(shared_tracker.port, key)["pending"] == 3)

    server = RawTrackerClient(shared_tracker.port)
    for i in range(3):
        assert server.ask([TrackerCode.PUT, key, [9000 + i, f"{key}:{i}"], None]) == 0
    # highest priority first, then first come first served
    assert high.recv()[1][1] == 9000
    assert low1.recv()[1][1] == 9001
    assert low2.recv()[1][1] == 9002
    for c in (low1, low2, high, server):
        c.close()


def test_client_dropping_mid_request(shared_tracker):
    key = "tp-drop"
    gone = RawTrackerClient(shared_tracker.port)
    gone.send([TrackerCode.REQUEST, key, "", 5])
    wait_until(lambda: queue_of(shared_tracker.port, key)["pending"] == 1)
    gone.close()
    wait_until(lambda: queue_of(shared_tracker.port, key)["pending"] == 0)
    # the server offered afterwards stays free for the next client instead of going to the dead one
    server = RawTrackerClient(shared_tracker.port)
    assert server.ask([TrackerCode.PUT, key, [9100, key + ":1"], None]) == 0
    assert queue_of(shared_tracker.port, key) == {"free": 1, "pending": 0}
    assert server.ask([TrackerCode.GET_PENDING_MATCHKEYS]) == [key + ":1"]
    client = RawTrackerClient(shared_tracker.port)
    assert client.ask([TrackerCode.REQUEST, key, "", 1])[1] == [HOST, 9100, key + ":1"]
    server.close()
    client.close()


def test_server_disconnect_removes_its_entries(shared_tracker):
    key = "tp-gone"
    server = RawTrackerClient(shared_tracker.port)
    server.ask([TrackerCode.UPDATE_INFO, {"key": "server:" + key, "addr": [None, 9200]}])
    server.ask([TrackerCode.PUT, key, [9200, key + ":1"], None])
    assert queue_of(shared_tracker.port, key)["free"] == 1
    server.close()
    wait_until(lambda: queue_of(shared_tracker.port, key)["free"] == 0)
    summary = rpc.connect_tracker(HOST, shared_tracker.port, timeout=5).summary()
    assert all(item["key"] != "server:" + key for item in summary["server_info"])


def test_stale_entry_expires_and_server_sees_it():
    tracker = Tracker(HOST, 0, 0, silent=True, stale_timeout=0.6)
    try:
        key = "tp-stale"
        server = RawTrackerClient(tracker.port)
        server.ask([TrackerCode.PUT, key, [9300, key + ":1"], None])
        assert queue_of(tracker.port, key)["free"] == 1
        # the server goes silent (no pings): its entry is dropped ...
        wait_until(lambda: queue_of(tracker.port, key)["free"] == 0, timeout=5)
        # ... and its match key is no longer pending, which tells a live server to register again
        assert server.ask([TrackerCode.GET_PENDING_MATCHKEYS]) == []
        server.close()
    finally:
        tracker.terminate()


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\n\r\n",                                   # wrong magic
    "magic+size", "magic+json", "magic+code", "magic+shape",
])
def test_malformed_message_closes_only_that_connection(shared_tracker, garbage):
    bystander = RawTrackerClient(shared_tracker.port)
    if isinstance(garbage, bytes):
        bad = RawTrackerClient(shared_tracker.port, handshake=False)
        bad.sock.sendall(garbage)
    else:
        bad = RawTrackerClient(shared_tracker.port)
        payload = {
            "magic+size": struct.pack("<i", 1 << 30),
            "magic+json": struct.pack("<i", 5) + b"{nope",
            "magic+code": (lambda d: struct.pack("<i", len(d)) + d)(json.dumps([99]).encode()),
            "magic+shape": (lambda d: struct.pack("<i", len(d)) + d)(json.dumps([3, "k", "notapair"]).encode()),
        }[garbage]
        bad.sock.sendall(payload)
    assert bad.is_closed_by_peer()
    bad.close()
    assert bystander.ask([TrackerCode.PING]) == TrackerCode.SUCCESS
    assert RawTrackerClient(shared_tracker.port).ask([TrackerCode.PING]) == TrackerCode.SUCCESS
    bystander.close()


def test_stop_with_key_and_query_tool():
    tracker = Tracker(HOST, 0, 0, silent=True)
    try:
        out = subprocess.run([sys.executable, "-m", "kiln.exec.query_rpc_tracker", "--host", HOST,
                              "--port", str(tracker.port)], capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, out.stderr
        assert "Queue Status" in out.stdout and "Server List" in out.stdout
        client = RawTrackerClient(tracker.port)
        assert client.ask([TrackerCode.STOP, tracker.stop_key]) == TrackerCode.SUCCESS
        tracker.proc.wait(5)
    finally:
        tracker.terminate()
    with pytest.raises(RPCError, match="cannot connect"):
        rpc.connect_tracker(HOST, tracker.port, timeout=2)


def test_format_summary_counts_servers_per_key():
    text = format_summary({"queue_info": {"a": {"free": 1, "pending": 2}, "idle": {"free": 0, "pending": 0}},
                           "server_info": [{"key": "server:a", "addr": ["1.2.3.4", 9090]},
                                           {"key": "server:a", "addr": ["1.2.3.5", 9090]}]})
    assert "1.2.3.4:9090" in text
    row = [line for line in text.splitlines() if line.startswith("a ")][0]
    assert row.split() == ["a", "2", "1", "2"]
    assert not any(line.startswith("idle") for line in text.splitlines())
