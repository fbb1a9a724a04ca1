"""A hostile local user against spurd: forged steps, launches and options never run anything as
anyone else, and the REST port does not tell which accounts exist.

A real spurctld and two real root spurd (n1, n2) in ``[auth] mode = "required"`` with the credential
broker; two real Unix users made here with useradd (removed after): the attacker owns running jobs,
the victim owns one. The attacker talks raw gRPC to the agents from a script run with runuser,
carrying its own broker token, as an attacker would. Needs root, useradd and runuser.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from integration.as_user import PUBLIC_PYTHON, ROOT, SITE_PACKAGES
from integration.harness import Cluster, wait_for
from integration.test_auth import KEY, _kill_jobs, _write_key
from integration.test_auth_users import _cli
from spur.auth.tokens import mint
from spur.rpc.proto import spur_pb2 as pb

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.geteuid() != 0
        or not shutil.which("useradd")
        or not shutil.which("runuser")
        or PUBLIC_PYTHON is None,
        reason="needs root, useradd, runuser and a Python every user may run",
    ),
]

REST_JOBS = "/slurm/v0.0.38/jobs"
LAUNCHER = "import sys; from spur.cli.main import main; sys.argv.pop(0); sys.exit(main())"

# Run as the attacker: each call of the JSON list on stdin is one raw gRPC call to an agent, with the
# attacker's own credential from the broker (what any local user gets); prints one outcome per call.
ATTACK = """
import base64, json, sys
import trio
from spur.cli.client import call_metadata
from spur.rpc.batching import AGENT_BATCH
from spur.rpc.channel import open_channel
from spur.rpc.proto import batch_pb2, spur_pb2
from spur.rpc.status import RpcError
from spur.rpc.stub import Stub

async def main():
    md = call_metadata()
    out = [{"credential": "authorization" in md, "uid": md.get("x-spur-uid")}]
    for call in json.load(sys.stdin):
        batch = call["method"] == "LaunchJobs"
        service = AGENT_BATCH if batch else spur_pb2.DESCRIPTOR.services_by_name["Agent"]
        kind = getattr(batch_pb2 if batch else spur_pb2, call["type"])
        request = kind.FromString(base64.b64decode(call["request"]))
        async with open_channel(call["target"], metadata_provider=lambda: md) as channel:
            try:
                resp = await getattr(Stub(channel, service), call["method"])(request, timeout=20)
            except RpcError as exc:
                out.append({"code": exc.code.name, "message": exc.message})
            else:
                out.append({"code": "OK", "already_running": getattr(resp, "already_running", None)})
    print(json.dumps(out))

trio.run(main)
"""


@dataclass
class Scene:
    cluster: Cluster
    shared: Path
    attacker: pwd.struct_passwd
    victim: pwd.struct_passwd
    job: int  # the attacker's job on n1: step 0 finished, step 1 running
    elsewhere: int  # the attacker's job on n2
    victims_job: int  # the victim's job on n1

    def agent(self, node: str) -> str:
        return f"127.0.0.1:{self.cluster.agent_ports[node]}"

    def attack(self, *calls: tuple[str, str, object]) -> list[dict]:
        """Run (node, method, request) calls as the attacker; the outcome of each, in order."""
        payload = [
            {
                "target": self.agent(node),
                "method": method,
                "type": type(request).__name__,
                "request": base64.b64encode(request.SerializeToString()).decode(),  # type: ignore[attr-defined]
            }
            for node, method, request in calls
        ]
        env = [
            f"PYTHONPATH={ROOT}:{SITE_PACKAGES}",
            f"SPUR_CONF={self.shared / 'spur.conf'}",
            "LANG=C.UTF-8",
        ]
        assert PUBLIC_PYTHON is not None
        proc = subprocess.run(
            ["runuser", "-u", self.attacker.pw_name, "--", "env", *env, PUBLIC_PYTHON, "-c", ATTACK],
            input=json.dumps(payload),
            cwd=self.shared,
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )
        assert proc.returncode == 0, proc.stderr
        first, *outcomes = json.loads(proc.stdout)
        # The attack carries a real credential of the attacker: a refusal is never "no token".
        assert first == {"credential": True, "uid": str(self.attacker.pw_uid)}, first
        return outcomes

    def all_job_ids(self) -> set[int]:
        resp = self.cluster.call("GetJobs", pb.GetJobsRequest(include_finished=True))
        return {j.job_id for j in resp.jobs}


def _srun_wrapper(shared: Path) -> Path:
    """``srun`` for the jobs' users: the CLI through an interpreter every user may run."""
    path = shared / "bin" / "srun"
    path.parent.mkdir(mode=0o755)
    path.write_text(
        f"#!/bin/sh\nPYTHONPATH={ROOT}:{SITE_PACKAGES} exec {PUBLIC_PYTHON} -c '{LAUNCHER}' srun \"$@\"\n"
    )
    path.chmod(0o755)
    return path


def _step(job: pb.JobInfo, step_id: int) -> pb.StepInfo | None:
    return next((s for s in job.steps if s.step_id == step_id), None)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _pids_of(uid: int) -> dict[int, list[bytes]]:
    """Process id -> command line of every process of ``uid``."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if proc.stat().st_uid == uid:
                    found[int(proc.name)] = (proc / "cmdline").read_bytes().split(b"\0")[:-1]
            except OSError:
                continue
    return found


def _processes(uid: int, argv: list[str]) -> int:
    """How many processes of ``uid`` run exactly ``argv``."""
    return sum(1 for cmd in _pids_of(uid).values() if cmd == [a.encode() for a in argv])


def _kill_processes_of(uid: int) -> None:
    """End what the test's users left running (their jobs' processes), each by its id."""
    for pid in _pids_of(uid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    suffix = secrets.token_hex(3)
    names = [f"sphag{suffix}a", f"sphag{suffix}v"]
    created: list[str] = []
    shared = Path(tempfile.mkdtemp(prefix="spur-hostile-agent-"))
    shared.chmod(0o1777)
    cluster: Cluster | None = None
    try:
        for name in names:
            subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], check=True, capture_output=True)
            created.append(name)
        attacker, victim = (pwd.getpwnam(n) for n in names)
        root = shared / "cluster"
        root.mkdir(mode=0o755)
        cluster = Cluster(
            root,
            conf_extra=(
                f'[auth]\nmode = "required"\njwt_key_file = "{_write_key(root / "jwt.key")}"\n'
                f'broker_socket = "{shared / "auth.sock"}"\n'
            ),
            agent_conf=True,
        )
        cluster.metadata = {"authorization": f"Bearer {mint(KEY, 'root', 0, now=time.time(), ttl_secs=3600)}"}
        cluster.start_controller()
        cluster.start_agent("n1", cpus=4)
        cluster.start_agent("n2", cpus=4)
        cluster.wait_nodes("n1", "n2")
        cluster.wait_rest()
        shutil.copy(root / "spur.conf", shared / "spur.conf")
        (shared / "spur.conf").chmod(0o644)
        srun = _srun_wrapper(shared)

        def sbatch(user: str, *args: str) -> int:
            out = _cli(cluster, shared, user, "sbatch", "--parsable", "-o", "/dev/null", *args)
            assert out.returncode == 0, out.stderr
            return int(out.stdout.strip())

        script = (
            "#!/bin/sh\n"
            f"{srun} sh -c 'id -u >> done-$SLURM_JOB_ID.txt'\n"
            f"{srun} sh -c 'id -u >> long-$SLURM_JOB_ID.txt; exec sleep 299' &\n"
            "sleep 300\n"
        )
        (shared / "steps.sh").write_text(script)
        (shared / "steps.sh").chmod(0o644)
        job = sbatch(attacker.pw_name, "-w", "n1", "-n1", "steps.sh")
        elsewhere = sbatch(attacker.pw_name, "-w", "n2", "-n1", "--wrap", "sleep 300")
        victims_job = sbatch(victim.pw_name, "-w", "n1", "-n1", "--wrap", "sleep 300")
        for job_id in (elsewhere, victims_job):
            cluster.wait_job(job_id, "RUNNING", timeout=60)

        def steps_ready() -> bool:
            record = cluster.job(job)
            assert record.state in ("PENDING", "RUNNING"), record
            done, long = _step(record, 0), _step(record, 1)
            return bool(
                done is not None
                and done.state == "COMPLETED"
                and long is not None
                and long.state == "RUNNING"
                and _lines(shared / f"long-{job}.txt")
            )

        wait_for(steps_ready, timeout=90, what="step 0 finished and step 1 running")
        assert _lines(shared / f"done-{job}.txt") == [str(attacker.pw_uid)]
        yield Scene(cluster, shared, attacker, victim, job, elsewhere, victims_job)
    finally:
        if cluster is not None:
            cluster.stop()
            _kill_jobs(cluster)
        for name in created:
            _kill_processes_of(pwd.getpwnam(name).pw_uid)
            subprocess.run(["userdel", "-f", name], capture_output=True)
        shutil.rmtree(shared, ignore_errors=True)


def _forged(
    scene: Scene, job_id: int, step_id: int, argv: list[str], node: str = "n1"
) -> pb.LaunchStepRequest:
    """A step request whose job record the attacker made: root's uid and gid, a restart, a bigger
    allocation, and its own command."""
    alloc = [pb.NodeAllocation(node=node, cpus=4, mem_mb=4000, tasks=3)]
    job = pb.JobInfo(
        job_id=job_id,
        user="root",
        uid=0,
        gid=0,
        state="RUNNING",
        restarts=1,
        time_limit_secs=-1,
        spec=pb.JobSpec(name="forged", work_dir=str(scene.shared)),
        allocation=alloc,
    )
    step = pb.StepInfo(step_id=step_id, state="RUNNING", spec=pb.StepSpec(argv=argv), allocation=alloc)
    return pb.LaunchStepRequest(job=job, step=step, node=node, first_task=0)


def test_a_forged_record_for_a_finished_step_runs_nothing(scene: Scene) -> None:
    """(a) The step the agent already knows (it ran and finished) with a record of the attacker's own
    (uid 0, gid 0, restarts=1, another allocation): refused; nothing runs, as root or otherwise."""
    forged_out = scene.shared / f"forged-{scene.job}.txt"
    argv = ["sh", "-c", f"id -u >> {forged_out}"]
    again, new_step = scene.attack(
        ("n1", "LaunchStep", _forged(scene, scene.job, 0, argv)),
        ("n1", "LaunchStep", _forged(scene, scene.job, 7, argv)),
    )
    assert again["code"] == "FAILED_PRECONDITION" and "COMPLETED" in again["message"], again
    assert new_step["code"] == "NOT_FOUND" and "not known to the controller" in new_step["message"], new_step
    assert not forged_out.exists()
    assert _lines(scene.shared / f"done-{scene.job}.txt") == [str(scene.attacker.pw_uid)]  # ran once
    record = scene.cluster.job(scene.job)
    assert record.state == "RUNNING" and record.restarts == 0 and record.uid == scene.attacker.pw_uid
    assert sorted(s.step_id for s in record.steps) == [0, 1]


def test_a_step_of_another_users_job_is_permission_denied(scene: Scene) -> None:
    """(b) The victim's running job on the same node, with a record claiming it is the attacker's."""
    stolen = scene.shared / f"stolen-{scene.victims_job}.txt"
    request = _forged(scene, scene.victims_job, 0, ["sh", "-c", f"id -u > {stolen}"])
    request.job.uid, request.job.user = scene.attacker.pw_uid, scene.attacker.pw_name
    (outcome,) = scene.attack(("n1", "LaunchStep", request))
    assert outcome["code"] == "PERMISSION_DENIED", outcome
    assert f"belongs to uid {scene.victim.pw_uid}" in outcome["message"]
    assert not stolen.exists()
    assert scene.cluster.job(scene.victims_job).state == "RUNNING"


def test_a_step_of_a_job_not_running_on_this_node_is_refused(scene: Scene) -> None:
    """(c) The attacker's own job runs on n2; n1 is asked to run a step of it (and of a job that does
    not exist)."""
    out = scene.shared / f"elsewhere-{scene.elsewhere}.txt"
    request = _forged(scene, scene.elsewhere, 0, ["sh", "-c", f"id -u > {out}"])
    missing = _forged(scene, 999_999, 0, ["sh", "-c", f"id -u > {out}"])
    here, nowhere = scene.attack(("n1", "LaunchStep", request), ("n1", "LaunchStep", missing))
    assert here["code"] == "FAILED_PRECONDITION" and "not allocated" in here["message"], here
    assert nowhere["code"] == "NOT_FOUND", nowhere
    assert not out.exists()


def test_launch_job_with_a_user_token_is_refused(scene: Scene) -> None:
    """(d) LaunchJob (and the batched LaunchJobs) belong to the controller: the attacker's own broker
    token cannot launch a batch script as root, nor signal the victim's job."""
    from spur.rpc.proto import batch_pb2

    pwned = scene.shared / "pwned.txt"
    job = _forged(scene, scene.job, 0, ["true"]).job
    job.spec.script = f"#!/bin/sh\nid -u > {pwned}\n"
    launch = pb.LaunchJobRequest(job=job, node="n1", batch=True)
    batch = batch_pb2.LaunchJobsRequest(launches=[launch.SerializeToString()])
    cancel = pb.SignalJobRequest(job_id=scene.victims_job, signal=0)
    outcomes = scene.attack(
        ("n1", "LaunchJob", launch), ("n1", "LaunchJobs", batch), ("n1", "SignalJob", cancel)
    )
    assert [o["code"] for o in outcomes] == ["PERMISSION_DENIED"] * 3, outcomes
    assert not pwned.exists()
    assert scene.cluster.job(scene.victims_job).state == "RUNNING"


def test_redelivery_of_a_running_step_is_idempotent(scene: Scene) -> None:
    """(e) Step 1 runs: delivered again (as srun would, and with a forged record) it is
    ``already_running`` and no second copy starts."""
    sleeping = ["sleep", "299"]
    wait_for(lambda: _processes(scene.attacker.pw_uid, sleeping) == 1, timeout=30, what="step 1's task")
    record = scene.cluster.job(scene.job)
    step = _step(record, 1)
    assert step is not None
    genuine = pb.LaunchStepRequest(job=record, step=step, node="n1", first_task=0)
    never = scene.shared / f"never-{scene.job}.txt"
    forged = _forged(scene, scene.job, 1, ["sh", "-c", f"id -u > {never}"])
    outcomes = scene.attack(("n1", "LaunchStep", genuine), ("n1", "LaunchStep", forged))
    assert outcomes == [{"code": "OK", "already_running": True}] * 2, outcomes
    assert _lines(scene.shared / f"long-{scene.job}.txt") == [str(scene.attacker.pw_uid)]
    assert _processes(scene.attacker.pw_uid, sleeping) == 1
    assert not never.exists()


@pytest.mark.parametrize(
    ("command", "option"), [("sbatch", "uid"), ("sbatch", "gid"), ("salloc", "uid"), ("srun", "gid")]
)
def test_uid_and_gid_options_are_root_only(scene: Scene, command: str, option: str) -> None:
    """(f) Slurm's refusal, a non-zero exit, and nothing submitted."""
    before = scene.all_job_ids()
    args = ["--wrap", "id -u"] if command == "sbatch" else ["id", "-u"]
    out = _cli(scene.cluster, scene.shared, scene.attacker.pw_name, command, f"--{option}=0", *args)
    assert out.returncode != 0
    assert out.stderr.strip() == f"{command}: error: --{option} only permitted by root user"
    assert scene.all_job_ids() == before


def test_rest_does_not_tell_which_users_exist(scene: Scene) -> None:
    """(g) Without a token, an existing and a made-up account get the same 401."""
    base = f"http://127.0.0.1:{scene.cluster.rest_port}"
    answers = [
        httpx.get(f"{base}{REST_JOBS}", headers={"X-SLURM-USER-NAME": name}, timeout=10)
        for name in (scene.victim.pw_name, f"{scene.victim.pw_name}x")
    ]
    assert [r.status_code for r in answers] == [401, 401]
    errors = [r.json()["errors"] for r in answers]
    assert errors[0] == errors[1] and errors[0][0]["error_number"] == 1007, errors
    assert scene.victim.pw_name not in answers[0].text


def test_the_cluster_keeps_serving(scene: Scene) -> None:
    """After every attack: both agents alive, the jobs still running as their owners."""
    assert all(proc.alive() for proc in scene.cluster.agents.values())
    jobs = scene.cluster.jobs(scene.job, scene.elsewhere, scene.victims_job)
    assert {j.state for j in jobs.values()} == {"RUNNING"}
    assert jobs[scene.victims_job].uid == scene.victim.pw_uid
    assert {n.state for n in scene.cluster.nodes()} <= {"mixed", "allocated", "idle"}
