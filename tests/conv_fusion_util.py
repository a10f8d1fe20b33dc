"""Shared by the tests of FuseOps' producer-into-conv rules (tests/topi/x86/test_x86_depthwise_pointwise.py,
test_x86_stem_fusion.py): build with one rule switched, find the fused kernels, their C source, run a graph."""
from __future__ import annotations

import kiln as tvm
from kiln import relay
from kiln.runtime.graph_executor import GraphModule


def build(mod, rule: str, target="llvm", fuse=True):
    """``relay.build`` at opt level 3 with the PassContext switch ``rule`` (e.g. ``relay.FuseOps.input_transform``)."""
    with tvm.transform.PassContext(opt_level=3, config={rule: fuse}):
        return relay.build(mod, target=target)


def conv_kernels_with(lib, producer: str) -> list:
    """The lowered kernels anchored on an NCHWc conv whose function name also holds ``producer``."""
    return [c for c in lib.lowered if producer in c.func_name and c.anchor_op == "nn.contrib_conv2d_NCHWc"]


def kernel_source(lib, name: str) -> str:
    """The generated C of kernel ``name``: its parallel closure (if any) and its function."""
    src = lib.get_lib().get_source()
    start = src.index(f"/* kernel {name} */")
    end = src.find("/* kernel ", start + 1)
    return src[src.find(name):end if end > 0 else len(src)]


def run(lib, a):
    """Output 0 of the built graph for input ``x`` = ``a``."""
    m = GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.run()
    return m.get_output(0).numpy()
