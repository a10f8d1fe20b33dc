"""Invalid schedules and TE misuse raise clear kiln errors."""
import pytest

from kiln import te
from kiln.error import KilnError, ScheduleError, LoweringError


def _chain():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((16, 16), lambda i, j: B[i, j] * 2.0, name="C")
    return A, B, C


def test_split_axis_of_another_stage():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"stage 'C'.*'i'.*belongs to stage 'B'"):
        s[C].split(B.op.axis[0], factor=4)


def test_split_axis_already_split():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    i = C.op.axis[0]
    s[C].split(i, factor=4)
    with pytest.raises(ScheduleError, match=r"stage 'C'.*'i' has already been split"):
        s[C].split(i, factor=2)
    with pytest.raises(ScheduleError, match="already been split"):
        s[C].vectorize(i)


def test_split_bad_factor():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="positive"):
        s[C].split(C.op.axis[0], factor=0)
    with pytest.raises(ScheduleError, match="exactly one"):
        s[C].split(C.op.axis[0], factor=2, nparts=2)


def test_vectorize_axis_of_other_stage():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"vectorize on stage 'C'.*belongs to stage 'B'"):
        s[C].vectorize(B.op.axis[1])


def test_fuse_non_adjacent():
    A = te.placeholder((4, 5, 6), name="A")
    B = te.compute((4, 5, 6), lambda i, j, k: A[i, j, k], name="B")
    s = te.create_schedule(B.op)
    i, j, k = B.op.axis
    with pytest.raises(ScheduleError, match=r"'i' and 'k' are not adjacent"):
        s[B].fuse(i, k)
    f = s[B].fuse(j, i)  # reversed order of adjacent axes is accepted
    assert s[B].leaf_iter_vars == [f, k]


def test_fuse_reduction_with_data_axis():
    # TVM allows it: the fused loop is a reduction loop (tests/compat/test_compat2_te_schedule.py runs it)
    A = te.placeholder((4, 5), name="A")
    r = te.reduce_axis((0, 5), "r")
    B = te.compute((4,), lambda i: te.sum(A[i, r], axis=r), name="B")
    s = te.create_schedule(B.op)
    f = s[B].fuse(B.op.axis[0], r)
    assert f.iter_type == r.iter_type


def test_reorder_duplicate():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    with pytest.raises(ScheduleError, match="'i' appears more than once"):
        s[C].reorder(i, j, i)


def test_compute_at_non_consumer():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: A[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: B[i] + C[i], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], C.op.axis[0])  # checked when lowering, as in TVM
    with pytest.raises(ScheduleError, match="'C' does not consume 'B'"):
        te.schedule_to_primfunc(s, [A, D])
    s[B].compute_at(s[D], D.op.axis[0])  # a real consumer is fine
    te.schedule_to_primfunc(s, [A, D])


def test_compute_at_axis_not_in_stage():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="is not a loop of stage 'C'"):
        s[B].compute_at(s[C], B.op.axis[0])
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    with pytest.raises(ScheduleError, match="is not a loop of stage 'C'"):
        s[B].compute_at(s[C], C.op.axis[0])


def test_compute_at_then_split_attach_axis_is_legalized():
    # TVM's LegalizeInvalidAttach: the attachment moves to the inner loop of the split
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].split(C.op.axis[0], factor=4)
    te.schedule_to_primfunc(s, [A, C])


def test_compute_at_with_consumer_outside_scope_fails_at_lowering():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: C[i] + B[i], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], C.op.axis[0])  # but D also reads B
    with pytest.raises(LoweringError, match="consumer 'D' is not computed inside"):
        te.schedule_to_primfunc(s, [A, D])


def test_compute_inline_reduction_and_output():
    A = te.placeholder((4, 5), name="A")
    r = te.reduce_axis((0, 5), "r")
    B = te.compute((4,), lambda i: te.sum(A[i, r], axis=r), name="B")
    C = te.compute((4,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="'B': it is a reduction"):
        s[B].compute_inline()
    with pytest.raises(ScheduleError, match="'C': it is an output"):
        s[C].compute_inline()


def test_vectorize_reduction_axis():
    A = te.placeholder((4, 5), name="A")
    r = te.reduce_axis((0, 5), "r")
    B = te.compute((4,), lambda i: te.sum(A[i, r], axis=r), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="reduction axis.*rfactor"):
        s[B].vectorize(r)
    ro, ri = s[B].split(r, factor=2)
    with pytest.raises(ScheduleError, match="reduction axis.*rfactor"):
        s[B].vectorize(ri)
    with pytest.raises(ScheduleError, match="reduction axis"):
        s[B].parallel(ro)


def test_rfactor_errors():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="not a reduction"):
        s.rfactor(C, C.op.axis[0])


def test_cache_read_reader_not_consuming():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match="does not read A"):
        s.cache_read(A, "local", [C])


def test_unknown_tensor_in_schedule():
    A, B, C = _chain()
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="'C' is not an operation of this schedule"):
        s[C]


def test_missing_input_argument():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(LoweringError, match="'A' is used .* not among the arguments"):
        te.schedule_to_primfunc(s, [C])


def test_compute_misuse():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(KilnError, match="takes 1 argument.*2 dimension"):
        te.compute((4, 4), lambda i: A[i, i])
    with pytest.raises(KilnError, match="2 dimension.*indexed with 3"):
        te.compute((4, 4), lambda i, j: A[i, j, 0])
    r = te.reduce_axis((0, 4), "r")
    with pytest.raises(KilnError, match="top level"):
        te.compute((4,), lambda i: te.sum(A[i, r], axis=r) * 2.0)
