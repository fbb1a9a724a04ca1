"""PMI-1 and PMI-2 wire protocols, sans I/O: what a step launcher says to its local MPI ranks.

A rank finds its server through ``PMI_FD`` and first sends a PMI-1 line ``cmd=init pmi_version=V
pmi_subversion=S``. PMI-1 (MPICH's "simple PMI") then continues in ``key=value`` lines separated by
spaces; PMI-2 continues in frames of a 6-digit decimal length followed by ``key=value;`` pairs, a
``;`` inside a value doubled.

:class:`RankSession` is one rank's connection: feed it bytes with :meth:`RankSession.receive`, get
:class:`Reply`, :class:`Fence` and :class:`Abort` actions back; once the launcher has merged every
rank's (and node's) puts, :meth:`RankSession.fence_done` gives the reply that releases the rank.

Between nodes (direct launch, ``srun --mpi=pmi2``) every node's launcher sends its local ranks' puts
to one :class:`FenceCoordinator` (served by srun) as JSON lines (:func:`encode_node_message`,
:func:`decode_node_message`); the coordinator answers every node once all ``size`` ranks have entered
the same fence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = [
    "Abort",
    "Fence",
    "FenceCoordinator",
    "PmiError",
    "RankInfo",
    "RankSession",
    "Reply",
    "decode_node_message",
    "decode_pmi2",
    "encode_node_message",
    "encode_pmi1",
    "encode_pmi2",
    "parse_pmi1",
    "process_mapping",
]


class PmiError(ValueError):
    """A message that is not valid PMI; the connection cannot continue."""


def parse_pmi1(line: str) -> dict[str, str]:
    """One PMI-1 line (without its newline) as a dict."""
    out: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise PmiError(f"PMI-1: {word!r} is not key=value")
        out[key] = value
    if "cmd" not in out and "mcmd" not in out:
        raise PmiError(f"PMI-1: no cmd in {line!r}")
    return out


def encode_pmi1(fields: dict[str, str]) -> bytes:
    return (" ".join(f"{k}={v}" for k, v in fields.items()) + "\n").encode()


def _split_pmi2(body: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    i, n = 0, len(body)
    while i < n:
        eq = body.find("=", i)
        if eq < 0:
            raise PmiError(f"PMI-2: {body[i:]!r} is not key=value")
        key = body[i:eq]
        j, value = eq + 1, []
        while j < n:
            if body[j] == ";":
                if j + 1 < n and body[j + 1] == ";":
                    value.append(";")
                    j += 2
                    continue
                break
            value.append(body[j])
            j += 1
        if j >= n:
            raise PmiError("PMI-2: a pair does not end with ';'")
        pairs.append((key, "".join(value)))
        i = j + 1
    return pairs


def decode_pmi2(buffer: bytes) -> tuple[list[list[tuple[str, str]]], bytes]:
    """The complete PMI-2 frames at the start of ``buffer`` (as ordered pairs) and what is left."""
    frames = []
    while len(buffer) >= 6:
        head = buffer[:6]
        if not head.isdigit():
            raise PmiError(f"PMI-2: bad length prefix {head!r}")
        size = int(head)
        if len(buffer) < 6 + size:
            break
        frames.append(_split_pmi2(buffer[6 : 6 + size].decode()))
        buffer = buffer[6 + size :]
    return frames, buffer


def encode_pmi2(pairs: list[tuple[str, str]]) -> bytes:
    body = "".join(f"{k}={v.replace(';', ';;')};" for k, v in pairs).encode()
    if len(body) > 999_999:
        raise PmiError("PMI-2: message too long")
    return b"%06d" % len(body) + body


def process_mapping(tasks_per_node: list[int]) -> str:
    """MPICH's ``PMI_process_mapping`` for ranks placed in blocks, node by node: ``(vector,(0,2,2))``
    says "from node 0, 2 nodes with 2 ranks each". Runs of equal counts share one triple."""
    triples: list[list[int]] = []
    for node, count in enumerate(tasks_per_node):
        if triples and triples[-1][2] == count:
            triples[-1][1] += 1
        else:
            triples.append([node, 1, count])
    return "(vector," + ",".join(f"({a},{b},{c})" for a, b, c in triples) + ")"


@dataclass(frozen=True)
class RankInfo:
    rank: int
    size: int
    jobid: str  # the KVS name (Slurm: "JOBID.STEPID")
    appnum: int = 0
    # Job attributes the launcher knows before any put (PMI_process_mapping): PMI-2 info-getjobattr,
    # and PMI-1 get, which sees them as keys of the KVS.
    attrs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Reply:
    data: bytes


@dataclass(frozen=True)
class Fence:
    """The rank entered a fence (PMI-2 kvs-fence, PMI-1 barrier_in) with these puts since the last."""

    puts: dict[str, str]


@dataclass(frozen=True)
class Abort:
    code: int
    message: str


Action = Reply | Fence | Abort


@dataclass
class RankSession:
    """One rank's PMI connection (see the module docstring)."""

    info: RankInfo
    version: int = 0  # 0 until init, then 1 or 2
    finalized: bool = False
    kvs: dict[str, str] = field(default_factory=dict)  # the job's KVS as of the last fence
    _pending: dict[str, str] = field(default_factory=dict)
    _buffer: bytes = b""

    def receive(self, data: bytes) -> list[Action]:
        """Actions for the bytes read from the rank; PmiError for a protocol violation."""
        self._buffer += data
        actions: list[Action] = []
        while True:
            if self.version == 2:
                frames, self._buffer = decode_pmi2(self._buffer)
                for pairs in frames:
                    actions.extend(self._pmi2(dict(pairs)))
                return actions
            line, sep, rest = self._buffer.partition(b"\n")
            if not sep:
                return actions
            self._buffer = rest
            actions.extend(self._pmi1(parse_pmi1(line.decode())))

    def __post_init__(self) -> None:
        for key, value in self.info.attrs:
            self.kvs.setdefault(key, value)

    def fence_done(self, merged: dict[str, str]) -> Reply:
        """``merged``: every rank's puts of this fence. The reply that ends the rank's fence."""
        self.kvs.update(merged)
        if self.version == 2:
            return Reply(encode_pmi2([("cmd", "kvs-fence-response"), ("rc", "0")]))
        return Reply(encode_pmi1({"cmd": "barrier_out", "rc": "0"}))

    def _fence(self) -> Fence:
        puts, self._pending = self._pending, {}
        return Fence(puts)

    def _pmi1(self, msg: dict[str, str]) -> list[Action]:
        cmd, info = msg.get("cmd", ""), self.info
        if cmd == "init":
            version = msg.get("pmi_version", "1")
            if version not in ("1", "2"):
                return [Reply(encode_pmi1({"cmd": "response_to_init", "rc": "-1"}))]
            self.version = int(version)
            sub = "0" if version == "2" else "1"
            return [
                Reply(
                    encode_pmi1(
                        {"cmd": "response_to_init", "pmi_version": version, "pmi_subversion": sub, "rc": "0"}
                    )
                )
            ]
        if self.version != 1:
            raise PmiError(f"PMI: {cmd!r} before init")
        if cmd == "get_maxes":
            return [
                Reply(
                    encode_pmi1(
                        {
                            "cmd": "maxes",
                            "rc": "0",
                            "kvsname_max": "256",
                            "keylen_max": "256",
                            "vallen_max": "1024",
                        }
                    )
                )
            ]
        if cmd == "get_appnum":
            return [Reply(encode_pmi1({"cmd": "appnum", "rc": "0", "appnum": str(info.appnum)}))]
        if cmd == "get_my_kvsname":
            return [Reply(encode_pmi1({"cmd": "my_kvsname", "rc": "0", "kvsname": info.jobid}))]
        if cmd == "get_universe_size":
            return [Reply(encode_pmi1({"cmd": "universe_size", "rc": "0", "size": str(info.size)}))]
        if cmd == "put":
            self._pending[msg.get("key", "")] = msg.get("value", "")
            return [Reply(encode_pmi1({"cmd": "put_result", "rc": "0"}))]
        if cmd == "barrier_in":
            return [self._fence()]
        if cmd == "get":
            key = msg.get("key", "")
            if key in self.kvs:
                return [Reply(encode_pmi1({"cmd": "get_result", "rc": "0", "value": self.kvs[key]}))]
            return [Reply(encode_pmi1({"cmd": "get_result", "rc": "-1", "msg": "key_not_found"}))]
        if cmd == "finalize":
            self.finalized = True
            return [Reply(encode_pmi1({"cmd": "finalize_ack", "rc": "0"}))]
        if cmd == "abort":
            return [Abort(int(msg.get("exitcode", "1") or 1), msg.get("msg", "") or "")]
        return [Reply(encode_pmi1({"cmd": cmd or "unknown", "rc": "-1", "msg": "unsupported"}))]

    def _pmi2(self, msg: dict[str, str]) -> list[Action]:
        cmd, info = msg.get("cmd", ""), self.info

        def reply(name: str, *pairs: tuple[str, str]) -> list[Action]:
            return [Reply(encode_pmi2([("cmd", name), ("rc", "0"), *pairs]))]

        if cmd == "fullinit":
            return reply(
                "fullinit-response",
                ("pmi-version", "2"),
                ("pmi-subversion", "0"),
                ("rank", str(info.rank)),
                ("size", str(info.size)),
                ("appnum", str(info.appnum)),
                ("spawner-jobid", info.jobid),
                ("debugged", "FALSE"),
                ("pmiverbose", "FALSE"),
            )
        if cmd == "job-getid":
            return reply("job-getid-response", ("jobid", info.jobid))
        if cmd == "kvs-put":
            self._pending[msg.get("key", "")] = msg.get("value", "")
            return reply("kvs-put-response")
        if cmd == "kvs-fence":
            return [self._fence()]
        if cmd == "kvs-get":
            key = msg.get("key", "")
            if key in self.kvs:
                return reply("kvs-get-response", ("found", "TRUE"), ("value", self.kvs[key]))
            return reply("kvs-get-response", ("found", "FALSE"))
        if cmd == "info-getjobattr":
            value = dict(info.attrs).get(msg.get("key", ""))
            if value is not None:
                return reply("info-getjobattr-response", ("found", "TRUE"), ("value", value))
            return reply("info-getjobattr-response", ("found", "FALSE"))
        if cmd == "info-getnodeattr":
            return reply("info-getnodeattr-response", ("found", "FALSE"))
        if cmd == "info-putnodeattr":
            return reply("info-putnodeattr-response")
        if cmd == "finalize":
            self.finalized = True
            return reply("finalize-response")
        if cmd == "abort":
            return [Abort(1, msg.get("message", ""))]
        return [Reply(encode_pmi2([("cmd", f"{cmd}-response"), ("rc", "-1"), ("errmsg", "unsupported")]))]


def encode_node_message(message: dict[str, object]) -> bytes:
    """One launcher <-> coordinator message: a JSON object on one line."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode_node_message(line: bytes) -> dict[str, object]:
    """The message of one line; PmiError when it is not a JSON object."""
    try:
        message = json.loads(line)
    except ValueError:
        raise PmiError("fence: a message is not JSON") from None
    if not isinstance(message, dict):
        raise PmiError("fence: a message is not a JSON object")
    return message


@dataclass
class FenceCoordinator:
    """The step-wide side of a fence: nodes send the puts of their ranks with how many ranks entered;
    once ``size`` ranks of one fence arrived, the merged puts go back to every node.

    :meth:`arrive` returns the merged KVS delta when this arrival completes the fence, else None. A
    fence number counts from 0 on every node, so nodes can never mix two fences.
    """

    size: int
    _ranks: dict[int, int] = field(default_factory=dict)
    _puts: dict[int, dict[str, str]] = field(default_factory=dict)

    def arrive(self, fence: int, ranks: int, puts: dict[str, str]) -> dict[str, str] | None:
        if ranks <= 0 or fence < 0:
            raise PmiError(f"fence: {ranks} ranks at fence {fence}")
        total = self._ranks.get(fence, 0) + ranks
        if total > self.size:
            raise PmiError(f"fence {fence}: {total} ranks arrived, the step has {self.size}")
        self._ranks[fence] = total
        self._puts.setdefault(fence, {}).update(puts)
        if total < self.size:
            return None
        del self._ranks[fence]
        return self._puts.pop(fence)
