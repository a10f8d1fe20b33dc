"""Op tags that schedules dispatch on (TVM's ``topi.tag``)."""
ELEMWISE = "elemwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"


def is_broadcast(tag: str) -> bool:
    """Elementwise or broadcast: cheap to inline into a consumer."""
    return tag in (ELEMWISE, BROADCAST) or tag.startswith(ELEMWISE) or tag.startswith(BROADCAST)


def is_injective(tag: str) -> bool:
    """Each output element reads a bounded set of input elements without reducing."""
    return is_broadcast(tag) or tag.startswith(INJECTIVE)
