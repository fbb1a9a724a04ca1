"""Job arrays, dependency chains, array-element cancellation and sacct, through the Slurm CLI."""

from __future__ import annotations

from pathlib import Path

from integration.harness import Cluster, wait_for


def sacct_states(cluster: Cluster, job: str) -> dict[str, str]:
    out = cluster.cli("sacct", "-j", job, "-X", "-n", "-P", "-o", "JobID,State,ExitCode").stdout
    return {line.split("|")[0]: line.split("|")[1] for line in out.splitlines() if line}


def test_array_of_20_runs_at_most_4_at_a_time(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=8)
    cluster.wait_nodes("node1")
    log = tmp_path / "concurrency.log"
    script = tmp_path / "arr.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --array=0-19%4\n#SBATCH -o arr-%A_%a.out\n"
        f"echo start >> {log}\n"
        f'echo "running $(grep -c start {log}) $(grep -c end {log})"\n'
        "sleep 0.3\n"
        f"echo end >> {log}\n"
        "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID count $SLURM_ARRAY_TASK_COUNT\n"
    )
    array_id = int(cluster.cli("sbatch", "--parsable", str(script), cwd=tmp_path).stdout)
    # while it runs, squeue folds the waiting tasks into one line the way Slurm does
    pending_line = wait_for(
        lambda: next(
            (
                line
                for line in cluster.cli("squeue", "-h", "-o", "%i %t %r").stdout.splitlines()
                if line.startswith(f"{array_id}_[") and " PD " in line
            ),
            None,
        ),
        what="a folded pending array line",
    )
    assert "%4]" in pending_line.split()[0]

    def all_done() -> bool:
        states = sacct_states(cluster, str(array_id))
        return len(states) == 20 and set(states.values()) == {"COMPLETED"}

    wait_for(all_done, timeout=120, what="all 20 array tasks to complete")
    for task in range(20):
        text = (tmp_path / f"arr-{array_id}_{task}.out").read_text().splitlines()
        started, ended = map(int, text[0].split()[1:])
        assert started - ended <= 4, f"task {task} saw {started - ended} tasks running at once"
        assert text[1] == f"task {task} of {array_id} count 20"
    assert set(sacct_states(cluster, str(array_id))) == {f"{array_id}_{i}" for i in range(20)}


def test_afterok_chain_runs_in_order_and_failure_blocks_the_rest(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=4)
    cluster.wait_nodes("node1")
    order = tmp_path / "order"
    go = tmp_path / "go"
    a = cluster.cli(
        "sbatch",
        "--parsable",
        "--wrap",
        f"while [ ! -e {go} ]; do sleep 0.1; done; echo a >> {order}",
        cwd=tmp_path,
    ).stdout.strip()
    b = cluster.cli(
        "sbatch", "--parsable", "-d", f"afterok:{a}", "--wrap", f"echo b >> {order}; exit 1", cwd=tmp_path
    ).stdout.strip()
    c = cluster.cli(
        "sbatch", "--parsable", f"--dependency=afterok:{b}", "--wrap", f"echo c >> {order}", cwd=tmp_path
    ).stdout.strip()
    wait_for(
        lambda: cluster.cli("squeue", "-h", "-j", b, "-o", "%r").stdout.strip() == "Dependency",
        what="b to wait on its dependency",
    )
    go.touch()
    cluster.wait_job(int(b), "FAILED", timeout=60)
    wait_for(
        lambda: cluster.job(int(c)).reason == "DependencyNeverSatisfied", what="c to be blocked for good"
    )
    assert order.read_text() == "a\nb\n"
    assert sacct_states(cluster, a)[a] == "COMPLETED"
    assert sacct_states(cluster, b)[b] == "FAILED"
    assert "Dependency=afterok:" in cluster.cli("scontrol", "show", "job", c).stdout


def test_scancel_array_elements(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=1)
    cluster.wait_nodes("node1")
    array_id = cluster.cli(
        "sbatch", "--parsable", "--array=1-6", "--wrap", "sleep 300", cwd=tmp_path
    ).stdout.strip()
    cluster.wait_job(int(array_id), "RUNNING")
    cluster.cli("scancel", f"{array_id}_1", f"{array_id}_[3-4]")

    def cancelled() -> set[str]:
        return {jid for jid, st in sacct_states(cluster, array_id).items() if st.startswith("CANCELLED")}

    wait_for(
        lambda: cancelled() == {f"{array_id}_1", f"{array_id}_3", f"{array_id}_4"},
        what="the three named tasks to be cancelled",
    )
    remaining = cluster.cli("squeue", "-h", "-r", "-j", array_id, "-o", "%i").stdout.split()
    assert sorted(remaining) == [f"{array_id}_2", f"{array_id}_5", f"{array_id}_6"]
    cluster.cli("scancel", array_id)
    wait_for(lambda: len(cancelled()) == 6, what="the whole array to be cancelled")


def test_sacct_reports_jobs_and_steps(cluster: Cluster, tmp_path: Path):
    cluster.start_agent("node1", cpus=2)
    cluster.wait_nodes("node1")
    ok = cluster.cli("sbatch", "--parsable", "-J", "good", "--wrap", "true", cwd=tmp_path).stdout.strip()
    bad = cluster.cli("sbatch", "--parsable", "-J", "bad", "--wrap", "exit 7", cwd=tmp_path).stdout.strip()
    cluster.wait_job(int(ok), "COMPLETED")
    cluster.wait_job(int(bad), "FAILED")
    out = cluster.cli(
        "sacct", "-j", f"{ok},{bad}", "-P", "-o", "JobID,JobName,State,ExitCode"
    ).stdout.splitlines()
    assert out[0] == "JobID|JobName|State|ExitCode"
    assert f"{ok}|good|COMPLETED|0:0" in out
    assert f"{bad}|bad|FAILED|7:0" in out
    assert any(line.startswith(f"{ok}.batch|batch|COMPLETED") for line in out)
