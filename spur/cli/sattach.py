"""``sattach`` / ``spur attach``: follow a job's stdout/stderr through the REST API's WebSocket.

Usage: ``sattach [--offset N] [--stderr-offset N] [-l|--label] [--url URL] JOBID[.STEP]``

The REST base URL is ``--url``, else ``$SPUR_REST_URL``, else ``http://<first controller host>:6820``
(``https://`` when ``[tls]`` is on; the server is verified against ``[tls] ca_file``).
Authentication is the REST API's: ``X-SLURM-USER-NAME`` (this user) plus a token from
``$SLURM_JWT``, ``$SPUR_AUTH_TOKEN`` or ``~/.spur/token`` when one exists. Output is written as it
arrives; the command ends when the job ends and exits with the job's exit code (128+signal when it
was killed by a signal, 1 when it was cancelled, timed out or failed without an exit code).
This module imports trio-websocket only inside the command, never quart or hypercorn.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

if TYPE_CHECKING:
    import ssl

PROG = "sattach"
USAGE = "Usage: sattach [OPTIONS...] JOBID[.STEP]"


OPERANDS = "jobs"


def option_docs():  # -> list[OptionDoc]
    """The option table behind --help, --usage, man pages and completion."""
    from spur.cli.cmdinfo import OptionDoc

    return [
        OptionDoc("offset", None, "required", "N", "skip the first N bytes of stdout (resume after them)"),
        OptionDoc("stderr-offset", None, "required", "N", "skip the first N bytes of stderr"),
        OptionDoc("label", "l", help="prefix each line with the task number"),
        OptionDoc(
            "url",
            None,
            "required",
            "URL",
            "REST base URL (default: $SPUR_REST_URL, else the controller's host, port 6820)",
        ),
    ]


class AttachError(ValueError):
    """A bad argument or a refused attachment; the message is printed after ``sattach: error:``."""


@dataclass
class AttachOptions:
    job: str
    offset: int = 0
    stderr_offset: int = 0
    label: bool = False
    url: str = ""


def parse_args(argv: list[str]) -> AttachOptions:
    """Parse the command line (see the module docstring); raises AttachError."""
    job = ""
    opts: dict[str, Any] = {}
    it = iter(argv)
    for arg in it:
        name, eq, value = arg.partition("=")
        if name in ("--offset", "--stderr-offset", "--url"):
            if not eq:
                value = next(it, "")
            if not value:
                raise AttachError(f"option {name} needs a value")
            if name == "--url":
                opts["url"] = value
            elif not value.isdigit():
                raise AttachError(f"{name} must be a byte count: {value!r}")
            else:
                opts[name[2:].replace("-", "_")] = int(value)
        elif arg in ("-l", "--label"):
            opts["label"] = True
        elif arg.startswith("-"):
            raise AttachError(f"unrecognized option '{arg}'")
        elif job:
            raise AttachError(f"only one job may be attached (got {job} and {arg})")
        else:
            job = arg
    head = job.split(".", 1)[0]
    if not head or not head.replace("_", "", 1).isdigit() or head.startswith("_") or head.endswith("_"):
        raise AttachError(f"Invalid job id specified: {job or '(none)'}" if job else "no job id given")
    return AttachOptions(job=head, **opts)


def rest_base_url(explicit: str, environ: dict[str, str], controllers: list[str], tls: bool = False) -> str:
    """The REST API base URL (see the module docstring)."""
    url = explicit or environ.get("SPUR_REST_URL", "")
    if url:
        return url.rstrip("/")
    host = controllers[0].rsplit(":", 1)[0] if controllers else "localhost"
    return f"{'https' if tls else 'http'}://{host or 'localhost'}:6820"


def output_url(base: str, opts: AttachOptions) -> str:
    ws = (
        "wss://" + base[len("https://") :]
        if base.startswith("https://")
        else "ws://" + base.split("://", 1)[-1]
    )
    query = {k: v for k, v in (("offset", opts.offset), ("stderr_offset", opts.stderr_offset)) if v}
    suffix = f"?{urlencode(query)}" if query else ""
    return f"{ws}/spur/v1/job/{quote(opts.job)}/output{suffix}"


def find_token(environ: dict[str, str], home: Path) -> str:
    for key in ("SLURM_JWT", "SPUR_AUTH_TOKEN"):
        if environ.get(key):
            return environ[key].strip()
    try:
        return (home / ".spur" / "token").read_text().strip()
    except OSError:
        return ""


def exit_status(end: dict[str, Any]) -> int:
    """The command's exit status for the server's ``end`` message."""
    sig = int(end.get("signal") or 0)
    if sig:
        return 128 + sig
    code = int(end.get("exit_code") or 0)
    if code == 0 and end.get("state") in ("CANCELLED", "TIMEOUT", "NODE_FAIL", "FAILED", "UNKNOWN"):
        return 1
    return code


def render(message: dict[str, Any], label: bool) -> tuple[str, bytes]:
    """(stream, bytes to write) for an ``output`` message."""
    data = str(message.get("data", ""))
    if label:
        task = message.get("task", 0)
        data = "".join(f"{task}: {line}" for line in data.splitlines(keepends=True))
    return str(message.get("stream", "stdout")), data.encode("utf-8", "replace")


async def attach(url: str, headers: list[tuple[str, str]], label: bool, ssl_context: ssl.SSLContext | None = None) -> int:
    import trio_websocket

    out, err = sys.stdout.buffer, sys.stderr.buffer
    # trio_websocket takes header bytes; ASCII is what h11 would have encoded text headers as.
    extra_headers = [(name.encode("ascii"), value.encode("ascii")) for name, value in headers]
    try:
        async with trio_websocket.open_websocket_url(
            url, extra_headers=extra_headers, ssl_context=ssl_context
        ) as ws:
            while True:
                try:
                    text = await ws.get_message()
                except trio_websocket.ConnectionClosed:
                    raise AttachError("the connection closed before the job ended") from None
                message = json.loads(text)
                kind = message.get("type")
                if kind == "output":
                    stream, data = render(message, label)
                    target = err if stream == "stderr" else out
                    target.write(data)
                    target.flush()
                elif kind == "end":
                    return exit_status(message)
                elif kind == "error":
                    errors = message.get("errors") or [{}]
                    raise AttachError(
                        errors[0].get("description") or errors[0].get("error") or "attach failed"
                    )
    except trio_websocket.ConnectionRejected as exc:
        detail = ""
        try:
            errors = json.loads(exc.body or b"{}").get("errors") or []
            detail = errors[0].get("description") or errors[0].get("error") or ""
        except (ValueError, AttributeError, IndexError):
            pass
        raise AttachError(f"attach refused ({exc.status_code}): {detail or 'no reason given'}") from None
    except OSError as exc:
        raise AttachError(f"cannot reach the REST API at {url}: {exc}") from None


def main(argv: list[str]) -> int:
    meta = next((a for a in argv if a in ("-h", "--help", "--usage", "-V", "--version")), None)
    if meta is not None:
        from spur.cli.cmdinfo import handle_meta

        return handle_meta("attach", "--help" if meta == "-h" else meta)
    try:
        opts = parse_args(argv)
    except AttachError as exc:
        print(f"{PROG}: error: {exc}\n{USAGE}", file=sys.stderr)
        return 1
    import trio

    from spur.auth.identity import current_identity
    from spur.cli.client import CliError, controller_targets, rest_ssl_context

    try:
        controllers = controller_targets()
        ssl_context = rest_ssl_context()
    except CliError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    environ = dict(os.environ)
    url = output_url(rest_base_url(opts.url, environ, controllers, tls=ssl_context is not None), opts)
    headers = [("X-SLURM-USER-NAME", current_identity().user)]
    token = find_token(environ, Path.home())
    if token:
        headers.append(("X-SLURM-USER-TOKEN", token))
    try:
        return trio.run(attach, url, headers, opts.label, ssl_context if url.startswith("wss://") else None)
    except AttachError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
