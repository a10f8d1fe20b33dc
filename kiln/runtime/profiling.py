"""TVM's ``tvm.runtime.profiling``: ``BenchmarkResult`` (what ``time_evaluator`` and
``GraphModule.benchmark`` return).

The other helper adding ``Report`` (debug_executor.profile) puts it in this file too; keep the
BenchmarkResult block below as it is.
"""
# -- BenchmarkResult -------------------------------------------------------------------------------
from .benchmark import BenchmarkResult  # noqa: F401
# -- end BenchmarkResult ---------------------------------------------------------------------------
