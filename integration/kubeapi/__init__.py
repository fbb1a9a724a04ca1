"""An in-memory Kubernetes API server test double (no kube-apiserver can be installed here).

``KubeAPI`` (app.py) serves a ``Store`` (store.py) over HTTP with quart-trio on hypercorn's Trio
worker; ``Kubelet``/``HttpKubelet`` (kubelet.py) move pods and nodes through their lifecycles as a
test instructs. Pure logic lives in selectors.py, patch.py, resources.py, watch.py and tables.py.
"""

from integration.kubeapi.app import KubeAPI
from integration.kubeapi.kubelet import HttpKubelet, Kubelet
from integration.kubeapi.store import Store

__all__ = ["HttpKubelet", "KubeAPI", "Kubelet", "Store"]
