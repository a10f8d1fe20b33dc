"""kiln.driver: ``lower`` and ``build`` for single operators."""
from .build_module import lower, build, schedule_to_module, TIR_PIPELINE

__all__ = ["lower", "build", "schedule_to_module", "TIR_PIPELINE"]
