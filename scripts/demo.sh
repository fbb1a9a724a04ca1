#!/usr/bin/env bash
# Install Spur, start a local controller and agent, run a sample batch job and show its output.
# Each stage is announced with the elapsed time; the daemons' logs stay in the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
say() { echo "demo: [$((SECONDS - t0))s] $*" >&2; }
# Only what running Spur needs (Spur and the scheduler plugin); scripts/test.sh installs the rest.
say "setting up .venv (scripts/setup.sh --runtime)"
bash scripts/setup.sh --runtime
export PATH="$PWD/.venv/bin:$PATH"
work=$(mktemp -d /tmp/spur-demo.XXXXXX)
cleanup() { kill "${agent_pid:-}" "${ctl_pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
export SPUR_CONTROLLER=localhost:6817

say "starting spurctld (log: $work/spurctld.log)"
spurctld -D --state-dir "$work/state" >"$work/spurctld.log" 2>&1 & ctl_pid=$!
until scontrol ping >/dev/null 2>&1; do
  kill -0 "$ctl_pid" 2>/dev/null || { cat "$work/spurctld.log"; exit 1; }
  sleep 0.2
done
say "controller up; starting spurd (log: $work/spurd.log)"
spurd -D --controller http://localhost:6817 --state-dir "$work/agent" >"$work/spurd.log" 2>&1 & agent_pid=$!
until [ -n "$(sinfo -h -N -t idle,mix,alloc 2>/dev/null)" ]; do  # -N: nodes only (a partition with none still prints a line)
  kill -0 "$agent_pid" 2>/dev/null || { cat "$work/spurd.log"; exit 1; }
  sleep 0.2
done

say "node registered; submitting a job"
cat > "$work/hello.sh" <<'JOB'
#!/bin/bash
#SBATCH -J hello
#SBATCH -t 5
echo "Hello from job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $SLURM_NODELIST with $SLURM_CPUS_ON_NODE CPU(s)"
sleep 2
echo "Done."
JOB
cd "$work"
echo "\$ sbatch hello.sh"; sbatch hello.sh
echo "\$ squeue"; squeue
echo "\$ sinfo"; sinfo
while [ -n "$(squeue -h -j 1 -t PD,R,CG 2>/dev/null)" ]; do sleep 0.2; done
echo "\$ scontrol show job 1 | grep JobState"; scontrol show job 1 | grep JobState
echo "\$ cat slurm-1.out"; cat slurm-1.out
echo "\$ spur run -- hostname"; spur run -- hostname
say "done (state and logs in $work)"
