"""PassContext config te.keep_schedule_record: Schedule.schedule_record / primitive_record."""
import numpy as np

import kiln as tvm
from kiln import te


def _chain():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((16, 16), lambda i, j: B[i, j] + 1, name="C")
    return A, B, C


def test_schedule_record_snapshots_each_primitive():
    A, B, C = _chain()
    with tvm.transform.PassContext(config={"te.keep_schedule_record": True}):
        s = te.create_schedule(C.op)
    assert s.keep_schedule_record
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 4)
    s[B].compute_at(s[C], yo)
    s[C].vectorize(yi)
    s[C].pragma(xo, "unroll")  # calls unroll inside: recorded once, as pragma
    CC = s.cache_read(A, "global", [B])
    assert s.primitive_record == ["vanilla", "tile", "compute_at", "vectorize", "pragma", "cache_read"]
    assert len(s.schedule_record) == len(s.primitive_record)
    # snapshots are independent schedules showing the state after each step
    assert [len(r[C].leaf_iter_vars) for r in s.schedule_record] == [2, 4, 4, 4, 4, 4]
    assert s.schedule_record[1][B].attach_type != s.schedule_record[2][B].attach_type
    assert CC.op not in s.schedule_record[4] and CC.op in s.schedule_record[5]
    assert all(r.schedule_record == [] for r in s.schedule_record)
    # recording does not change what the schedule computes
    f = tvm.build(s, [A, C], "llvm")
    a = np.random.RandomState(0).rand(16, 16).astype("float32")
    c = tvm.nd.array(np.zeros((16, 16), "float32"))
    f(tvm.nd.array(a), c)
    np.testing.assert_allclose(c.numpy(), a * 2 + 1, rtol=1e-6)


def test_failed_primitive_is_not_recorded_and_default_is_off():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], 4)
    assert not s.keep_schedule_record and s.schedule_record == [] and s.primitive_record == []
    with tvm.transform.PassContext(config={"te.keep_schedule_record": True}):
        s = te.create_schedule(C.op)
    try:
        s[C].split(B.op.axis[0], 4)  # not an axis of C
    except tvm.error.ScheduleError:
        pass
    assert s.primitive_record == ["vanilla"]
