"""The MPI types srun offers: --mpi=list, --mpi validation, MpiDefault and SLURM_MPI_TYPE."""

from __future__ import annotations

import pytest

from spur.cli import srun
from spur.config.errors import ConfigError
from spur.config.loader import parse_config_text
from spur.config.slurm_view import slurm_rows
from spur.rpc.proto import spur_pb2 as pb


def test_mpi_list_names_every_type_and_exits_zero(capsys) -> None:
    assert srun.main(["-n", "2", "--mpi", "list"]) == 0
    assert capsys.readouterr().out == "MPI plugin types are...\n\tnone\n\tpmi2\n"


def test_an_unknown_mpi_type_is_one_error_before_anything_starts(capsys) -> None:
    assert srun.main(["--jobid=4", "--mpi=pmix", "true"]) == 1
    err = capsys.readouterr().err
    assert (
        err.strip()
        == 'srun: error: MPI plugin type "pmix" is not available (srun --mpi=list shows: none, pmi2)'
    )


def test_step_spec_carries_mpi_and_the_launcher_options() -> None:
    spec, _ = srun.prepare_step(
        ["--mpi=pmi2", "-K", "--ntasks-per-node=1", "-N2", "./ring"], {"SLURM_JOB_ID": "3"}, "/tmp"
    )
    assert (spec.mpi, spec.kill_on_bad_exit, spec.ntasks_per_node, spec.num_nodes) == ("pmi2", True, 1, 2)
    spec, _ = srun.prepare_step(
        ["--cpu_bind=none", "--kill-on-bad-exit=0", "true"], {"SLURM_JOB_ID": "3"}, "/"
    )
    assert (spec.mpi, spec.kill_on_bad_exit) == ("", False)


def test_mpi_default_is_none_like_slurm_and_is_validated() -> None:
    assert dict(slurm_rows(parse_config_text("", source="spur.conf")))["MpiDefault"] == "none"
    cfg = parse_config_text('[controller]\nmpi_default = "pmi2"\n', source="spur.conf")
    assert dict(slurm_rows(cfg))["MpiDefault"] == "pmi2"
    with pytest.raises(ConfigError, match="mpi_default"):
        parse_config_text('[controller]\nmpi_default = "pmix"\n', source="spur.conf")


def test_tasks_see_the_step_mpi_type() -> None:
    from spur.agent.environment import build_step_environment

    job = pb.JobInfo(job_id=7, allocation=[pb.NodeAllocation(node="n1", cpus=2, tasks=2)])
    for mpi, shown in (("pmi2", "pmi2"), ("", "none")):
        step = pb.StepInfo(
            step_id=0,
            spec=pb.StepSpec(argv=["x"], mpi=mpi),
            allocation=[pb.NodeAllocation(node="n1", cpus=2, tasks=2)],
        )
        env = build_step_environment(
            job, step, node="n1", cluster_name="c", nodelist="n1", step_nodelist="n1"
        )
        assert env["SLURM_MPI_TYPE"] == shown


def test_a_pmi2_step_launch_carries_srun_s_fence_server_to_the_shim() -> None:
    from spur.agent.launchspec import _pmi_fields

    step = pb.StepInfo(
        allocation=[pb.NodeAllocation(node="a", tasks=2), pb.NodeAllocation(node="b", tasks=3)]
    )
    request = pb.LaunchStepRequest(step=step, pmi_server="10.0.0.1:4000", pmi_token="t")
    assert _pmi_fields(request, {"SLURM_MPI_TYPE": "pmi2"}) == {
        "pmi_server": "10.0.0.1:4000",
        "pmi_token": "t",
        "pmi_size": 5,
        "pmi_tasks_per_node": [2, 3],
    }
    assert _pmi_fields(request, {"SLURM_MPI_TYPE": "none"}) == {}  # --mpi=none: no PMI_FD
    assert _pmi_fields(pb.LaunchStepRequest(step=step), {"SLURM_MPI_TYPE": "pmi2"}) == {}
