"""The runtime's long-lived buffers (graph executor storage, the VM's pool, plans and constants) of at least
nd.HUGE_MIN_BYTES start on a 2 MiB boundary of their own private anonymous mapping, advised for transparent huge
pages; smaller ones, and arrays made per call (nd.array, nd.empty), stay 64-byte aligned numpy memory. Contents,
views, DLPack and lifetimes behave as for any NDArray; KILN_HUGEPAGES=0 and a refused madvise fall back to numpy.

Most tests force the huge-page path on (``forced``: the THP check answered yes) so that they run on any POSIX host;
only the check that the kernel really backed the buffer with huge pages needs THP on the host."""
import gc
import mmap
import re
import sys
import weakref

import numpy as np
import pytest

import kiln
from kiln import relay
from kiln.runtime import ndarray as ndm
from kiln.runtime.vm import _StoragePool

HUGE = ndm.HUGE_PAGE
BIG = (3 << 20) // 4 + 1000  # float32 elements: 3 MiB + 4000 bytes, not a multiple of any page size

posix_only = pytest.mark.skipif(not hasattr(mmap, "MAP_PRIVATE") or not hasattr(mmap.mmap, "madvise"),
                                reason="needs POSIX mmap with madvise")


def _mapping(arr):
    """The mmap object behind a numpy array (through its base chain), or None for numpy-owned memory."""
    base = arr
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


@pytest.fixture
def forced(monkeypatch):
    """The huge-page path on, whatever the host's THP setting: madvise runs where the host has THP, and each
    advised range is checked (page-aligned, the buffer's whole 2 MiB pages)."""
    monkeypatch.delenv("KILN_HUGEPAGES", raising=False)
    monkeypatch.setattr(ndm, "_huge_state", True)
    real = ndm._madvise_huge
    thp = sys.platform.startswith("linux") and ndm._thp_mode() in ("always", "madvise")

    def advise(mm, start, length):
        assert start % mmap.PAGESIZE == 0 and length % HUGE == 0 and start + length <= len(mm)
        if thp:
            real(mm, start, length)
    monkeypatch.setattr(ndm, "_madvise_huge", advise)
    return monkeypatch


def huge_nd(shape, dtype="float32", src=None) -> kiln.nd.NDArray:
    """An NDArray from the runtime's long-lived allocation path (what executor storage and the VM pool use)."""
    arr, ptr = ndm._aligned_empty_ptr(tuple(shape), np.dtype(dtype), huge=True)
    assert ptr == arr.__array_interface__["data"][0] or arr.nbytes == 0
    out = kiln.nd.NDArray(arr)
    if src is not None:
        out.copyfrom(src)
    return out


@pytest.fixture
def fresh_state(monkeypatch):
    """The THP check not yet made (restored afterwards, whatever the test changed)."""
    monkeypatch.delenv("KILN_HUGEPAGES", raising=False)
    monkeypatch.setattr(ndm, "_huge_state", None)
    return monkeypatch


@posix_only
def test_big_buffers_are_2mib_aligned_and_mapped(forced):
    for arr in (huge_nd((BIG,)), huge_nd((1024, 1024)), huge_nd((2048, 512), "int32", np.ones((2048, 512), "int32")),
                huge_nd((5, 7, 30000), "float64")):
        assert arr.data_ptr % HUGE == 0, f"{arr.shape} at {arr.data_ptr:#x}"
        assert _mapping(arr._arr) is not None
        assert arr.is_contiguous and arr.is_writable
        assert arr._hi - arr._lo == arr._arr.nbytes


@posix_only
def test_small_buffers_and_per_call_arrays_stay_numpy(forced):
    calls = []
    real = ndm._huge_empty
    forced.setattr(ndm, "_huge_empty", lambda n: calls.append(n) or real(n))
    for shape in ((1,), (7, 13), (ndm.HUGE_MIN_BYTES // 4 - 1,), (0,), (3, 0)):
        arr = huge_nd(shape)
        assert arr.data_ptr % 64 == 0 or arr._arr.nbytes == 0
        assert _mapping(arr._arr) is None
    assert calls == []
    # per-call arrays: numpy memory whatever their size (a fresh mapping would be faulted in at each call)
    for arr in (kiln.nd.empty((BIG,), "float32"), kiln.nd.array(np.ones(BIG, "float32"))):
        assert arr.data_ptr % 64 == 0 and _mapping(arr._arr) is None
    assert calls == []
    big = huge_nd((ndm.HUGE_MIN_BYTES,), "uint8")  # exactly the threshold: the huge-page path
    assert calls == [ndm.HUGE_MIN_BYTES] and big.data_ptr % HUGE == 0


@posix_only
def test_contents_and_copies(forced):
    rng = np.random.default_rng(0)
    src = rng.standard_normal((BIG,)).astype("float32")
    a = huge_nd(src.shape, "float32", src)
    np.testing.assert_array_equal(a.numpy(), src)
    out = a.numpy()
    out[0] = 42.0  # numpy() is a copy
    assert a.numpy()[0] == src[0]
    b = huge_nd((BIG,)).copyfrom(a)
    np.testing.assert_array_equal(b.numpy(), src)
    c = huge_nd((BIG,), "float16").copyfrom(src)  # 1.5 MiB: numpy memory; the cast works alike
    np.testing.assert_array_equal(c.numpy(), src.astype("float16"))
    b[:] = 3.0
    assert (b.numpy() == 3.0).all()
    d = a.copyto(kiln.cpu(0))  # a per-call copy: numpy memory
    assert d.data_ptr != a.data_ptr
    np.testing.assert_array_equal(d.numpy(), src)
    f64 = huge_nd((BIG,), "float64").copyfrom(src)  # converted on the way in
    np.testing.assert_array_equal(f64.numpy(), src.astype("float64"))
    assert f64.data_ptr % HUGE == 0
    r = ndm._resident_array(src.reshape(4, -1))  # the VM's constants
    assert r.data_ptr % HUGE == 0 and r.shape == (4, BIG // 4) and r.dtype == "float32"
    np.testing.assert_array_equal(r.numpy().ravel(), src)


@posix_only
def test_dlpack_round_trip_and_views(forced):
    src = np.arange(BIG, dtype="float32")
    a = huge_nd(src.shape, "float32", src)
    view = np.from_dlpack(a)  # zero copy
    assert view.__array_interface__["data"][0] == a.data_ptr
    view[5] = -1.0
    assert a.numpy()[5] == -1.0
    back = kiln.nd.from_dlpack(a.to_dlpack())
    assert back.data_ptr == a.data_ptr
    np.testing.assert_array_equal(back.numpy(), a.numpy())
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.data_ptr
    t[7] = 123.0
    assert a.numpy()[7] == 123.0
    from_torch = kiln.nd.from_dlpack(torch.arange(BIG, dtype=torch.float32))
    assert from_torch.numpy()[-1] == BIG - 1
    copied = huge_nd((BIG,), "float32", torch.arange(BIG, dtype=torch.float32).numpy())
    assert copied.data_ptr % HUGE == 0
    np.testing.assert_array_equal(torch.from_dlpack(copied).numpy(), np.arange(BIG, dtype="float32"))


@posix_only
def test_memory_is_freed_with_the_last_view(forced):
    a = huge_nd((BIG,))
    ref = weakref.ref(_mapping(a._arr))
    view = np.from_dlpack(a)[10:20]
    del a
    gc.collect()
    assert ref() is not None  # the view keeps the mapping
    view[:] = 1.0
    del view
    gc.collect()
    assert ref() is None
    torch = pytest.importorskip("torch")
    b = huge_nd((BIG,))
    ref = weakref.ref(_mapping(b._arr))
    t = torch.from_dlpack(b)
    del b
    gc.collect()
    t.fill_(2.0)  # still valid memory
    assert ref() is not None
    del t
    gc.collect()
    assert ref() is None


@posix_only
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_repeated_allocation_does_not_grow_the_address_space(forced):
    def vm_size_kb():
        with open("/proc/self/status") as f:
            return int(re.search(r"VmSize:\s+(\d+)", f.read()).group(1))
    for _ in range(3):
        huge_nd((16 << 20,)).numpy()
    gc.collect()
    before = vm_size_kb()
    for _ in range(40):  # 40 x 64 MiB: a leak would add 2.5 GiB
        a = huge_nd((16 << 20,))
        a[:] = 1.0
        del a
    gc.collect()
    assert vm_size_kb() - before < 256 << 10


@posix_only
def test_env_switch_turns_it_off(forced):
    forced.setenv("KILN_HUGEPAGES", "0")
    a = huge_nd((BIG,))
    assert _mapping(a._arr) is None and a.data_ptr % 64 == 0
    forced.setenv("KILN_HUGEPAGES", "1")  # read at each allocation
    assert huge_nd((BIG,)).data_ptr % HUGE == 0


@posix_only
def test_refused_madvise_falls_back_and_stops_trying(forced):
    calls = []

    def refuse(mm, start, length):
        calls.append((start, length))
        raise OSError(22, "Invalid argument")
    forced.setattr(ndm, "_madvise_huge", refuse)
    src = np.arange(BIG, dtype="float32")
    a = huge_nd(src.shape, "float32", src)
    assert len(calls) == 1 and ndm._huge_state is False
    assert _mapping(a._arr) is None and a.data_ptr % 64 == 0
    np.testing.assert_array_equal(a.numpy(), src)
    huge_nd((BIG,))
    assert len(calls) == 1  # not asked again in this process


def test_thp_check(fresh_state):
    """Huge pages are used only on Linux with THP 'always' or 'madvise' (elsewhere: numpy memory, silently)."""
    a = huge_nd((BIG,))
    mode = ndm._thp_mode()
    if sys.platform.startswith("linux") and hasattr(mmap, "MADV_HUGEPAGE") and mode in ("always", "madvise"):
        assert ndm._huge_state is True and a.data_ptr % HUGE == 0
    else:
        assert ndm._huge_state is False and _mapping(a._arr) is None and a.data_ptr % 64 == 0
    fresh_state.setattr(ndm, "_huge_state", None)
    fresh_state.setattr(ndm, "_thp_mode", lambda: "never")
    b = huge_nd((BIG,))
    assert ndm._huge_state is False and _mapping(b._arr) is None and b.data_ptr % 64 == 0


def _anon_huge_kb(addr: int) -> int:
    """AnonHugePages of the mapping of /proc/self/smaps that holds ``addr``."""
    found = False
    with open("/proc/self/smaps") as f:
        for line in f:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
            if m:
                found = int(m.group(1), 16) <= addr < int(m.group(2), 16)
            elif found and line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return 0


def test_kernel_backs_big_buffers_with_huge_pages(fresh_state):
    if not sys.platform.startswith("linux") or ndm._thp_mode() not in ("always", "madvise"):
        pytest.skip(f"transparent huge pages unavailable on this host (mode {ndm._thp_mode()!r})")
    # the kernel may find no free 2 MiB page at the moment (fragmented memory): a few tries
    for _ in range(3):
        a = huge_nd((4 << 20,))  # 16 MiB
        a[:] = 1.0  # touch it
        if _anon_huge_kb(a.data_ptr) >= 2048:
            break
    assert _anon_huge_kb(a.data_ptr) >= 2048


@posix_only
def test_vm_pool_big_buffers(forced):
    pool = _StoragePool()
    t = pool.tensor((1024, 1024), "float32")
    assert t.data_ptr % HUGE == 0 and _mapping(t._arr) is not None
    small = pool.tensor((16, 16), "float32")
    assert small.data_ptr % 64 == 0 and _mapping(small._arr) is None


@posix_only
def test_graph_executor_parameters_in_huge_page_memory(forced):
    """A 4 MiB weight and the executor's other buffers: correct results, the weight (copied in by the factory's
    set_input) lives in mapped memory the kernels read."""
    from kiln.contrib import graph_executor
    rng = np.random.default_rng(0)
    m, k, n = 3, 1024, 1027  # n: not a multiple of the dense kernel's tiles
    xv, wv = relay.var("x", shape=(m, k)), relay.var("w", shape=(n, k))
    f = relay.Function([xv, wv], relay.nn.relu(relay.nn.dense(xv, wv)))
    w = rng.standard_normal((n, k)).astype("float32")
    with kiln.transform.PassContext(opt_level=3):
        lib = relay.build(kiln.IRModule.from_expr(f), target="llvm", params={"w": w})
    g = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    x = rng.standard_normal((m, k)).astype("float32")
    g.run(x=x)
    np.testing.assert_allclose(g.get_output(0).numpy(), np.maximum(x @ w.T, 0), rtol=1e-4, atol=1e-4)
    ex = g.module
    params = [ex.get_input(name) for name in ex._param_names]
    assert params and all(p._arr.nbytes >= ndm.HUGE_MIN_BYTES for p in params)
    for p in params:
        assert _mapping(p._arr) is not None
    for entry in ex.entries:
        assert entry._ptr % 64 == 0
    # without huge pages: the same results
    forced.setenv("KILN_HUGEPAGES", "0")
    g2 = graph_executor.GraphModule(lib["default"](kiln.cpu(0)))
    g2.run(x=x)
    assert all(_mapping(e._arr) is None for e in g2.module.entries)
    np.testing.assert_array_equal(g2.get_output(0).numpy(), g.get_output(0).numpy())


@posix_only
def test_vm_constants_and_results(forced):
    """A VM executable's 4 MiB constant (the bound weight) lives in mapped memory; results unchanged."""
    from kiln.runtime import vm as rvm
    rng = np.random.default_rng(1)
    m, k, n = 5, 1024, 1029
    xv = relay.var("x", shape=(m, k))
    w = rng.standard_normal((n, k)).astype("float32")
    f = relay.Function([xv], relay.nn.dense(xv, relay.const(w)))
    exe = relay.vm.compile(kiln.IRModule.from_expr(f), "llvm")
    vm = rvm.VirtualMachine(exe, kiln.cpu())
    assert any(_mapping(c._arr) is not None and c.data_ptr % HUGE == 0 for c in vm._consts)
    x = rng.standard_normal((m, k)).astype("float32")
    np.testing.assert_allclose(vm.run(x).numpy(), x @ w.T, rtol=1e-4, atol=1e-4)
