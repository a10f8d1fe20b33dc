"""Print a tracker's servers and queues: ``python -m kiln.exec.query_rpc_tracker --port=9190``."""
from __future__ import annotations

import argparse
import sys
from kiln.error import RPCError
from kiln.rpc.client import connect_tracker


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description="show the status of a kiln/TVM RPC tracker")
    parser.add_argument("--host", default="127.0.0.1", help="tracker host")
    parser.add_argument("--port", type=int, default=9190, help="tracker port")
    args = parser.parse_args(argv)


    try:
        tracker = connect_tracker(args.host, args.port, timeout=5)
        print(f"Tracker address {args.host}:{args.port}\n")
        print(tracker.text_summary())
        tracker.close()
    except (RPCError, OSError) as err:
        print(f"cannot query tracker at {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
