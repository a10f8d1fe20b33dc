"""Measurement of configs (TVM's ``autotvm.measure``)."""
from .measure import (MeasureInput, MeasureResult, MeasureErrorNo, Builder, Runner, measure_option,
                      create_measure_batch)
from .measure_methods import LocalBuilder, LocalRunner, RPCRunner, BuildResult, default_build_func
from .remote import (request_remote, check_remote, run_through_rpc, default_module_loader, DefaultModuleLoader,
                     RemoteMeasureExecutor)
from .executor import WorkerPool, StatusKind, JobResult
