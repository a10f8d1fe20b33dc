"""A tracker with several server processes: queueing, priorities, servers dying mid-session."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from kiln import rpc
from kiln.error import RPCError

from .conftest import HOST, TEST_INIT, queue_of, wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cluster():
    with rpc.LocalCluster(2, key="pool", port=0, port_end=0, server_init=TEST_INIT) as c:
        yield c


def _request_in_thread(c, priority: int, results: dict, name: str):
    def run():
        try:
            sess = c.request(priority=priority, request_timeout=20)
            results[name] = sess
        except Exception as err:  # noqa: BLE001
            results[name] = err
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_request_by_key_and_summary(cluster):
    tracker = rpc.connect_tracker(HOST, cluster.port, timeout=5)
    summary = tracker.summary()
    assert summary["queue_info"]["pool"] == {"free": 2, "pending": 0}
    assert sorted(item["key"] for item in summary["server_info"]) == ["server:pool", "server:pool"]
    s1 = tracker.request("pool", request_timeout=10)
    s2 = tracker.request("pool", request_timeout=10)
    assert {s1.ping()["server_pid"], s2.ping()["server_pid"]} == {s.pid for s in cluster.servers}
    assert "pool" in tracker.text_summary()
    s1.close()
    s2.close()
    with pytest.raises(RPCError, match="became free within"):
        tracker.request("no-such-key", request_timeout=0.5)
    assert queue_of(cluster.port, "no-such-key")["pending"] == 0


def test_queueing_when_all_servers_are_busy(cluster):
    busy = [cluster.request(request_timeout=10) for _ in range(2)]
    results: dict = {}
    thread = _request_in_thread(cluster, 1, results, "waiting")
    wait_until(lambda: queue_of(cluster.port, "pool")["pending"] == 1)
    assert "waiting" not in results
    freed_pid = busy[0].ping()["server_pid"]
    busy[0].close()
    thread.join(15)
    sess = results["waiting"]
    assert not isinstance(sess, Exception), sess
    assert sess.ping()["server_pid"] == freed_pid
    sess.close()
    busy[1].close()


def test_priorities(tracker, make_server):
    make_server(tracker_addr=(HOST, tracker.port), key="solo")
    wait_until(lambda: queue_of(tracker.port, "solo")["free"] == 1)
    holder = rpc.connect_tracker(HOST, tracker.port).request("solo", request_timeout=10)

    class C:  # what _request_in_thread needs
        def request(self, priority, request_timeout):
            return rpc.connect_tracker(HOST, tracker.port).request("solo", priority=priority,
                                                                   request_timeout=request_timeout)

    results: dict = {}
    low = _request_in_thread(C(), 1, results, "low")
    wait_until(lambda: queue_of(tracker.port, "solo")["pending"] == 1)
    high = _request_in_thread(C(), 9, results, "high")
    wait_until(lambda: queue_of(tracker.port, "solo")["pending"] == 2)
    holder.close()
    wait_until(lambda: "high" in results)
    assert "low" not in results  # the later, higher-priority request went first
    results["high"].close()
    low.join(15)
    high.join(1)
    assert not isinstance(results["low"], Exception), results["low"]
    results["low"].close()


def test_server_killed_mid_session(cluster):
    tracker = rpc.connect_tracker(HOST, cluster.port, timeout=5)
    victim_sess = tracker.request("pool", request_timeout=10)
    victim_pid = victim_sess.ping()["server_pid"]
    victim = next(s for s in cluster.servers if s.pid == victim_pid)
    os.killpg(victim.pid, signal.SIGKILL)
    with pytest.raises(RPCError, match="lost the connection"):
        victim_sess.get_function("rpc.test.addone")(1)
    # the tracker drops the dead server; the other one keeps serving
    wait_until(lambda: len(tracker.summary()["server_info"]) == 1)
    for _ in range(3):
        sess = tracker.request("pool", request_timeout=10)
        assert sess.ping()["server_pid"] != victim_pid
        assert sess.get_function("rpc.test.addone")(1) == 2
        sess.close()


def test_request_and_run_retries_on_another_server(cluster):
    tracker = rpc.connect_tracker(HOST, cluster.port, timeout=5)
    calls = []

    def work(sess):
        calls.append(sess.ping()["server_pid"])
        if len(calls) == 1:
            sess.get_function("rpc.test.crash")()  # the first server's worker dies
        return sess.get_function("rpc.test.addone")(41)

    assert tracker.request_and_run("pool", work, max_retry=3) == 42
    assert len(calls) == 2


def test_server_reoffers_itself_when_a_client_never_comes(tracker, make_server):
    """A client takes a server's match key from the tracker and vanishes: the server registers again."""
    from .conftest import RawTrackerClient

    make_server(tracker_addr=(HOST, tracker.port), key="flaky", ping_period=0.1, unmatch_timeout=0.2)
    wait_until(lambda: queue_of(tracker.port, "flaky")["free"] == 1)
    ghost = RawTrackerClient(tracker.port)
    host, port, matchkey = ghost.ask([4, "flaky", "", 1])[1]
    ghost.close()
    assert queue_of(tracker.port, "flaky")["free"] == 0
    wait_until(lambda: queue_of(tracker.port, "flaky")["free"] == 1, timeout=10)
    # the abandoned key no longer opens a session; a fresh request does
    with pytest.raises(RPCError, match="rejected the key"):
        rpc.connect(host, port, matchkey)
    sess = rpc.connect_tracker(HOST, tracker.port).request("flaky", request_timeout=10)
    assert sess.get_function("rpc.test.addone")(1) == 2
    sess.close()
