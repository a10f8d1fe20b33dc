"""Tuning tasks, templates, config spaces and dispatch contexts (TVM's ``autotvm.task``)."""
from .space import (ConfigSpace, ConfigEntity, FallbackConfigEntity, InstantiationError, ConfigSpaceError,
                    SplitSpace, SplitEntity, ReorderSpace, ReorderEntity, AnnotateSpace, AnnotateEntity,
                    OtherOptionSpace, OtherOptionEntity, VirtualAxis, Axis, get_factors, get_pow2s)
from .dispatcher import (DispatchContext, ApplyConfig, ApplyFixedConfig, ApplyHistoryBest, FallbackContext,
                         apply_fixed_config, clear_fallback_cache, fallback_summary)
from .task import (Task, TASK_TABLE, TaskTemplate, FlopCalculationError, TemplateError, create, template,
                   get_config, serialize_args, deserialize_args, args_to_workload, compute_flop)
from .topi_integration import register_topi_compute, register_topi_schedule, TaskExtractEnv, get_workload
from .relay_integration import extract_from_program, extract_from_multiple_program
from . import space, dispatcher, task, topi_integration, relay_integration

