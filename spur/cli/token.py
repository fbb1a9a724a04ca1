"""``spur token`` and ``scontrol token``: mint a JWT through the controller and print ``SLURM_JWT=<token>``.

``spur token [--username NAME] [--lifespan SECONDS] [--admin]`` (the bare form) mirrors Slurm's
``scontrol token [username=NAME] [lifespan=SECONDS]``. A token for another user needs an administrator;
the caller's own credential (e.g. from the local credential broker) proves who is asking. ``spur
token`` also prints the new token's id on stderr (``scontrol token`` prints Slurm's one line only);
``spur token id [TOKEN]`` prints the id of a token (default ``$SLURM_JWT``).

Revocation: ``scontrol token revoke ID|TOKEN`` and ``spur token revoke ID|TOKEN`` put a user token on
the cluster's deny-list: an administrator by id, anyone by passing its own token. ``spur token
revoke`` of a node join token id (six hex digits) revokes that join token instead, and the subcommands
``create|list`` manage join tokens (``spur.cli.node_tokens``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

from cyclopts import App, Parameter

from spur.cli.client import CliError, with_controller

if TYPE_CHECKING:
    from spur.cli.client import ControllerStub

__all__ = ["app", "main", "mint_token", "scontrol_token"]

app = App(
    name="spur token", help="Mint an authentication token (SLURM_JWT) for yourself or, as admin, others."
)


def mint_token(username: str = "", lifespan: int = 0, admin: bool = False, *, with_id: bool = False) -> Any:
    """Ask the controller for a token; returns the line to print (and, ``with_id``, the token id).
    Raises CliError."""
    from spur.rpc.proto import auth_pb2

    request = auth_pb2.MintTokenRequest(username=username, lifespan_secs=lifespan, admin=admin)

    def body(stub: ControllerStub) -> Any:
        return _auth_stub(stub).MintToken(request, timeout=30)

    response = with_controller(body)
    line = f"SLURM_JWT={response.token}"
    return (line, response.token_id) if with_id else line


def token_id(token: str) -> str | None:
    """The ``jti`` of ``token`` read without verifying it (no PyJWT: just base64 and JSON), or None."""
    import base64
    import json

    parts = token.strip().split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    value = payload.get("jti") if isinstance(payload, dict) else None
    return value if isinstance(value, str) and value else None


def is_join_token(text: str) -> bool:
    """A node join token id (six hex digits) or a whole join token (``<id>.<secret>``); a user
    token's id is 32 hex digits and a JWT has two dots."""
    head = text.strip().split(".", 1)[0].lower()
    return len(head) == 6 and all(ch in "0123456789abcdef" for ch in head) and text.count(".") <= 1


def revoke_token(what: str) -> str:
    """Revoke a user token by id (administrators) or by the token itself; returns the line to print.
    Raises CliError."""
    from spur.rpc.proto import auth_pb2

    what = what.strip()
    if what.count(".") == 2:  # a JWT: revoke it by presenting it
        request = auth_pb2.RevokeTokenRequest(token=what)
    else:
        request = auth_pb2.RevokeTokenRequest(token_id=what)

    def body(stub: ControllerStub) -> Any:
        return _auth_stub(stub).RevokeToken(request, timeout=30)

    response = with_controller(body)
    return f"token {response.token_id} revoked"


def _auth_stub(controller_stub: ControllerStub) -> ControllerStub:
    """An Auth-service stub on the same connection as ``controller_stub`` (blocking or Trio)."""
    from spur.cli.client import service_stub
    from spur.rpc.proto import auth_pb2

    return service_stub(controller_stub, auth_pb2.DESCRIPTOR.services_by_name["Auth"])


@app.default
def mint(
    *,
    username: Annotated[str, Parameter(help="user the token is for (default: you; others need admin)")] = "",
    lifespan: Annotated[int, Parameter(help="seconds the token is valid (default: auth.token_ttl_secs)")] = 0,
    admin: Annotated[bool, Parameter(help="an admin token (admin: true claim; administrators only)")] = False,
) -> int:
    """Mint a token and print SLURM_JWT=<token> (export it to authenticate later calls)."""
    if lifespan < 0:
        print("spur token: error: --lifespan must be a positive number of seconds", file=sys.stderr)
        return 1
    try:
        line, tid = mint_token(username, lifespan, admin, with_id=True)
    except CliError as exc:
        print(f"spur token: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(line)
    if tid:
        print(f"spur token: token id {tid} (revoke it with: spur token revoke {tid})", file=sys.stderr)
    return 0


def _revoke_main(args: list[str], prog: str) -> int:
    if len(args) != 1 or not args[0].strip():
        print(f"{prog}: error: revoke takes one token id or the token itself", file=sys.stderr)
        return 2
    try:
        print(revoke_token(args[0]))
    except CliError as exc:
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    return 0


def _id_main(args: list[str]) -> int:
    import os

    if len(args) > 1:
        print("spur token: error: id takes at most one token (default: $SLURM_JWT)", file=sys.stderr)
        return 2
    token = args[0] if args else os.environ.get("SLURM_JWT", "")
    if not token.strip():
        print("spur token: error: no token given and SLURM_JWT is not set", file=sys.stderr)
        return 2
    found = token_id(token)
    if found is None:
        print("spur token: error: the token carries no id (jti claim) or is not a JWT", file=sys.stderr)
        return 1
    print(found)
    return 0


def scontrol_token(args: list[str]) -> int:
    """``scontrol token [username=NAME] [lifespan=SECONDS]`` and ``scontrol token revoke ID|TOKEN``."""
    if args[:1] == ["revoke"]:
        return _revoke_main(args[1:], "scontrol")
    username, lifespan = "", 0
    for arg in args:
        key, sep, value = arg.partition("=")
        key = key.lower()
        if not sep or key not in ("username", "lifespan"):
            print(f"scontrol: error: Invalid token argument: {arg}", file=sys.stderr)
            return 1
        if key == "username":
            username = value
        elif not value.isdigit() or int(value) == 0:
            print(f"scontrol: error: Invalid lifespan value: {value}", file=sys.stderr)
            return 1
        else:
            lifespan = int(value)
    try:
        print(mint_token(username, lifespan))
    except CliError as exc:
        print(f"scontrol: error: Unable to fetch token: {exc.message}", file=sys.stderr)
        return exc.exit_code
    return 0


NODE_TOKEN_VERBS = {
    "create": "Create a node join token (admin): --ttl 24h, --uses N, --description TEXT.",
    "list": "List node join tokens (admin): id, state, uses, expiry; never the secret.",
    "revoke": "Revoke a user token (by id: admin; or pass your own token) or a node join token by id "
    "(admin; the nodes it admitted must join again).",
}


SUBCOMMANDS = {**NODE_TOKEN_VERBS, "id": "Print the id of a token (default: $SLURM_JWT), for revoke."}
USAGE = "Usage: spur token [OPTIONS...] | spur token create|list|revoke|id [ARGS...]"


def option_docs():  # -> list[OptionDoc]
    """The option table of the bare form (behind --help, --usage, man pages and completion)."""
    from spur.cli.cmdinfo import OptionDoc

    return [
        OptionDoc(
            "username", None, "required", "NAME", "user the token is for (default: you; others need admin)"
        ),
        OptionDoc(
            "lifespan",
            None,
            "required",
            "SECONDS",
            "seconds the token is valid (default: auth.token_ttl_secs)",
        ),
        OptionDoc("admin", None, help="an admin token (admin: true claim; administrators only)"),
    ]


def _node_token_command(verb: str) -> Any:
    def command(*args: Annotated[str, Parameter(allow_leading_hyphen=True)]) -> int:
        from spur.cli import node_tokens

        return node_tokens.main([verb, *args])

    command.__doc__ = NODE_TOKEN_VERBS[verb]
    return command


for _verb in NODE_TOKEN_VERBS:
    app.command(_node_token_command(_verb), name=_verb)


def main(args: list[str]) -> int:
    if args[:1] and args[0] in ("-h", "--help", "--usage", "-V", "--version"):
        from spur.cli.cmdinfo import handle_meta

        return handle_meta("token", "--help" if args[0] == "-h" else args[0])
    if args[:1] == ["id"]:
        return _id_main(args[1:])
    if args[:1] == ["revoke"] and len(args) == 2 and not is_join_token(args[1]):
        return _revoke_main(args[1:], "spur token")  # a user token (id or JWT)
    if args[:1] and args[0] in NODE_TOKEN_VERBS:  # straight to the node-token module: no cyclopts parsing
        from spur.cli import node_tokens

        return node_tokens.main(args)
    if args[:1] and not args[0].startswith("-") and args[0] != "help":
        print(
            f"spur token: error: unknown command {args[0]!r} (commands: create, list, revoke, id; "
            "'spur token' alone mints a token)",
            file=sys.stderr,
        )
        return 2
    result = app(args, result_action="return_value")
    return int(result) if isinstance(result, int) else 0
