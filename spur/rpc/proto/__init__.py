"""Generated protobuf modules (``*_pb2``). Importing the package first keeps protobuf's pure-Python
runtime, which the upb backend never uses, out of the process until something reads from it
(:mod:`spur.rpc.pbruntime`): every ``*_pb2`` import comes after this."""

from spur.rpc.pbruntime import defer_pure_python_runtime

defer_pure_python_runtime()
