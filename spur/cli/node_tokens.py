"""``spur token create|list|revoke``: node join tokens for ``[admission] mode = "token"`` (admin only).

``create`` prints the token (``<id>.<secret>``) on stdout, alone, so scripts can capture it; the
secret is shown this once and stored only hashed. ``list`` prints a table (never a secret);
``revoke ID`` stops new registrations with that token and ends the credentials of the nodes it admitted.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spur.cli.client import ControllerStub

USAGE = """Usage: spur token create [--ttl DURATION] [--uses N] [--description TEXT]
       spur token list
       spur token revoke ID

Node join tokens for [admission] mode = "token" (administrators only).
  create   make a token; prints it once (the cluster stores only its hash)
           --ttl DURATION   lifetime: 90s, 30m, 24h (default), 7d, 2w; 0 = never expires
           --uses N         registrations it admits (default: unlimited)
  list     show every token: id, state, uses, expiry (never the secret)
  revoke   stop a token: no more nodes join with it, the nodes it admitted must join again
"""

DEFAULT_TTL = "24h"
MAX_USES = 1_000_000


class UsageError(ValueError):
    """A bad argument; the message is printed after ``spur token: error:``."""


def parse_create_args(args: list[str]) -> tuple[float, int | None, str]:
    """``[--ttl D] [--uses N] [--description T]`` -> (ttl seconds, uses or None, description)."""
    from spur.core.admission import TokenFormatError, parse_duration

    ttl_text, uses, description = DEFAULT_TTL, None, ""
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name not in ("--ttl", "--uses", "--description"):
            raise UsageError(f"unknown option {arg!r} for create (see spur token --help)")
        if not eq:
            if i + 1 >= len(args):
                raise UsageError(f"{name} needs a value")
            value = args[i + 1]
            i += 1
        i += 1
        if name == "--ttl":
            ttl_text = value
        elif name == "--uses":
            if not value.isdigit() or not 1 <= int(value) <= MAX_USES:
                raise UsageError(f"invalid --uses {value!r}: expected a whole number from 1 to {MAX_USES}")
            uses = int(value)
        else:
            description = value
    try:
        ttl = parse_duration(ttl_text)
    except TokenFormatError as exc:
        raise UsageError(f"--ttl: {exc}") from None
    return ttl, uses, description


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts)) if ts else "never"


def format_table(tokens: list[Any]) -> str:
    """The ``spur token list`` table (TokenInfo messages)."""
    header = ("ID", "STATE", "USES_LEFT", "USED", "EXPIRES", "CREATED", "CREATOR", "DESCRIPTION")
    rows = [header]
    for t in tokens:
        rows.append(
            (
                t.id,
                t.state,
                str(t.uses_left) if t.HasField("uses_left") else "unlimited",
                str(t.used),
                _when(t.expires),
                _when(t.created),
                t.creator,
                t.description,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in rows
    )


def _admission_stub(stub: ControllerStub) -> ControllerStub:
    """The Admission service on the same connection as ``stub`` (a blocking or Trio controller stub)."""
    from spur.cli.client import service_stub
    from spur.rpc.proto import admission_pb2

    return service_stub(stub, admission_pb2.DESCRIPTOR.services_by_name["Admission"])


def _call(method: str, request: Any) -> Any:
    from spur.cli.client import with_controller

    async def body(stub: ControllerStub) -> Any:
        return await getattr(_admission_stub(stub), method)(request, timeout=30)

    return with_controller(body)


def main(args: list[str]) -> int:
    from spur.cli.client import CliError
    from spur.rpc.proto import admission_pb2 as apb

    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if args else 2
    verb, rest = args[0], args[1:]
    try:
        if verb == "create":
            ttl, uses, description = parse_create_args(rest)
            request = apb.CreateTokenRequest(ttl_secs=ttl, description=description)
            if uses is not None:
                request.uses = uses
            resp = _call("CreateToken", request)
            print(resp.token)
            info = resp.info
            uses_text = f"{info.uses_left} use(s)" if info.HasField("uses_left") else "unlimited uses"
            print(
                f"join token {info.id}: {uses_text}, expires {_when(info.expires)}. It is shown only now; "
                "give it to spurd with --join-token-file FILE (mode 0600) or [agent] join_token_file.",
                file=sys.stderr,
            )
            return 0
        if verb == "list":
            if rest:
                raise UsageError(f"list takes no arguments (got {rest[0]!r})")
            resp = _call("ListTokens", apb.ListTokensRequest())
            sys.stdout.write(format_table(list(resp.tokens)))
            return 0
        if verb == "revoke":
            if len(rest) != 1:
                raise UsageError("revoke takes one token id (see spur token list)")
            info = _call("RevokeToken", apb.RevokeTokenRequest(id=rest[0]))
            print(f"join token {info.id} revoked")
            return 0
    except UsageError as exc:
        print(f"spur token: error: {exc}", file=sys.stderr)
        return 2
    except CliError as exc:
        print(f"spur token: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(f"spur token: error: unknown command {verb!r} (expected create, list or revoke)", file=sys.stderr)
    return 2
