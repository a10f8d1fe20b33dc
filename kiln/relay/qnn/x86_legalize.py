"""x86 legalization of qnn.conv2d / qnn.dense / qnn.batch_matmul (TVM's ``qnn/op/legalizations.py`` for Intel CPUs): the forms
the int8 kernels of ``kiln.topi.x86`` compute, ``uint8`` data x ``int8`` weights -> ``int32``.

For a constant weight ``w`` with zero point ``zw`` and data ``x`` with a scalar constant zero point ``zx``::

    sum (x - zx) (w - zw) = sum xu * wq - zu * sum wq           wq = w - zw (must fit int8)
                                                               xu = x (uint8) or x + 128 (int8), zu = zx (+128)

The first term is ``nn.conv2d`` / ``nn.dense`` on ``uint8 x int8`` (the x86 int8 kernel), the second a
per-output-channel constant subtracted in the kernel's fused epilogue. A conv pads with the zero point
(``nn.pad`` with ``pad_value = zu``, which fuses into the producer's epilogue), so every window position
holds ``xu`` with ``xu - zu = 0`` where the QNN op reads padding. Input channels that 4 does not divide are
padded (data in the same ``nn.pad``, zero weights) so the conv takes the blocked NCHW4c layout.

Taken only on targets with an int8 dot product (``int8_supported``), and, where the kernels would use
``vpmaddubsw``'s saturating int16 pair sums (``relay.x86.int8_saturating_madd``, no VNNI), only when the
weights keep every pair sum in int16 (``255 * (|wq[2j]| + |wq[2j+1]|) <= 32767``); otherwise the generic
canonicalization applies (``None`` from the hook).
"""
from __future__ import annotations

import numpy as np

from ...ir.op import register_op_attr
from ..expr import const
from ..transform._util import op_call, is_op, type_of
from ...ir.node import structural_equal
from ..transform.type_infer import infer_expr
from .op._common import const_value
from ...error import KilnError
from ...target import Target
from ...topi.x86.conv2d_int8 import int8_supported, int8_mode
from ..op.nn._conv_pool import pad4
from ..op.transform import stack

INT16_MAX = 32767


def _x86_int8_target() -> bool:
    target = Target.current(allow_none=True)
    if target is None or "cpu" not in getattr(target, "keys", ()) or getattr(target, "kind_name", "llvm") not in (
            "llvm", "c"):
        return False
    return int8_supported(target)


def _saturating() -> bool:
    return int8_mode() == "maddubs"


def _pairs_fit_int16(red_axes_last: np.ndarray) -> bool:
    """Whether ``255 * (|a| + |b|)`` fits int16 for each pair of consecutive reduction elements (as the packed
    kernel pairs them: input channels 4c+0/4c+1 and 4c+2/4c+3 of one output, one kernel position)."""
    a = np.abs(red_axes_last.astype(np.int64))
    c = a.shape[-1]
    pad = (-c) % 4
    if pad:
        a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,), np.int64)], axis=-1)
    pair = a[..., 0::2] + a[..., 1::2]
    return int(pair.max(initial=0)) * 255 <= INT16_MAX


def _shifted_weight(w, wzp, axis: int):
    """``w - zw`` as int8 (None when it does not fit)."""
    zw = np.asarray(wzp, np.int64).reshape(-1)
    shape = [1] * w.ndim
    if zw.size > 1:
        shape[axis] = zw.size
    wq = np.asarray(w, np.int64) - zw.reshape(shape)
    if wq.min(initial=0) < -128 or wq.max(initial=0) > 127:
        return None
    return wq.astype(np.int8)


def _uint8_data(x, dtype: str, zx: int):
    """(uint8 data, its zero point): int8 data shifted by 128."""
    if dtype == "uint8":
        return x, zx
    shifted = op_call("add", [op_call("cast", [x], dtype="int32"), const(np.int32(128))])
    return op_call("cast", [shifted], dtype="uint8"), zx + 128


def _common(args, ts, weight_axis: int):
    """(wq, zx) when the call has the legalizable form, else None."""
    if ts[0].dtype not in ("int8", "uint8") or ts[1].dtype not in ("int8", "uint8"):
        return None
    w, wzp, xzp = const_value(args[1]), const_value(args[3]), const_value(args[2])
    if w is None or wzp is None or xzp is None or np.size(xzp) != 1:
        return None
    wq = _shifted_weight(w, wzp, weight_axis)
    if wq is None:
        return None
    return wq, int(np.asarray(xzp).reshape(()))


def _is_depthwise(ts, groups: int) -> bool:
    """groups = input channels = output channels, one input channel per kernel (multiplier 1)."""
    d, k = ts[0].shape, ts[1].shape
    return (len(d) == 4 and len(k) == 4 and all(isinstance(v, int) for v in (d[1], k[0], k[1]))
            and d[1] == groups and k[0] == groups and k[1] == 1)


def legalize_conv2d(attrs, args, ts):
    """qnn.conv2d -> pad(uint8 data, zero point) -> nn.conv2d(uint8, int8) - zu * sum(wq) (see module doc)."""
    if not _x86_int8_target() or (attrs.out_dtype or "int32") != "int32":
        return None
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW":
        return None
    groups = int(attrs.groups)
    depthwise = groups > 1 and _is_depthwise(ts, groups)
    if groups != 1 and not depthwise:
        return None
    got = _common(args, ts, 0)
    if got is None:
        return None
    wq, zx = got
    # the depthwise kernel forms each uint8 x int8 product in int16 (never saturates) and sums in int32
    if not depthwise and _saturating() and not _pairs_fit_int16(np.moveaxis(wq, 1, -1)):
        return None
    xu, zu = _uint8_data(args[0], ts[0].dtype, zx)
    pt, pl, pb, pr = pad4(attrs.padding)
    padding = (pt, pl, pb, pr)
    # input channels not a multiple of 4 (an RGB stem): zero weights for the missing channels and the data
    # padded with them, so AlterOpLayout gives the conv NCHW4c data and an NCHW16c output (no packing inside
    # the kernel, the blocked layout from the first layer on: resnet's max pool then runs on NCHW16c)
    cpad = (-int(ts[0].shape[1])) % 4 if not depthwise and isinstance(ts[0].shape[1], int) else 0
    if cpad:
        wq = np.pad(wq, ((0, 0), (0, cpad), (0, 0), (0, 0)))
    spatial = any(padding) and zu != 0
    if spatial or cpad:
        sp = ((pt, pb), (pl, pr)) if spatial else ((0, 0), (0, 0))
        xu = op_call("nn.pad", [xu, const(np.uint8(zu))], pad_width=((0, 0), (0, cpad)) + sp, pad_mode="constant")
        if spatial:
            padding = (0, 0, 0, 0)
    values = dict(attrs)
    values.update(padding=padding, out_dtype="int32")
    out = op_call("nn.conv2d", [xu, const(wq)], **values)
    if zu:
        corr = (zu * wq.astype(np.int64).reshape(wq.shape[0], -1).sum(axis=1)).astype(np.int32)
        out = op_call("subtract", [out, const(corr.reshape(-1, 1, 1))])
    return out


def _runtime_zero_point(args, ts):
    """(wq, data zero point expression) for a constant weight and a scalar zero point known only at run time
    (DynamicQuantizeLinear: ONNX Runtime's ``quantize_dynamic``); None otherwise."""
    if ts[0].dtype not in ("int8", "uint8") or ts[1].dtype not in ("int8", "uint8"):
        return None
    if len(ts[2].shape) != 0 and not (len(ts[2].shape) == 1 and ts[2].shape[0] == 1):
        return None
    w, wzp = const_value(args[1]), const_value(args[3])
    if w is None or wzp is None:
        return None
    wq = _shifted_weight(w, wzp, 0)
    return None if wq is None else (wq, args[2])


def _legalize_dense_runtime_zp(attrs, args, ts):
    """qnn.dense with a run-time data zero point ``z``: ``nn.dense(xu, wq) - zu * sum(wq)``, ``zu`` computed
    (``z``, or ``z + 128`` for int8 data) and multiplied with the constant column sums in the epilogue."""
    got = _runtime_zero_point(args, ts)
    if got is None:
        return None
    wq, zx = got
    if _saturating() and not _pairs_fit_int16(wq):
        return None
    zx = op_call("reshape", [op_call("cast", [zx], dtype="int32")], newshape=[])
    xu = args[0]
    if ts[0].dtype == "int8":
        xu = op_call("cast", [op_call("add", [op_call("cast", [xu], dtype="int32"), const(np.int32(128))])],
                     dtype="uint8")
        zx = op_call("add", [zx, const(np.int32(128))])
    values = dict(attrs)
    values.update(out_dtype="int32")
    out = op_call("nn.dense", [xu, const(wq)], **values)
    colsum = const(wq.astype(np.int64).sum(axis=1).astype(np.int32))
    return op_call("subtract", [out, op_call("multiply", [zx, colsum])])


def _zero_point_fits_int16(zp) -> bool:
    """Whether ``x - zp`` fits int16 for every 8-bit ``x``: a constant within [-32512, 32640], or a run-time value
    cast from an 8-bit type (DynamicQuantizeLinear's uint8 zero point); any other run-time int32 is not known to."""
    value = const_value(zp)
    if value is not None:
        v = np.asarray(value, np.int64).reshape(-1)
        return v.size == 1 and -32512 <= int(v[0]) <= 32640
    while getattr(getattr(zp, "op", None), "name", "") in ("cast", "reshape"):
        if _dtype_of(zp.args[0]) in ("uint8", "int8"):
            return True
        zp = zp.args[0]
    return False


def _dtype_of(e):
    """The dtype of ``e`` from its inferred type, or, where the legalization's operands have none yet, from its
    form (a cast's target, a variable's annotation, a constant's data); None when unknown."""
    try:
        return str(e.checked_type.dtype)
    except (KilnError, AttributeError):
        pass
    if getattr(getattr(e, "op", None), "name", "") == "cast":
        return str(e.attrs.dtype)
    ann = getattr(e, "type_annotation", None)
    if ann is not None and hasattr(ann, "dtype"):
        return str(ann.dtype)
    data = getattr(e, "data", None)
    return str(data.dtype) if data is not None and hasattr(data, "dtype") else None


def _type_of(e):
    """``e``'s inferred type; inferred here where the legalization rebuilt ``e`` (a call below an earlier rewritten
    one has no type yet); None when inference fails."""
    t = type_of(e)
    if t is None:
        try:
            t = type_of(infer_expr(e))
        except KilnError:
            return None
    return t


def _scalar_param(e) -> bool:
    """Whether ``e`` has one element (shape ``()`` or ``(1,)``)."""
    t = _type_of(e)
    shape = getattr(t, "shape", None)
    return shape is not None and (len(shape) == 0 or (len(shape) == 1 and shape[0] == 1))


def _int16_from_quantize(x, zd):
    """``cast(x, int16) - zd`` computed from the float source when ``x`` is a per-tensor 8-bit ``qnn.quantize``
    (through the importer's ``reshape`` before ``qnn.dense``), else None.

    ``clip(round(v / s) + zq, qmin, qmax) - zd == clip(round(v / s) + (zq - zd), qmin - zd, qmax - zd)``
    (integers; the float sum is exact below 2**24 and saturates alike above), so the int16 operand is one
    elementwise kernel on the float input: divide, round, add, min, max, convert. The three scalars
    ``[zq - zd, qmin - zd, qmax - zd]`` are computed once per call in a kernel of their own
    (``annotation.stop_fusion``): fused into the quantize, the scalar zero-point chain of DynamicQuantizeLinear
    (a divide, a round, a clip) was recomputed for every vector. The uint8 tensor is never formed."""
    chain = []
    while is_op(x, "reshape"):
        chain.append(x)
        x = x.args[0]
    if not is_op(x, "qnn.quantize") or str(x.attrs.out_dtype) not in ("uint8", "int8"):
        return None
    v, s, zq = x.args
    if str(getattr(_type_of(v), "dtype", "")) != "float32" or not _scalar_param(s) or not _scalar_param(zq) \
            or not _scalar_param(zd) or str(getattr(_type_of(zd), "dtype", "")) not in ("int8", "uint8", "int32"):
        return None
    # the Q, K and V denses of one input share one operand kernel (the importer gives each its own reshape and
    # zero-point cast: equal structurally)
    entries = _FROM_QUANTIZE.setdefault(id(x), [])
    out = next((r for q, z, r in entries if q is x and structural_equal(z, zd)), None)
    if out is None:
        if len(_FROM_QUANTIZE) > 256:
            _FROM_QUANTIZE.clear()
            entries = _FROM_QUANTIZE.setdefault(id(x), [])
        out = _int16_operand_expr(x, zd)
        entries.append((x, zd, out))
    for r in reversed(chain):
        out = op_call("reshape", [out], newshape=r.attrs.newshape)
    return out


#: id(qnn.quantize call) -> [(call, data zero point, int16 operand)]; entries hold their calls, so ids are not
#: reused while cached
_FROM_QUANTIZE: dict = {}


def _int16_operand_expr(x, zd):
    """The int16 operand of :func:`_int16_from_quantize` for the ``qnn.quantize`` call ``x``."""
    v, s, zq = x.args
    qmin, qmax = (0, 255) if str(x.attrs.out_dtype) == "uint8" else (-128, 127)
    # in float32, as the quantize adds its zero point: a zero point beyond 2**24 saturates alike (zd fits int16)
    zqf = op_call("reshape", [op_call("cast", [zq], dtype="float32")], newshape=[])
    zdf = op_call("reshape", [op_call("cast", [zd], dtype="float32")], newshape=[])
    params = stack([op_call("subtract", [zqf, zdf]), op_call("subtract", [const(np.float32(qmin)), zdf]),
                    op_call("subtract", [const(np.float32(qmax)), zdf])], axis=0)
    params = op_call("annotation.stop_fusion", [params])

    def param(i):
        return op_call("reshape", [op_call("strided_slice", [params], begin=[i], end=[i + 1], strides=[1])],
                       newshape=[])
    t = op_call("round", [op_call("divide", [v, op_call("reshape", [s], newshape=[])])])
    t = op_call("add", [t, param(0)])
    t = op_call("minimum", [op_call("maximum", [t, param(1)]), param(2)])
    return op_call("cast", [op_call("cast", [t], dtype="int32")], dtype="int16")


def _legalize_dense_int16(attrs, args, ts):
    """qnn.dense in the exact mode (no VNNI, no saturating option): ``nn.dense(x - zx, w - zw)`` on int16
    operands (``dense_int16.x86``, ``vpmaddwd``). Both differences lie within +-255, so the products and their
    pair sums are exact, and no zero-point correction is left: the data difference is one more elementwise step
    of the kernel that produces ``x`` (the quantize of DynamicQuantizeLinear), the weight's is folded. The data
    zero point may be a run-time scalar; the weight's may be per output channel. None when the call does not
    have that form (non-constant weight, a per-row data zero point)."""
    if ts[0].dtype not in ("int8", "uint8") or ts[1].dtype not in ("int8", "uint8"):
        return None
    zshape = ts[2].shape
    if len(zshape) > 1 or (len(zshape) == 1 and zshape[0] != 1):
        return None
    w, wzp = const_value(args[1]), const_value(args[3])
    if w is None or wzp is None or not _zero_point_fits_int16(args[2]):
        return None
    zw = np.asarray(wzp, np.int64).reshape(-1)
    wq = np.asarray(w, np.int64) - (zw.reshape(-1, 1) if zw.size > 1 else zw.reshape(()))
    if wq.min(initial=0) < -32768 or wq.max(initial=0) > 32767:
        return None
    wq = wq.astype(np.int16)
    x16 = _int16_from_quantize(args[0], args[2])
    if x16 is None:
        zx = op_call("reshape", [op_call("cast", [args[2]], dtype="int16")], newshape=[])
        x16 = op_call("subtract", [op_call("cast", [args[0]], dtype="int16"), zx])
    values = dict(attrs)
    values.update(out_dtype="int32")
    return op_call("nn.dense", [x16, const(wq)], **values)


def legalize_dense(attrs, args, ts):
    """qnn.dense -> nn.dense(uint8, int8) - zu * sum(wq), or in the exact mode without VNNI
    nn.dense(int16 x - zx, int16 w - zw) (see module doc and :func:`_legalize_dense_int16`)."""
    if not _x86_int8_target() or (attrs.out_dtype or "int32") != "int32" or len(ts[0].shape) != 2:
        return None
    if int8_mode() == "maddubs_exact":
        out = _legalize_dense_int16(attrs, args, ts)
        if out is not None:
            return out
    got = _common(args, ts, 0)
    if got is None:
        return _legalize_dense_runtime_zp(attrs, args, ts)
    wq, zx = got
    if _saturating() and not _pairs_fit_int16(wq):
        return None
    xu, zu = _uint8_data(args[0], ts[0].dtype, zx)
    values = dict(attrs)
    values.update(out_dtype="int32")
    out = op_call("nn.dense", [xu, const(wq)], **values)
    if zu:
        corr = (zu * wq.astype(np.int64).sum(axis=1)).astype(np.int32)
        out = op_call("subtract", [out, const(corr)])
    return out


def _int16_operand(x, t, zp, zt):
    """``cast(x, int16) - zp`` for 8-bit ``x`` and a scalar zero point that keeps the difference in int16 (a
    constant in range, or a run-time value cast from an 8-bit type); None otherwise."""
    if t.dtype not in ("int8", "uint8"):
        return None
    if len(zt.shape) > 1 or (len(zt.shape) == 1 and zt.shape[0] != 1) or not _zero_point_fits_int16(zp):
        return None
    from_q = _int16_from_quantize(x, zp)
    if from_q is not None:
        return from_q
    x16 = op_call("cast", [x], dtype="int16")
    value = const_value(zp)
    if value is not None:
        z = int(np.asarray(value).reshape(()))
        return x16 if z == 0 else op_call("subtract", [x16, const(np.int16(z))])
    return op_call("subtract", [x16, op_call("reshape", [op_call("cast", [zp], dtype="int16")], newshape=[])])


def legalize_batch_matmul(attrs, args, ts):
    """qnn.batch_matmul on 8-bit operands -> ``nn.batch_matmul(cast(x, int16) - zx, cast(y, int16) - zy)`` with an
    int32 output (``batch_matmul_int16.x86``, ``vpmaddwd``): both differences lie within +-255 (zero points
    within int8 / uint8 range, more generally any that keeps them in int16), so every product and pair sum is
    exact and there is no zero-point correction. Taken on every x86 target with int8 support (there is no 8-bit
    batch_matmul kernel for any mode); None (the generic canonicalization) for other dtypes, per-channel zero
    points, a rank other than 3, or symbolic dims."""
    if not _x86_int8_target() or (attrs.out_dtype or "int32") != "int32":
        return None
    if len(ts[0].shape) != 3 or len(ts[1].shape) != 3:
        return None
    if not all(isinstance(d, (int, np.integer)) for t in ts[:2] for d in t.shape):
        return None  # a symbolic dim (a VM kernel): the int16 kernel is static-shape only
    x16 = _int16_operand(args[0], ts[0], args[2], ts[2])
    y16 = _int16_operand(args[1], ts[1], args[3], ts[3])
    if x16 is None or y16 is None:
        return None
    return op_call("nn.batch_matmul", [x16, y16], out_dtype="int32", transpose_a=bool(attrs.transpose_a),
                   transpose_b=bool(attrs.transpose_b))


register_op_attr("qnn.conv2d", "FTVMQnnLegalize", legalize_conv2d)
register_op_attr("qnn.batch_matmul", "FTVMQnnLegalize", legalize_batch_matmul)
register_op_attr("qnn.dense", "FTVMQnnLegalize", legalize_dense)
