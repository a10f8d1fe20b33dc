"""The pool workers' idle spin follows the adaptive thread policy: long on a quiet machine, short while other
processes keep cores busy or under the fixed policy; an explicit spin (set_spin_us, $KILN_POOL_SPIN_US) is kept."""
import pytest

from kiln.runtime import thread_policy, thread_pool


@pytest.fixture
def pool(monkeypatch):
    if thread_pool.launch_address() is None:
        pytest.fail("kiln's thread pool could not be built on this host")
    monkeypatch.delenv("KILN_POOL_SPIN_US", raising=False)
    monkeypatch.setitem(thread_pool._state, "explicit_spin", False)
    monkeypatch.setattr(thread_policy.ADAPTER, "usable", None)
    before = thread_pool.pool_stats()["spin_us"]
    saved = thread_pool._state.get("adaptive_spin_us")
    yield thread_pool
    thread_pool._state["lib"].kiln_pool_set_spin_us(before)
    thread_pool._state["adaptive_spin_us"] = saved
    thread_policy.set_thread_policy(None)


def _spin():
    return thread_pool.pool_stats()["spin_us"]


def test_quiet_adaptive_spins_long_busy_spins_short(pool, monkeypatch):
    thread_policy.set_thread_policy("adaptive")
    monkeypatch.setattr(thread_policy.ADAPTER, "cpus", 2)
    assert thread_policy.spin_choice()  # no decision yet: quiet
    thread_policy._apply_spin()
    assert _spin() == thread_pool.QUIET_SPIN_US
    monkeypatch.setattr(thread_policy.ADAPTER, "usable", 1)  # one core taken by another process
    assert not thread_policy.spin_choice()
    thread_policy._apply_spin()
    assert _spin() == thread_pool.BUSY_SPIN_US
    monkeypatch.setattr(thread_policy.ADAPTER, "usable", 2)
    thread_policy._apply_spin()
    assert _spin() == thread_pool.QUIET_SPIN_US


def test_fixed_policy_spins_short(pool):
    thread_policy.set_thread_policy("fixed")  # applies at once
    assert not thread_policy.spin_choice()
    assert _spin() == thread_pool.BUSY_SPIN_US
    thread_policy.set_thread_policy("adaptive")
    assert _spin() == thread_pool.QUIET_SPIN_US


def test_explicit_spin_is_kept(pool):
    thread_pool.set_spin_us(7)
    assert thread_pool.adapt_spin(True) is None and thread_pool.adapt_spin(False) is None
    thread_policy.set_thread_policy("adaptive")
    assert _spin() == 7


def test_environment_spin_is_kept(pool, monkeypatch):
    thread_pool._state["lib"].kiln_pool_set_spin_us(11)
    monkeypatch.setenv("KILN_POOL_SPIN_US", "11")
    assert thread_pool.adapt_spin(True) is None
    thread_policy.set_thread_policy("adaptive")
    assert _spin() == 11
