"""``kiln rpc tracker|server|query ...``: thin wrappers over ``python -m kiln.exec.rpc_tracker`` /
``rpc_server`` / ``query_rpc_tracker``, with the same flags."""
from __future__ import annotations

import argparse
import sys

ROLES = {"tracker": "kiln.exec.rpc_tracker", "server": "kiln.exec.rpc_server", "query": "kiln.exec.query_rpc_tracker"}


def add_parser(sub) -> None:
    p = sub.add_parser("rpc", help="run an RPC tracker or server, or query a tracker",
                       description="kiln rpc tracker [--host H --port P ...] | kiln rpc server [--tracker H:P "
                       "--key K ...] | kiln rpc query [--host H --port P]. The flags are those of python -m "
                       "kiln.exec.rpc_tracker / rpc_server / query_rpc_tracker; `kiln rpc <role> --help` lists them.")
    p.add_argument("role", choices=sorted(ROLES), help="what to run")
    p.add_argument("role_args", nargs=argparse.REMAINDER, help="flags of the role")
    p.set_defaults(handler=run)


def run(args) -> int:
    import importlib
    module = importlib.import_module(ROLES[args.role])
    saved = sys.argv[0]
    sys.argv[0] = f"kiln rpc {args.role}"  # so the role's --help and usage errors name this command
    try:
        return module.main(list(args.role_args)) or 0
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 2
    finally:
        sys.argv[0] = saved
