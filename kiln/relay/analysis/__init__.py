"""Relay analyses (TVM's ``relay.analysis``)."""
from .vars import free_vars, bound_vars, all_vars, free_type_vars, bound_type_vars, all_type_vars
from .graph import count_nodes, check_basic_block_normal_form, well_formed
from ..expr_functor import post_order_visit
