"""spur.rpc.pbruntime: protobuf's pure-Python runtime stays unloaded until something reads from it."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
from spur.rpc.pbruntime import PYTHON_MESSAGE, defer_pure_python_runtime
assert defer_pure_python_runtime() is True
assert defer_pure_python_runtime() is False  # already in place: a no-op
from spur.rpc.proto import spur_pb2 as pb
msg = pb.GetJobsResponse.FromString(pb.GetJobsResponse(jobs=[pb.JobInfo(job_id=7, state="RUNNING")]).SerializeToString())
assert (msg.jobs[0].job_id, msg.jobs[0].state, msg.jobs[0].HasField("array_task_id")) == (7, "RUNNING", False)
assert "google.protobuf.text_format" not in sys.modules
assert type(sys.modules[PYTHON_MESSAGE]).__name__ == "_Deferred"
# whoever reads from it gets the real module, which then takes the stand-in's place
from google.protobuf.internal import python_message
assert callable(python_message._AttachFieldHelpers)
assert type(sys.modules[PYTHON_MESSAGE]).__name__ == "module" and "google.protobuf.text_format" in sys.modules
from google.protobuf import text_format
assert text_format.MessageToString(pb.JobInfo(job_id=3)).strip() == "job_id: 3"
print("ok")
"""


def test_stand_in_until_used_then_the_real_module() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_no_stand_in_once_the_real_module_is_loaded() -> None:
    code = (
        "import google.protobuf.internal.python_message, sys\n"
        "from spur.rpc.pbruntime import PYTHON_MESSAGE, defer_pure_python_runtime\n"
        "assert defer_pure_python_runtime() is False\n"
        "assert type(sys.modules[PYTHON_MESSAGE]).__name__ == 'module'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
