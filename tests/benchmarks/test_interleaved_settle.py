"""benchmarks.common.settle / interleaved: a contender is timed only after the threads the previous one left
spinning have gone idle (ONNX Runtime's pool spins ~50 ms of CPU after a run and took the next contender's
core). Mechanism only: no speed is asserted."""
import hashlib
import threading
import time

from benchmarks.common import interleaved, settle


class FakeClocks:
    """Wall and process-CPU clocks driven by ``sleep``: ``busy_until`` is when a simulated spinning thread stops
    (it burns one core until then)."""

    def __init__(self, busy_until: float):
        self.now = 0.0
        self.cpu = 0.0
        self.busy_until = busy_until
        self.sleeps = []

    def clock(self):
        return self.now

    def cpu_clock(self):
        return self.cpu

    def sleep(self, s):
        self.sleeps.append(s)
        spin = max(0.0, min(self.now + s, self.busy_until) - self.now)
        self.cpu += spin
        self.now += s


def test_settle_waits_for_spinning_threads_fake_clocks():
    c = FakeClocks(busy_until=0.23)
    waited = settle(min_s=0.05, window_s=0.01, share=0.1, max_s=1.0, cpu_clock=c.cpu_clock, clock=c.clock,
                    sleep=c.sleep, runnable=lambda: 0)
    # the first window that starts after the spinner stopped is quiet: 0.05 + 19 busy windows + 1 quiet
    assert 0.23 <= waited <= 0.25
    assert c.sleeps[0] == 0.05


def test_settle_quiet_process_waits_only_the_minimum_plus_one_window():
    c = FakeClocks(busy_until=0.0)
    waited = settle(min_s=0.05, window_s=0.01, share=0.1, max_s=1.0, cpu_clock=c.cpu_clock, clock=c.clock,
                    sleep=c.sleep, runnable=lambda: 0)
    assert abs(waited - 0.06) < 1e-9


def test_settle_gives_up_after_max_s():
    c = FakeClocks(busy_until=1e9)
    waited = settle(min_s=0.05, window_s=0.01, share=0.1, max_s=0.3, cpu_clock=c.cpu_clock, clock=c.clock,
                    sleep=c.sleep, runnable=lambda: 0)
    assert 0.3 <= waited <= 0.31 + 1e-9


def test_settle_waits_while_another_thread_stays_runnable():
    """A spinner descheduled by other processes uses no CPU but is still runnable: not quiet yet."""
    c = FakeClocks(busy_until=0.0)
    states = iter([1, 1, 1, 0])
    waited = settle(min_s=0.05, window_s=0.01, share=0.1, max_s=1.0, cpu_clock=c.cpu_clock, clock=c.clock,
                    sleep=c.sleep, runnable=lambda: next(states))
    assert abs(waited - 0.09) < 1e-9


def test_other_threads_runnable_sees_a_spinning_thread():
    from benchmarks.common import other_threads_runnable
    stop = time.perf_counter() + 5.0
    done = threading.Event()

    def spin():
        while time.perf_counter() < stop and not done.is_set():
            pass
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        # the spinner holds the GIL or waits for it; sample until it is seen runnable (it is, most of the time)
        seen = False
        deadline = time.perf_counter() + 4.0
        while not seen and time.perf_counter() < deadline:
            time.sleep(0.001)
            seen = (other_threads_runnable() or 0) >= 1
        assert seen
    finally:
        done.set()
        t.join()
    assert other_threads_runnable() is not None


_BLOCK = bytes(1 << 16)


def _spin(stop_at: float):
    """Burn CPU mostly outside the GIL, as a library's native pool thread does: hashlib releases the GIL
    while it hashes a large buffer, so the thread stays runnable (state R) while the main thread holds the GIL
    and checks. A pure-Python spinner waits for the GIL in state S at that moment, and a 10 ms window in which
    the shared VM ran none of its instructions looked quiet (the test failed now and then)."""
    while time.perf_counter() < stop_at:
        hashlib.sha256(_BLOCK)


def test_interleaved_times_a_contender_only_after_the_previous_ones_spinner_stopped():
    """Contender "spinner" leaves a thread burning CPU for 0.15 s after each call (as ONNX Runtime's pool does);
    contender "probe" records whether that thread was still alive when its timed calls ran."""
    spinners = []
    alive_during_probe = []

    def spinner_call():
        t = threading.Thread(target=_spin, args=(time.perf_counter() + 0.15,), daemon=True)
        t.start()
        spinners.append(t)

    def probe_timer(n):
        alive_during_probe.append(any(t.is_alive() for t in spinners))
        return 0.0

    res = interleaved({"spinner": spinner_call, "probe": ("timer", probe_timer)}, rounds=3, number=1, warmup=1)
    for t in spinners:
        t.join()
    # warm-up (no pause before it) excepted, the probe never ran beside the spinning thread
    assert alive_during_probe[1:] and not any(alive_during_probe[1:])
    # the order rotates: in rounds 0 and 2 the probe comes right after the spinner, and its pause waited for it
    assert res["probe"]["settle_s"][0] >= 0.1 and res["probe"]["settle_s"][2] >= 0.1
    assert set(res) == {"spinner", "probe"} and len(res["probe"]["runs_s"]) == 3


def test_interleaved_pause_is_pluggable():
    calls = []
    res = interleaved({"a": lambda: None, "b": lambda: None}, rounds=3, number=1, warmup=1,
                      pause=lambda: calls.append(1) or 0.0)
    assert len(calls) == 6 and res["a"]["settle_s"] == [0.0, 0.0, 0.0]


def test_interleaved_rotates_the_order_each_round():
    """Round i starts with contender (start + i) mod n, so none is always first after what ran before; the runs
    stay in round order (paired_speedup pairs them by round)."""
    seen = []

    def timer(name):  # records the timed calls (number=2; warm-up and the untimed call take 0 and 1)
        return ("timer", lambda n: (seen.append(name) if n == 2 else None) or float(len(seen)))

    res = interleaved({k: timer(k) for k in "abc"}, rounds=4, number=2, warmup=0, pause=lambda: 0.0)
    assert seen == list("abc" "bca" "cab" "abc")
    assert all(len(res[k]["runs_s"]) == 4 for k in "abc")
    assert res["b"]["runs_s"] == sorted(res["b"]["runs_s"])  # round order kept
    seen.clear()
    interleaved({k: timer(k) for k in "abc"}, rounds=1, number=2, warmup=0, pause=lambda: 0.0, start=5)
    assert seen == list("cab")
