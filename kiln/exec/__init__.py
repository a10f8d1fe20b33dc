"""Command-line entry points, run as ``python -m kiln.exec.<name>`` (TVM's ``tvm.exec``)."""
