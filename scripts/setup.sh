#!/usr/bin/env bash
# Create .venv and install Spur, its plugins and the development tools into it; generate the man
# pages (.venv/share/man) and shell completion (.venv/share/spur). Idempotent. Shows each step with
# its elapsed time (and, on a terminal, what pip is fetching); the full log is .venv/install.log.
#
#   bash scripts/setup.sh             everything the tests need: Spur with its dev extras, every plugin,
#                                     and as root the system tools (wireguard-go, ping, nftables,
#                                     tcpdump, man-db, PostgreSQL, the kube-apiserver build)
#   bash scripts/setup.sh --runtime   what running Spur needs (scripts/demo.sh): Spur, its dependencies
#                                     and the scheduler plugin; run without --runtime later for the rest
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mode=full
case "${1:-}" in
  "") ;;
  --runtime) mode=runtime ;;
  *) echo "usage: bash scripts/setup.sh [--runtime]" >&2; exit 2 ;;
esac
t_start=$SECONDS
say() { echo "setup: $*" >&2; }
if ! "$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  say "Python 3.11 or newer is required (found: $("$PY" --version 2>&1))"
  exit 1
fi
log=.venv/install.log

# step MESSAGE COMMAND...: run COMMAND with its output in the log; show progress, fail with the log's tail.
step() {
  local msg=$1 t0=$SECONDS pid rc=0 i=0 last=0 spin='-\|/' what
  shift
  say "$msg ..."
  "$@" >>"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ -t 2 ]; then
      what=$(grep -aoE '(Collecting|Downloading|Building|Installing collected packages)[^ ]* ?[^ ]*' "$log" 2>/dev/null | tail -n 1 | cut -c1-48 || true)
      printf '\r  %s %3ds %-48s' "${spin:i++%4:1}" $((SECONDS - t0)) "$what" >&2
    elif [ $((SECONDS - t0 - last)) -ge 10 ]; then
      last=$((SECONDS - t0)); say "  ... still $msg (${last}s)"
    fi
    sleep 0.2
  done
  wait "$pid" || rc=$?
  [ -t 2 ] && printf '\r%-60s\r' '' >&2
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log" >&2
    say "$msg failed after $((SECONDS - t0))s (full log: $log)"
    exit 1
  fi
  say "  done in $((SECONDS - t0))s"
}

if [ ! -x .venv/bin/python ]; then
  mkdir -p .venv
  say "creating the virtual environment .venv"
  "$PY" -m venv .venv
fi
# The stamp holds the hash of the project files and what was installed for it (runtime or full).
stamp=.venv/.spur-installed
hash=$(cat pyproject.toml plugins/*/pyproject.toml | sha1sum | cut -d' ' -f1)
have=$(cat "$stamp" 2>/dev/null || true)
if [ "$have" != "$hash full" ] && { [ "$mode" = full ] || [ "$have" != "$hash runtime" ]; }; then
  : >"$log"
  say "installing Spur into .venv ($mode; log: $log)"
  # Editable installs of a pyproject.toml project need pip 21.3 (PEP 660); upgrade only an older one.
  if ! .venv/bin/python -c 'import sys, pip; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (21, 3))' 2>/dev/null; then
    step "upgrading pip" .venv/bin/python -m pip install --progress-bar off --upgrade pip
  fi
  if [ "$mode" = runtime ]; then
    # One pip run (one resolution); modules are compiled when first imported, not all up front.
    step "installing Spur, its dependencies (trio, h2, protobuf, marshmallow, cyclopts, pluggy, ...) and the scheduler plugin" \
      .venv/bin/python -m pip install --progress-bar off --no-compile -e . -e plugins/spur-sched-backfill
  else
    step "installing Spur and its dependencies (trio, h2, protobuf, marshmallow, cyclopts, pluggy) and the dev tools" \
      .venv/bin/python -m pip install --progress-bar off -e '.[dev]'
    for plugin in plugins/*/; do
      step "installing plugin $(basename "$plugin")" .venv/bin/python -m pip install --progress-bar off --no-deps -e "$plugin"
    done
  fi
  echo "$hash $mode" >"$stamp"
fi

.venv/bin/python -m spur.cli.manpages .venv/share/man >/dev/null
mkdir -p .venv/share/spur
.venv/bin/spur completion bash >.venv/share/spur/completion.bash
.venv/bin/spur completion zsh >.venv/share/spur/_spur
if [ "$mode" = runtime ]; then
  command -v man >/dev/null 2>&1 || say "note: no 'man' command here (bash scripts/setup.sh installs man-db as root); the pages are in .venv/share/man"
  say "runtime ready in $((SECONDS - t_start))s (bash scripts/setup.sh without --runtime adds the dev tools, the other plugins and the test prerequisites)"
  exit 0
fi

# The WireGuard mesh (spur net join) uses kernel WireGuard where the module exists, else wireguard-go.
if ! command -v wireguard-go >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "installing wireguard-go (userspace WireGuard for spur net join)" sh -c 'apt-get install -y wireguard-go || { apt-get update && apt-get install -y wireguard-go; }'
fi
# The mesh tests and docs/mesh.md check tunnels with ping.
if ! command -v ping >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "installing ping (iputils-ping, used by the mesh tests)" sh -c 'apt-get install -y iputils-ping || { apt-get update && apt-get install -y iputils-ping; }'
fi
if ! command -v nft >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "installing nftables (the operator tests drop SYNs to a controller in a network namespace)" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y nftables || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nftables; }'
fi
# The loopback capture test (integration/test_tls_capture.py) records the test's ports with tcpdump.
if ! command -v tcpdump >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "installing tcpdump (the TLS capture test records loopback traffic)" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y tcpdump || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y tcpdump; }'
fi
# The MPI tests (integration/test_mpi.py) compile a ring program with both Debian MPI stacks. Their
# mpicc/mpirun alternatives compete, so the tests call the explicit names (mpicc.mpich, mpiexec.hydra,
# mpicc.openmpi, mpirun.openmpi) and this checks for exactly those.
if { ! command -v mpicc.mpich >/dev/null 2>&1 || ! command -v mpiexec.hydra >/dev/null 2>&1 \
  || ! command -v mpicc.openmpi >/dev/null 2>&1 || ! command -v mpirun.openmpi >/dev/null 2>&1; } \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  mpi_pkgs='mpich libmpich-dev openmpi-bin libopenmpi-dev'
  step "installing MPICH and Open MPI (the MPI tests: $mpi_pkgs)" sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y $mpi_pkgs || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $mpi_pkgs; }"
fi
# Test-only: the dashboard's browser tests (integration/test_dashboard_browser.py) drive Debian's chromium
# headless through chromium-driver (selenium, in the dev extras); nothing is downloaded at test time.
if { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; } \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "installing chromium and chromium-driver (the dashboard's browser tests)" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 chromium chromium-driver || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 chromium chromium-driver; }'
fi
command -v wireguard-go >/dev/null 2>&1 || say "note: no wireguard-go here (as root, setup installs it); spur net join then needs the kernel WireGuard module"

# `man sbatch`: man-db searches .venv/share/man by itself when .venv/bin is on PATH.
if ! command -v man >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "installing man-db (the man command)" sh -c 'apt-get install -y man-db || { apt-get update && apt-get install -y man-db; }'
fi
command -v man >/dev/null 2>&1 || say "note: no 'man' command here (as root, setup installs man-db); the pages are in .venv/share/man"
# PostgreSQL (the accounting tests and benchmarks start a private server with its initdb/pg_ctl).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    step "installing PostgreSQL (apt-get install -y postgresql)" \
      sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; }'
  else
    say "PostgreSQL not found and not root: the accounting tests will be skipped (install postgresql)"
  fi
fi

# The real kube-apiserver (v1.20.2) and etcd that the Kubernetes integration tests run against next to
# the API double (integration/kube_real.py): built once per machine from Debian's kubernetes source
# package with Debian's Go (apt only), cached outside the clone. 0.4 s when already built.
kube_dir=${SPUR_KUBE_DIR:-/var/cache/spur-test/kube}
# (a cached build without the zero-value fix, see scripts/kube/build-apiserver.sh, is built again)
if [ -x "$kube_dir/bin/kube-apiserver" ] && [ -x "$kube_dir/bin/etcd" ] \
  && grep -q kube-openapi-230 "$kube_dir/VERSIONS" 2>/dev/null; then
  :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  mkdir -p "$kube_dir"  # the lock: a second setup on this machine waits, then finds it built
  step "building kube-apiserver v1.20.2 and etcd into $kube_dir (once per machine: about 7 minutes, 1.3 GB of memory)" \
    flock "$kube_dir/.build.lock" bash scripts/kube/build-apiserver.sh "$kube_dir"
else
  say "note: no kube-apiserver in $kube_dir and not root (the build uses apt-get): the real-API-server tests are skipped"
fi

# A real systemd for the compute-host tests (integration/systemd_hosts.py): systemd-nspawn containers
# booting Debian bookworm's systemd 252 from one root filesystem, built once per machine with debootstrap
# (about a minute) and cached outside the clone. Instant when already built.
systemd_dir=${SPUR_SYSTEMD_DIR:-/var/cache/spur-test/systemd}
if [ -x "$systemd_dir/rootfs/lib/systemd/systemd" ]; then
  :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  if ! command -v systemd-nspawn >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    step "installing systemd-nspawn and debootstrap (systemd-container, debootstrap)" \
      sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 systemd-container debootstrap || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=600 systemd-container debootstrap; }'
  fi
  mkdir -p "$systemd_dir"  # the lock: a second setup on this machine waits, then finds it built
  step "building the systemd test hosts' root filesystem into $systemd_dir/rootfs (once per machine: about a minute)" \
    flock "$systemd_dir/.build.lock" env SDT_ROOT="$systemd_dir/rootfs" SDT_STATE="$systemd_dir/state-build" \
    bash scripts/systemd/run-systemd.sh build
else
  say "note: no systemd root filesystem in $systemd_dir and not root: the systemd host tests are skipped"
fi

# Real Slurm 24.11 (Debian 13's slurmctld, slurmd, slurmdbd and slurmrestd) for the side-by-side REST
# test (integration/test_rest_vs_slurm24.py): a chroot built once per machine by the shared tool beside
# the clone (../shared/tools/slurm24-chroot.sh, debootstrap: about 300 MB and 2 minutes) and cached
# outside the clone; flock'd with the tests that use it. Instant when already built.
slurm24_dir=${SPUR_SLURM24_DIR:-/var/cache/spur-test/slurm24}
if [ -x "$slurm24_dir/usr/sbin/slurmrestd" ]; then
  :
elif [ ! -f ../shared/tools/slurm24-chroot.sh ]; then
  say "note: no ../shared/tools/slurm24-chroot.sh beside the clone: the Slurm 24.11 REST comparison is skipped"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "building real Slurm 24.11 in a chroot at $slurm24_dir (once per machine: about 2 minutes, 300 MB)" \
    env SPUR_SLURM24_DIR="$slurm24_dir" .venv/bin/python -m integration.slurm24 build
else
  say "note: no Slurm 24.11 chroot in $slurm24_dir and not root: the Slurm 24.11 REST comparison is skipped"
fi

say "ready in $((SECONDS - t_start))s: export PATH=\"$PWD/.venv/bin:\$PATH\" (man pages follow PATH);" \
  "completion: source $PWD/.venv/share/spur/completion.bash"
