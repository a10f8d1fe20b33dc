"""Start an RPC server: ``python -m kiln.exec.rpc_server --tracker=127.0.0.1:9190 --key=cpu-box``."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from kiln.error import RPCError
from kiln.rpc.launcher import announce_ready
from kiln.rpc.protocol import DEFAULT_MAX_BLOB_BYTES
from kiln.rpc.server import ServerLoop


def _tracker_addr(text: str | None):
    if not text:
        return None
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--tracker must be host:port, got {text!r}")
    return (host, int(port))


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description="kiln RPC server")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default loopback; 0.0.0.0 for the network, with --token)")
    parser.add_argument("--port", type=int, default=9090, help="first port to try")
    parser.add_argument("--port-end", type=int, default=9199, help="end of the port range to try")
    parser.add_argument("--tracker", type=_tracker_addr, default=None, help="tracker address host:port")
    parser.add_argument("--key", default="", help="the key to register under at the tracker (device type)")
    parser.add_argument("--load-library", default=None, help="colon-separated libraries to load in each session")
    parser.add_argument("--custom-addr", default=None, help="address to report to the tracker")
    parser.add_argument("--no-fork", action="store_true", help="spawn session workers instead of forking")
    parser.add_argument("--silent", action="store_true", help="log warnings only")
    parser.add_argument("--server-init", default=None,
                        help="module:function run in each session worker (registers extra functions)")
    parser.add_argument("--max-message-bytes", type=int, default=None,
                        help="largest blob (upload, array) a message may carry")
    parser.add_argument("--ping-period", type=float, default=2.0,
                        help="seconds between tracker pings while free")
    parser.add_argument("--unmatch-timeout", type=float, default=4.0,
                        help="register a new match key when a client took ours but did not come for this long")
    parser.add_argument("--token", default=None,
                        help="shared secret clients must prove (default: $KILN_RPC_TOKEN; prefer the variable)")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.WARNING if args.silent else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)

    try:
        loop = ServerLoop(args.host, args.port, args.port_end, tracker_addr=args.tracker, key=args.key,
                          load_library=args.load_library, custom_addr=args.custom_addr, silent=args.silent,
                          no_fork=args.no_fork, token=args.token or os.environ.get("KILN_RPC_TOKEN"),
                          max_blob=args.max_message_bytes or DEFAULT_MAX_BLOB_BYTES, server_init=args.server_init,
                          ping_period=args.ping_period, unmatch_timeout=args.unmatch_timeout)
    except RPCError as err:
        print(f"rpc_server: {err}", file=sys.stderr)
        return 2

    def on_term(*_):
        loop.stop_worker()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    announce_ready(loop.port)
    try:
        loop.run()
    except KeyboardInterrupt:
        loop.stop_worker()
    except RPCError as err:
        print(f"rpc_server: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
