"""``relay.save_param_dict`` / ``relay.load_param_dict`` in TVM's binary format. The codec lives in the
runtime (:mod:`kiln.runtime.params`), so deployed models load parameters without the compiler."""
from ..runtime.params import load_param_dict, save_param_dict  # noqa: F401
