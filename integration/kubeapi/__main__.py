"""``python -m integration.kubeapi --port N``: run the Kubernetes API double as a process.

Prints ``listening on http://HOST:PORT`` on stdout once it accepts connections (port 0 picks a
free port), then serves until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import trio

from integration.kubeapi.app import KubeAPI


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m integration.kubeapi", description="in-memory Kubernetes API server (test double)"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--token", help="require this bearer token on every request")
    p.add_argument(
        "--bookmark-interval", type=float, default=1.0, help="seconds between watch BOOKMARK events"
    )
    p.add_argument("--history", type=int, default=10000, help="changes a watch can resume across before 410")
    p.add_argument(
        "--no-workloads",
        action="store_true",
        help="do not create pods for StatefulSets/Deployments/DaemonSets",
    )
    p.add_argument(
        "--graceful-pods", action="store_true", help="running pods stay Terminating until a kubelet confirms"
    )
    p.add_argument("--logs-dir", type=Path, help="serve pods/log of ns/name from <dir>/<ns>_<name>.log")
    p.add_argument(
        "--exec-env-dir", type=Path, help="kubectl exec into ns/name runs with <dir>/<ns>_<name>.env"
    )
    p.add_argument(
        "--interactive-pods",
        action="store_true",
        help="run pods with stdin (kubectl run -it) here: Running at creation, command started by attach",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s kubeapi %(levelname)s %(message)s")
    api = KubeAPI(
        token=args.token,
        bookmark_interval=args.bookmark_interval,
        history=args.history,
        workloads=not args.no_workloads,
        logs_dir=args.logs_dir,
        graceful_pods=args.graceful_pods,
        exec_env_dir=args.exec_env_dir,
        interactive_pods=args.interactive_pods,
    )

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(api.serve, args.host, args.port)
            print(f"listening on {url}", flush=True)
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

    trio.run(run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
