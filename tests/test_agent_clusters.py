"""spurd keeps job state per cluster id: a new cluster's job 1 runs even if an old cluster's job 1 ran here."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from spur.agent.clusters import ClusterDirs
from spur.agent.join_token import CredentialKeeper, JoinTokenError, resolve_join_token
from spur.core.admission import CREDENTIAL_METADATA_KEY
from tests.test_agent_executor import TIMEOUT, Harness, make_request, running

TOKEN = "0a1b2c.0123456789abcdef0123456789abcdef"


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    work = tmp_path / "work"
    work.mkdir()
    return Harness(tmp_path / "state", work)  # every job here ends by itself


def request(job_id: int, work: Path, cluster: str, script: str = "#!/bin/sh\necho run >> ran.txt\n"):
    req = make_request(job_id, work, script=script)
    req.cluster_id = cluster
    return req


async def test_a_new_cluster_runs_its_job_1_after_an_old_cluster_s_job_1(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            assert ex.use_cluster("aaaa") is True
            assert await ex.launch(request(1, harness.work, "aaaa")) is False
            report = await ex.wait_finished(1)
            assert report.cluster_id == "aaaa"
            ex.mark_reported(1, cluster="aaaa")
            # the same cluster launching job 1 again is a duplicate: nothing runs
            assert await ex.launch(request(1, harness.work, "aaaa")) is True
    assert (harness.state_dir / "clusters" / "aaaa" / "done" / "1").exists()
    assert (harness.work / "ran.txt").read_text() == "run\n"
    # a restarted agent remembers which cluster it served
    assert ClusterDirs(harness.state_dir).current() == "aaaa"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            assert ex.cluster_id == "aaaa"
            assert ex.use_cluster("bbbb") is True
            assert await ex.launch(request(1, harness.work, "bbbb")) is False
            report = await ex.wait_finished(1)
    assert report.cluster_id == "bbbb" and report.exit_code == 0
    assert (harness.work / "ran.txt").read_text() == "run\nrun\n"


async def test_state_from_before_cluster_ids_is_the_unknown_cluster(harness: Harness) -> None:
    done = harness.state_dir / "done"
    done.mkdir(parents=True)
    (done / "1").write_text("0")  # job 1 ended here under an agent that knew no cluster ids
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            assert ex.cluster_id == ""
            assert await ex.launch(request(1, harness.work, "")) is True
            assert await ex.launch(request(1, harness.work, "cccc")) is True  # LaunchJob switches first
            assert ex.use_cluster("cccc") is True
            assert await ex.launch(request(1, harness.work, "cccc")) is False
            report = await ex.wait_finished(1)
    assert report.exit_code == 0 and report.cluster_id == "cccc"


async def test_an_old_cluster_s_running_job_is_still_supervised_and_reported(harness: Harness) -> None:
    reports = []
    harness.on_final = reports.append  # type: ignore[method-assign]
    slow = "#!/bin/sh\nwhile [ ! -f go ]; do sleep 0.05; done\necho old > old.txt\n"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            ex.use_cluster("aaaa")
            await ex.launch(request(1, harness.work, "aaaa", slow))
            ex.use_cluster("bbbb")
            assert ex.running_job_ids() == []  # heartbeats speak for the current cluster only
            assert await ex.launch(request(1, harness.work, "bbbb")) is False
            await ex.wait_finished(1)
            (harness.work / "go").write_text("")
            while len(reports) < 2:
                await trio.sleep(0.02)
    assert sorted((r.cluster_id, r.job_id, r.exit_code) for r in reports) == [("aaaa", 1, 0), ("bbbb", 1, 0)]
    assert (harness.work / "old.txt").read_text() == "old\n"


async def test_jobs_of_the_unknown_cluster_stay_in_heartbeats_after_a_switch(harness: Harness) -> None:
    # An upgraded agent's running jobs predate cluster ids: they are most likely the cluster's own,
    # so its heartbeats keep listing them (the controller must not think their launch was lost).
    slow = "#!/bin/sh\nwhile [ ! -f go ]; do sleep 0.05; done\n"
    with trio.fail_after(TIMEOUT):
        async with running(harness.make()) as ex:
            await ex.launch(request(4, harness.work, "", slow))
            ex.use_cluster("dddd")
            assert ex.running_job_ids() == [4]
            (harness.work / "go").write_text("")
            while ex.running_job_ids():
                await trio.sleep(0.02)
            assert ex.unreported_job_ids() == [4]


def test_cluster_ids_that_are_not_names_are_refused(tmp_path: Path) -> None:
    dirs = ClusterDirs(tmp_path)
    for bad in ("../x", "a/b", "." * 3, "x" * 65):
        with pytest.raises(ValueError):
            dirs.set_current(bad)
    (tmp_path / "cluster_id").write_text("../../etc\n")
    assert dirs.current() == ""


def test_node_credential_is_kept_0600_per_cluster(tmp_path: Path) -> None:
    md: dict[str, str] = {}
    keeper = CredentialKeeper(tmp_path, md)
    keeper.registered("aaaa", "f" * 64)
    path = tmp_path / "clusters" / "aaaa" / "node_credential"
    assert path.stat().st_mode & 0o777 == 0o600
    assert md[CREDENTIAL_METADATA_KEY] == "f" * 64
    keeper.use("bbbb")  # another cluster: no credential to send
    assert CREDENTIAL_METADATA_KEY not in md
    keeper.registered("aaaa", "")  # re-registered with the credential: keep using it
    assert md[CREDENTIAL_METADATA_KEY] == "f" * 64


def test_join_token_sources_and_file_permissions(tmp_path: Path) -> None:
    assert resolve_join_token(flag=None, flag_file=None, conf_token=None, conf_file=None) == ""
    assert resolve_join_token(flag=TOKEN.upper(), flag_file=None, conf_token="x", conf_file=None) == TOKEN
    secret_file = tmp_path / "join-token"
    secret_file.write_text(TOKEN + "\n")
    secret_file.chmod(0o644)
    with pytest.raises(JoinTokenError, match="accessible by group or other .*chmod 600") as exc:
        resolve_join_token(flag=None, flag_file=secret_file, conf_token=None, conf_file=None)
    assert TOKEN not in str(exc.value)
    secret_file.chmod(0o600)
    assert resolve_join_token(flag=None, flag_file=None, conf_token=None, conf_file=secret_file) == TOKEN
    with pytest.raises(JoinTokenError, match="agent.join_token: malformed join token") as exc:
        resolve_join_token(flag=None, flag_file=None, conf_token="0a1b2c.secretsecret", conf_file=None)
    assert "secretsecret" not in str(exc.value)
    with pytest.raises(JoinTokenError, match="cannot read"):
        resolve_join_token(flag=None, flag_file=tmp_path / "missing", conf_token=None, conf_file=None)


async def test_refused_registration_is_retried_with_backoff_and_a_refused_heartbeat_reregisters(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    from spur.agent.registration import Registrar
    from spur.rpc.proto import spur_pb2 as pb
    from spur.rpc.status import RpcError, StatusCode

    calls: list[tuple[float, str]] = []
    state = {"refusals": 3, "heartbeat_refused": False}

    async def call(name: str, request: object) -> object:
        calls.append((trio.current_time(), name))
        if name == "RegisterNode":
            if state["refusals"]:
                state["refusals"] -= 1
                raise RpcError(StatusCode.PERMISSION_DENIED, "node n1 refused: it presented no join token")
            return pb.RegisterNodeResponse(heartbeat_interval_secs=10, cluster_id="aaaa")
        if state["heartbeat_refused"]:
            state["heartbeat_refused"] = False
            raise RpcError(StatusCode.PERMISSION_DENIED, "heartbeat from node n1 refused")
        return pb.HeartbeatResponse(known=True)

    async def build() -> pb.RegisterNodeRequest:
        return pb.RegisterNodeRequest(name="n1", join_token=TOKEN)

    registrar = Registrar(
        call, build_request=build, running_job_ids=list, node_name="n1", initial_backoff=1, max_backoff=4
    )
    with caplog.at_level("WARNING", logger="spur.agent.registration"):
        async with trio.open_nursery() as nursery:
            await nursery.start(registrar.run)
            await registrar.registered.wait()
            assert [round(t) for t, n in calls if n == "RegisterNode"] == [0, 1, 3, 7]
            state["heartbeat_refused"] = True
            await trio.sleep(25)
            nursery.cancel_scope.cancel()
    assert registrar.registrations == 2
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 4  # one line per refused attempt, one for the refused heartbeat
    assert all(TOKEN not in line for line in refused)
