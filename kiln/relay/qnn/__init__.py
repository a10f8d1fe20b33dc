"""The QNN dialect (TVM's ``relay.qnn``): quantized operators and the passes that lower them to integer
Relay ops."""
from . import op, transform, x86_legalize  # noqa: F401
