"""``I`` of TVMScript (``from kiln.script import ir as I``): ``@I.ir_module`` needs the TVMScript parser, which
kiln does not have yet, so it raises NotImplementedError naming the alternative."""
from __future__ import annotations

from .tir import TVMSCRIPT_UNSUPPORTED


def ir_module(*args, **kwargs):
    """TVM's ``@I.ir_module`` class decorator: not supported yet (see kiln.script)."""
    raise NotImplementedError(TVMSCRIPT_UNSUPPORTED.format(what="I.ir_module"))


def module_attrs(*args, **kwargs):
    """TVM's ``I.module_attrs``: not supported yet (see kiln.script)."""
    raise NotImplementedError(TVMSCRIPT_UNSUPPORTED.format(what="I.module_attrs"))


def module_global_infos(*args, **kwargs):
    """TVM's ``I.module_global_infos``: not supported yet (see kiln.script)."""
    raise NotImplementedError(TVMSCRIPT_UNSUPPORTED.format(what="I.module_global_infos"))
