"""TVM's ``tvm.contrib.debugger``: the debug graph executor (per-node outputs and times)."""
