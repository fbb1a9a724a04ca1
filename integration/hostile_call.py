"""One gRPC call from the command line, for hostile tests that run it as an unprivileged user.

``python -m integration.hostile_call '<json>'`` with ``{"target": "127.0.0.1:PORT", "module":
"spur_pb2", "service": "Controller", "method": "SubmitJob", "request": {...}, "metadata": {...}}``
(``request`` in protobuf JSON form) prints one JSON line: ``{"code": "OK"|"<StatusCode>",
"message": ..., "response": {...}}``. It sends exactly the metadata given (no identity headers).
"""

from __future__ import annotations

import importlib
import json
import sys

import trio
from google.protobuf import json_format, message_factory

from spur.rpc.channel import open_channel
from spur.rpc.status import RpcError


async def call(spec: dict) -> dict:
    module = importlib.import_module(f"spur.rpc.proto.{spec['module']}")
    method = module.DESCRIPTOR.services_by_name[spec["service"]].methods_by_name[spec["method"]]
    request = json_format.ParseDict(
        spec.get("request", {}), message_factory.GetMessageClass(method.input_type)()
    )
    response_type = message_factory.GetMessageClass(method.output_type)
    path = f"/{method.containing_service.full_name}/{method.name}"
    md = dict(spec.get("metadata", {}))
    try:
        async with open_channel(spec["target"]) as channel:
            if method.server_streaming:
                chunks = []
                async for chunk in channel.stream(path, request, response_type, timeout=10, metadata=md):
                    chunks.append(json_format.MessageToDict(chunk))
                    break
                return {"code": "OK", "message": "", "response": {"chunks": chunks}}
            response = await channel.unary(path, request, response_type, timeout=10, metadata=md)
    except RpcError as exc:
        return {"code": exc.code.name, "message": exc.message, "response": None}
    return {"code": "OK", "message": "", "response": json_format.MessageToDict(response)}


if __name__ == "__main__":
    print(json.dumps(trio.run(call, json.loads(sys.argv[1]))))
