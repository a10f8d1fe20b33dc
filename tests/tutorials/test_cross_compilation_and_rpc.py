"""Tutorial flow: "Cross Compilation and RPC".

Build a kernel, export it (tar and so), upload it to a remote (an in-process LocalSession and a real
RPC server on localhost), load it there, run it on the remote's CPU with arrays allocated on that
device, time it with the remote time_evaluator, and list / download / remove the uploaded file.
Cross-compiling to another architecture is not built: asked for, it is a clear NotImplementedError.
"""
import numpy as np
import pytest

import kiln as tvm
from kiln import rpc, te
from kiln.contrib import utils


def _add_one(n=1024):
    n = tvm.convert(n)
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return A, B, te.create_schedule(B.op)


@pytest.fixture(scope="module")
def server():
    srv = rpc.Server(host="127.0.0.1", port=9390, port_end=9490)
    yield srv
    srv.terminate()


@pytest.mark.parametrize("remote_kind", ["local", "server"])
@pytest.mark.parametrize("lib_name", ["lib.tar", "lib.so"])
def test_upload_load_run(remote_kind, lib_name, request):
    A, B, s = _add_one()
    func = tvm.build(s, [A, B], target="llvm", name="add_one")
    temp = utils.tempdir()
    path = temp.relpath(lib_name)
    func.export_library(path)

    if remote_kind == "local":
        remote = rpc.LocalSession()
    else:
        srv = request.getfixturevalue("server")
        remote = rpc.connect("127.0.0.1", srv.port)
    remote.upload(path)
    assert lib_name in remote.listdir(".")
    assert bytes(remote.download(lib_name)) == open(path, "rb").read()
    rfunc = remote.load_module(lib_name)
    dev = remote.cpu()
    rng = np.random.default_rng(0)
    a = tvm.nd.array(rng.uniform(size=1024).astype(A.dtype), dev)
    b = tvm.nd.array(np.zeros(1024, dtype=A.dtype), dev)
    rfunc(a, b)
    np.testing.assert_equal(b.numpy(), a.numpy() + 1)
    time_f = rfunc.time_evaluator(rfunc.entry_name, dev, number=10)
    assert time_f(a, b).mean > 0
    remote.remove(lib_name)
    assert lib_name not in remote.listdir(".")


def test_cross_compiling_is_a_clear_error():
    A, B, s = _add_one()
    target = tvm.target.Target("llvm -mtriple=aarch64-linux-gnu")
    assert target.kind.name == "llvm"
    with pytest.raises(NotImplementedError, match="aarch64"):
        tvm.build(s, [A, B], target=target, name="add_one")

