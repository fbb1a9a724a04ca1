"""``spur k8s kubeconfig [--user NAME] [--admin]``: who gets which kubeconfig.

| request          | who                       | result                                                    |
| bare             | anyone with an identity   | a ServiceAccount kubeconfig in the caller's namespace     |
| ``--user NAME``  | cluster admin (or NAME)   | NAME's ServiceAccount kubeconfig                          |
| ``--admin``      | cluster admin, and        | the k0s cluster-admin kubeconfig of a running control     |
|                  | ``allow_admin_kubeconfig``| plane                                                     |

``--user`` and ``--admin`` exclude each other. The namespace is the user's default Spur account
(the user's name when the user has none), as a DNS label. The ServiceAccount ``spur-<user>`` is
bound to the ``edit`` ClusterRole in that namespace, and its token comes from the TokenRequest API.
The identity is the verified caller's. Kubeconfigs are never logged.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import TYPE_CHECKING, Any

import trio
import yaml

from spur.rpc.proto import k0s_pb2
from spur.rpc.proto import k8s_pb2 as kpb
from spur.rpc.server import CallContext
from spur.rpc.status import RpcError, StatusCode

if TYPE_CHECKING:
    from spur.k8s.cluster.host import ClusterServiceHost
    from spur.state.machine import ClusterState

TOKEN_SECS = 24 * 3600
ADMIN_OFF = (
    "the cluster-admin kubeconfig is not served over RPC ([cluster] allow_admin_kubeconfig = false); "
    "get it on a control-plane node with: k0s kubeconfig admin"
)


def dns_label(name: str) -> str:
    """``name`` as a Kubernetes namespace / object name (lower case, [a-z0-9-], at most 63)."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63].strip("-")
    return label or "spur-user"


def user_namespace(state: ClusterState, user: str) -> str:
    accounting = state.domains.get("accounting")
    record = getattr(accounting, "users", {}).get(user) if accounting is not None else None
    account = getattr(record, "default_account", "") if record is not None else ""
    return dns_label(account or user)


def scoped_kubeconfig(server: str, ca_data: str | None, namespace: str, user: str, token: str) -> str:
    cluster: dict[str, Any] = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "spur", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": f"{user}@spur", "context": {"cluster": "spur", "user": user, "namespace": namespace}}],
        "current-context": f"{user}@spur",
    }
    return yaml.safe_dump(doc, sort_keys=False)


def mint_service_account_kubeconfig(admin_kubeconfig: str, namespace: str, user: str) -> str:
    """Blocking: namespace, ServiceAccount, RoleBinding and a token; the user's kubeconfig."""
    from spur.k8s.cluster.kubeclient import KubeClient, parse_kubeconfig

    target = parse_kubeconfig(admin_kubeconfig)
    client = KubeClient(target)
    sa = f"spur-{dns_label(user)}"[:63]
    client.ensure("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    client.ensure(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": namespace,
                                                                    "labels": {"spur.dev/user": dns_label(user)}}},
    )
    client.ensure(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{sa}-edit", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
        },
    )
    answer = client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{urllib.parse.quote(sa)}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
         "spec": {"expirationSeconds": TOKEN_SECS}},
    )
    token = answer.get("status", {}).get("token")
    if not token:
        from spur.k8s.cluster.kubeclient import KubeError

        raise KubeError("the Kubernetes API issued no ServiceAccount token")
    import base64

    ca = base64.b64encode(target.ca_data).decode() if target.ca_data else None
    return scoped_kubeconfig(target.server, ca, namespace, user, token)


async def admin_kubeconfig(svc: ClusterServiceHost) -> str:
    rec = svc.record
    running = [cp for cp in rec.control_planes if rec.nodes.get(cp) and rec.nodes[cp].component_state == "active"]
    if not running:
        raise RpcError(StatusCode.FAILED_PRECONDITION, f"no control plane is running (the cluster is {rec.phase})")
    resp = await svc._call_agent(running[0], "AdminKubeconfig", k0s_pb2.K0sKubeconfigRequest(), 30.0)
    return resp.kubeconfig


async def serve_kubeconfig(
    svc: ClusterServiceHost, request: kpb.K8sKubeconfigRequest, context: CallContext
) -> kpb.K8sKubeconfigResponse:
    from spur.k8s.cluster.kubeclient import KubeError

    caller = svc._caller(context)
    if request.user and request.admin:
        raise RpcError(StatusCode.INVALID_ARGUMENT, "--user and --admin are mutually exclusive")
    if request.admin:
        svc._admin(context, "fetching the cluster-admin kubeconfig (spur k8s kubeconfig --admin)")
        if not svc.ctl.cfg.cluster.allow_admin_kubeconfig:
            raise RpcError(StatusCode.PERMISSION_DENIED, ADMIN_OFF)
        return kpb.K8sKubeconfigResponse(kubeconfig=await admin_kubeconfig(svc))
    user = request.user or caller.user
    if user != caller.user:
        svc._admin(context, "fetching another user's kubeconfig (spur k8s kubeconfig --user)")
    await svc.ctl.read_barrier()
    namespace = user_namespace(svc.ctl.state, user)
    admin = await admin_kubeconfig(svc)
    try:
        text = await trio.to_thread.run_sync(mint_service_account_kubeconfig, admin, namespace, user)
    except KubeError as exc:
        raise RpcError(StatusCode.UNAVAILABLE, f"could not mint the kubeconfig: {exc}") from None
    return kpb.K8sKubeconfigResponse(kubeconfig=text)
