"""kiln.transform: the pass infrastructure (TVM's ``tvm.transform`` / ``tvm.ir.transform``)."""
from .pass_context import PassContext
from .pass_base import (Pass, PassInfo, ModulePass, FunctionLevelPass, Sequential, module_pass, PrintIR,
                        ApplyPassToFunction, register_pass, get_pass, make_pass_decorator)
from .config import register_pass_config, list_configs, PassConfigError
from ..ir.instrument import (PassInstrument, pass_instrument, PassTimingInstrument, PassPrintingInstrument,
                             PrintBeforeAll, PrintAfterAll)
