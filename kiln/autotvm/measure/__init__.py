"""Measurement of configs (TVM's ``autotvm.measure``)."""
from .measure import (MeasureInput, MeasureResult, MeasureErrorNo, Builder, Runner, measure_option,
                      create_measure_batch)
from .measure_methods import (LocalBuilder, LocalRunner, RPCRunner, BuildResult, default_build_func,
                              request_remote, run_local)
from .executor import WorkerPool, StatusKind, JobResult
