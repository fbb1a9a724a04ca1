#!/bin/bash
# Start etcd + kube-apiserver (envtest-style: no kubelet, scheduler or controller-manager)
# on free 127.0.0.1 ports and print the path of an admin kubeconfig on stdout.
#
#   usage: run-apiserver.sh BINDIR [WORKDIR]
#     BINDIR  : directory filled by build-apiserver.sh (contains bin/kube-apiserver, bin/etcd)
#     WORKDIR : state directory (default: a fresh mktemp -d under /dev/shm, else /tmp)
#
# Prints exactly one line on stdout: the kubeconfig path. Everything else goes to stderr
# and to WORKDIR/*.log. WORKDIR/pids holds "ETCD_PID APISERVER_PID". Stop with
#     WORKDIR/stop.sh     (SIGTERM the apiserver, wait for it, then etcd)
# Killing both at once makes the apiserver retry etcd for ~5-20 s before it exits.
# Python clients: CA = WORKDIR/certs/apiserver.crt (leaf + self-signed CA written by
# --cert-dir); token = WORKDIR/token. With `requests`, set session.trust_env = False,
# or the REQUESTS_CA_BUNDLE variable (set on these machines) overrides session.verify.
# Environment: KUBE_READY_TIMEOUT (seconds, default 60); SPUR_KUBE_EXTRA_TOKENS (more lines of the
# --token-auth-file, e.g. a ServiceAccount's name and groups for RBAC tests); SPUR_KUBE_APISERVER_ARGS
# (more kube-apiserver flags, split on blanks, e.g. --watch-cache=false so that watches read etcd and
# an etcd compaction expires them). WORKDIR/etcd-url holds etcd's client URL (its v3 JSON gateway
# serves /v3/kv/range and /v3/kv/compaction).
set -euo pipefail
BINDIR=$(cd "${1:?usage: $0 BINDIR [WORKDIR]}" && pwd)
APISERVER=$BINDIR/bin/kube-apiserver
ETCD=$BINDIR/bin/etcd
[ -x "$APISERVER" ] && [ -x "$ETCD" ] || { echo "missing $APISERVER or $ETCD; run build-apiserver.sh $BINDIR" >&2; exit 1; }
if [ -n "${2:-}" ]; then W=$2; mkdir -p "$W"; else
  base=/tmp; [ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
  W=$(mktemp -d "$base/kube-test.XXXXXX"); fi
W=$(cd "$W" && pwd)
TIMEOUT=${KUBE_READY_TIMEOUT:-60}

# three free loopback ports, never 6443 nor 6817-6824
read -r ETCD_PORT PEER_PORT API_PORT < <(python3 - <<'PY'
import socket
socks, ports = [], []
while len(ports) < 3:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]
    socks.append(s)
    if p == 6443 or 6817 <= p <= 6824: continue
    ports.append(p)
print(*ports)
PY
)

# credentials: service-account key pair and a static admin token (group system:masters)
mkdir -p "$W/certs"
[ -f "$W/sa.key" ] || openssl genrsa -out "$W/sa.key" 2048 2>/dev/null
openssl rsa -in "$W/sa.key" -pubout -out "$W/sa.pub" 2>/dev/null
TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
echo "$TOKEN" > "$W/token"
echo "$TOKEN,admin,admin-uid,system:masters" > "$W/tokens.csv"
# more static-token users (lines "token,user,uid,\"group1,group2\""), e.g. a ServiceAccount's identity
if [ -n "${SPUR_KUBE_EXTRA_TOKENS:-}" ]; then printf '%s\n' "$SPUR_KUBE_EXTRA_TOKENS" >> "$W/tokens.csv"; fi

ETCD_EXTRA=()
"$ETCD" --help 2>&1 | grep -q -- '--unsafe-no-fsync' && ETCD_EXTRA+=(--unsafe-no-fsync)
"$ETCD" --name kt --data-dir "$W/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
  --initial-cluster "kt=http://127.0.0.1:$PEER_PORT" \
  "${ETCD_EXTRA[@]}" > "$W/etcd.log" 2>&1 &
ETCD_PID=$!
echo "$ETCD_PID" > "$W/pids"
echo "http://127.0.0.1:$ETCD_PORT" > "$W/etcd-url"
# shellcheck disable=SC2206
API_EXTRA=(${SPUR_KUBE_APISERVER_ARGS:-})

# --service-cluster-ip-range is only an allocation range kept in etcd: nothing is sent there.
# ServiceAccount admission is off (no controller-manager creates the "default" SA), as envtest does.
"$APISERVER" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --insecure-port 0 \
  --cert-dir "$W/certs" \
  --token-auth-file "$W/tokens.csv" \
  --authorization-mode RBAC \
  --service-account-key-file "$W/sa.pub" --service-account-signing-key-file "$W/sa.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --api-audiences https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range 10.0.0.0/24 \
  --disable-admission-plugins ServiceAccount \
  --allow-privileged=true \
  --profiling=false \
  "${API_EXTRA[@]}" \
  > "$W/apiserver.log" 2>&1 &
API_PID=$!
echo "$ETCD_PID $API_PID" > "$W/pids"

cat > "$W/stop.sh" <<STOP
#!/bin/sh
kill $API_PID 2>/dev/null; i=0
while kill -0 $API_PID 2>/dev/null && [ \$i -lt 150 ]; do sleep 0.1; i=\$((i+1)); done
kill -9 $API_PID 2>/dev/null; kill $ETCD_PID 2>/dev/null; i=0
while kill -0 $ETCD_PID 2>/dev/null && [ \$i -lt 50 ]; do sleep 0.1; i=\$((i+1)); done
kill -9 $ETCD_PID 2>/dev/null; exit 0
STOP
chmod +x "$W/stop.sh"

cat > "$W/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $W/certs/apiserver.crt
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
KC

start=$(date +%s%N)
until curl -fsk -m 2 -H "Authorization: Bearer $TOKEN" "https://127.0.0.1:$API_PORT/readyz" >/dev/null 2>&1; do
  if ! kill -0 "$API_PID" 2>/dev/null || ! kill -0 "$ETCD_PID" 2>/dev/null; then
    echo "etcd or kube-apiserver exited; see $W/etcd.log $W/apiserver.log" >&2; tail -20 "$W/apiserver.log" >&2
    "$W/stop.sh"; exit 1; fi
  if [ $(( ($(date +%s%N) - start) / 1000000000 )) -ge "$TIMEOUT" ]; then
    echo "not ready after ${TIMEOUT}s; see $W/apiserver.log" >&2; "$W/stop.sh"; exit 1; fi
  sleep 0.2
done
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "ready in ${ms} ms: https://127.0.0.1:$API_PORT etcd=127.0.0.1:$ETCD_PORT pids=$ETCD_PID,$API_PID workdir=$W" >&2
echo "$W/kubeconfig"
