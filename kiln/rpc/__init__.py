"""kiln.rpc: run and measure compiled code on other machines (TVM's ``tvm.rpc``).

    python -m kiln.exec.rpc_tracker --port=9190
    python -m kiln.exec.rpc_server --tracker=127.0.0.1:9190 --key=cpu-box

    remote = rpc.connect_tracker("127.0.0.1", 9190).request("cpu-box")
    remote.upload("lib.so"); f = remote.load_module("lib.so")

The tracker speaks Apache TVM's tracker protocol; sessions use kiln's own protocol (docs/rpc.md).
"""
from .client import (LocalSession, RemoteDevice, RemoteFunction, RemoteModule, RemoteNDArray, RPCSession,
                     TrackerSession, connect, connect_tracker)
from .server import Server
from .tracker import Tracker
from .measure import (LocalCluster, check_remote, random_fill_args, remote_array, remote_empty, request_remote,
                      run_remote_evaluation, upload_and_load)

__all__ = [
    "LocalSession", "RPCSession", "TrackerSession", "RemoteDevice", "RemoteFunction", "RemoteModule",
    "RemoteNDArray", "Server", "Tracker", "connect", "connect_tracker",
    "request_remote", "check_remote", "upload_and_load", "random_fill_args", "run_remote_evaluation",
    "remote_empty", "remote_array", "LocalCluster",
]
