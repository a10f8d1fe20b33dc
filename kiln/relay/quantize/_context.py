"""State shared by the annotation rules of one ``quantize`` call (TVM's ``QuantizeContext``): the
simulated_quantize nodes already made (so a value is quantized once per kind), the conv2d counter
behind ``skip_conv_layers``, and the flag that stops quantizing after ``global_avg_pool2d``."""
from __future__ import annotations

from .qconfig import current_qconfig


class QuantizeContext:
    Current = None

    def __init__(self):
        self.qnode_map: dict = {}
        self._conv2d_counter = 0
        self._stop_quantize = False

    def check_to_skip(self, ref_call) -> bool:
        """Whether ``ref_call`` stays in float: after a stop, or a conv2d listed in ``skip_conv_layers``."""
        if self._stop_quantize:
            return True
        if ref_call.op.name == "nn.conv2d":
            index = self._conv2d_counter
            self._conv2d_counter += 1
            skipped = current_qconfig().skip_conv_layers
            if skipped is not None and index in skipped:
                return True
        return False

    def stop_quantize(self) -> None:
        self._stop_quantize = True

    def reset(self) -> None:
        self.qnode_map = {}
        self._conv2d_counter = 0
        self._stop_quantize = False

    def __enter__(self):
        self.reset()
        return self

    def __exit__(self, *exc):
        self.qnode_map = {}


def quantize_context() -> QuantizeContext:
    """The process-wide annotation context (TVM keeps one singleton too)."""
    if QuantizeContext.Current is None:
        QuantizeContext.Current = QuantizeContext()
    return QuantizeContext.Current
