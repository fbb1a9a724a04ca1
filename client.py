import sys, time, trio
sys.path.insert(0, "/work/main")
from spur.auth.identity import identity_metadata
from spur.rpc.channel import open_channel
from spur.rpc.proto import spur_pb2 as pb
from spur.rpc.stub import controller_stub
SPEC = pb.JobSpec(name="bench", script="#!/bin/sh\ntrue\n", work_dir="/tmp")
async def main(addr, n, method):
    md = identity_metadata()
    async with open_channel(addr, metadata_provider=lambda: md) as ch:
        stub = controller_stub(ch)
        t = time.perf_counter()
        for _ in range(n):
            if method == "submit":
                await stub.SubmitJob(pb.SubmitJobRequest(spec=SPEC), timeout=60)
            else:
                await stub.GetControllers(pb.Empty(), timeout=60)
        dt = time.perf_counter() - t
        print(method, n / dt, "per s", dt / n * 1000, "ms")
trio.run(main, sys.argv[1], int(sys.argv[2]), sys.argv[3])
