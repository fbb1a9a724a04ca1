"""spur-k8s-operator: SpurJob controller, node watcher, virtual agent and quota reconciler.

Pure logic (no I/O): :mod:`.spurjobs`, :mod:`.pods`, :mod:`.nodes`, :mod:`.quota`. I/O: :mod:`.kube`
(Kubernetes API over httpx), :mod:`.link` (the bounded channel to spurctld), and the loops
:mod:`.jobs`, :mod:`.watcher`, :mod:`.agent`, :mod:`.quota_reconciler`; :mod:`.main` wires them.
"""
