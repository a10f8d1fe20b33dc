"""kiln.contrib: TVM's contrib helpers (cc, utils, tar; graph_executor comes with the executor)."""
