"""kiln.ir: IR node base, structural equality, types, IRModule, the op registry."""
from .node import Node, structural_equal, structural_hash, assert_structural_equal
