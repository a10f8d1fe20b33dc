"""Buffer: a typed, shaped view of memory behind a data pointer."""
from __future__ import annotations

from ..ir.node import Node
from ..runtime.dtype import parse_dtype
from .stmt import BufferStore
from ..error import LoweringError
from .op import convert
from .expr import BufferLoad, Var


class Buffer(Node):
    """A multi-dimensional view of memory: data pointer, dtype, shape, strides and element offset.

    ``strides`` is empty for a compact row-major buffer. Buffers behave like variables in
    structural comparison: one defined in a PrimFunc's buffer_map or an allocation matches the
    buffer defined at the same place on the other side.
    """

    _is_var = True
    _var_fields = ("dtype", "shape", "strides", "elem_offset")
    _fields = ("data", "dtype", "shape", "strides", "elem_offset")

    def __init__(self, data, dtype, shape, strides=None, elem_offset=None, name="buffer",
                 data_alignment=64, offset_factor=1, buffer_type="", scope="global",
                 axis_separators=None):
        self.data = data
        self.dtype = str(parse_dtype(dtype))
        self.shape = [convert(s) for s in shape]
        self.strides = [convert(s) for s in (strides or [])]
        self.elem_offset = convert(elem_offset if elem_offset is not None else 0)
        self.name = name
        self.data_alignment = data_alignment
        self.offset_factor = offset_factor
        self.buffer_type = buffer_type
        self.scope_ = scope
        self.axis_separators = list(axis_separators or [])

    def scope(self) -> str:
        return self.scope_

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __getitem__(self, indices):
        if not isinstance(indices, (tuple, list)):
            indices = (indices,)
        return BufferLoad(self, [convert(i) for i in indices])

    def vload(self, begin, dtype=None):
        return BufferLoad(self, [convert(i) for i in begin])

    def vstore(self, begin, value):
        return BufferStore(self, convert(value), [convert(i) for i in begin])

    def offset_of(self, indices):
        """The flat element offset of ``indices`` (row-major or by strides), plus elem_offset."""
        indices = [convert(i) for i in indices]
        if len(indices) != len(self.shape):
            raise LoweringError(
                f"buffer {self.name} has {len(self.shape)} dimensions but was indexed with {len(indices)}"
            )
        offset = None
        if self.strides:
            for idx, stride in zip(indices, self.strides):
                term = idx * stride
                offset = term if offset is None else offset + term
        else:
            for idx, extent in zip(indices, self.shape):
                offset = idx if offset is None else offset * extent + idx
        if offset is None:
            offset = convert(0)
        if not (hasattr(self.elem_offset, "value") and self.elem_offset.value == 0):
            offset = offset + self.elem_offset
        return offset

    def access_ptr(self, access_mask, ptr_type: str = "handle", content_lanes: int = 1, offset=0, extent=None):
        """A pointer to this buffer's data at ``elem_offset + offset`` (TVM's ``tir.tvm_access_ptr``), to pass
        the buffer to an extern C function. ``access_mask``: "r", "w", "rw" or the bit mask (1 read, 2 write)."""
        from .expr import Call
        if isinstance(access_mask, str):
            bad = set(access_mask) - {"r", "w"}
            if bad:
                raise LoweringError(f"access_ptr of buffer {self.name}: access mask {access_mask!r} may hold only "
                                    "'r' and 'w'")
            access_mask = (1 if "r" in access_mask else 0) | (2 if "w" in access_mask else 0)
        dtype = self.dtype
        if content_lanes > 1:
            dtype = str(parse_dtype(self.dtype).with_lanes(content_lanes))
        if extent is None:
            extent = convert(1)
            for d in self.shape:
                extent = extent * d
            extent = extent - convert(offset)
        begin = convert(offset)
        if not (hasattr(self.elem_offset, "value") and self.elem_offset.value == 0):
            begin = self.elem_offset + begin
        return Call(ptr_type, "tir.tvm_access_ptr", [Call(dtype, "tir.type_annotation", []), self.data, begin,
                                                     convert(extent), convert(int(access_mask))])

    def astext(self) -> str:
        shape = ", ".join(str(s) for s in self.shape)
        return f"Buffer({self.name}, {self.dtype}, [{shape}])"


def decl_buffer(shape, dtype="float32", name="buffer", data=None, strides=None, elem_offset=None,
                scope="", data_alignment=-1, offset_factor=0, buffer_type="", axis_separators=None,
                span=None) -> Buffer:
    """Declare a new buffer (``tvm.tir.decl_buffer``)."""
    if not isinstance(shape, (list, tuple)):
        shape = [shape]
    if data is None:
        data = Var(name, "handle")
    return Buffer(data, dtype, shape, strides, elem_offset, name,
                  64 if data_alignment == -1 else data_alignment, max(offset_factor, 1), buffer_type,
                  scope or "global", axis_separators)
