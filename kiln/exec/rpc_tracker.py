"""Start an RPC tracker: ``python -m kiln.exec.rpc_tracker --host=127.0.0.1 --port=9190``."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from kiln.rpc.launcher import announce_ready
from kiln.rpc.tracker import TrackerServer


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description="kiln RPC tracker (TVM tracker protocol)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default loopback; 0.0.0.0 for the network)")
    parser.add_argument("--port", type=int, default=9190, help="first port to try")
    parser.add_argument("--port-end", type=int, default=9199, help="end of the port range to try")
    parser.add_argument("--silent", action="store_true", help="log warnings only")
    parser.add_argument("--stale-timeout", type=float, default=30.0,
                        help="drop a free server whose connection is silent this many seconds")
    parser.add_argument("--stop-key", default=None, help="key a STOP message must carry")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.WARNING if args.silent else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)

    tracker = TrackerServer(args.host, args.port, args.port_end, stale_timeout=args.stale_timeout,
                            stop_key=args.stop_key)
    signal.signal(signal.SIGTERM, lambda *_: tracker.stop())
    announce_ready(tracker.port)
    try:
        tracker.run()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
