"""A client session per REST version against a real spurctld + spurd on loopback; every answer
(errors included, where the document declares their schema) is validated against that version's
unmodified document (slurmrestd 22.05's v0.0.38, 24.11's v0.0.40/41/42). The calls are made by a
Python client generated from that document at set-up (openapi-python-client, into a temporary
directory): each goes through the generated operation's own function, its body built as the
operation's typed request model, its answer parsed into the typed response models. Only a request the
typed client cannot express (a deliberately invalid flag) goes out as plain HTTP, and is counted."""

from __future__ import annotations

import enum
import getpass
import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, get_args, get_type_hints

import httpx
import pytest

from integration.harness import BIN, Cluster, wait_for
from spur.rest.conformance import DocumentValidator
from spur.rest.openapi import SENT_AS_NULL, VERSIONS, document

pytestmark = pytest.mark.integration
USER = getpass.getuser()
V4 = VERSIONS[1:]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(tmp_path_factory.mktemp("restv"))
    c.start_controller()
    c.wait_rest()
    c.start_agent("n1", cpus=4)
    c.wait_nodes("n1")
    yield c
    for proc in [*c.agents.values(), c.controller]:
        if proc is not None:
            proc.kill()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A client generated from each version's document, each its own package under one directory."""
    root = tmp_path_factory.mktemp("clients")
    tool = BIN / "openapi-python-client"
    assert tool.exists(), "openapi-python-client (dev extra) is not installed"
    for version in VERSIONS:
        out = root / _package(version)
        proc = subprocess.run(
            [str(tool), "generate", "--path", str(Path(document_path(version))), "--output-path", str(out),
             "--meta", "none"],
            capture_output=True, text=True, timeout=300, cwd=root,
        )  # fmt: skip
        assert proc.returncode == 0 and (out / "client.py").exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    shutil.rmtree(root, ignore_errors=True)


def document_path(version: str) -> str:
    from importlib import resources

    return str(resources.files("spur.rest").joinpath(f"slurmrestd-openapi-{version}.json"))


def _package(version: str) -> str:
    return "spurgen_" + version.replace(".", "_")


class Checked:
    """A client of one version whose every call goes through the operation's function in the client
    generated from that version's document (when one was generated), and whose every answer is
    validated against the document and parsed by the generated client."""

    def __init__(self, base: str, version: str, generated: Path | None = None) -> None:
        self.client = httpx.Client(base_url=base, headers={"X-SLURM-USER-NAME": USER}, timeout=30)
        self.validator = DocumentValidator(document(version), SENT_AS_NULL[version])
        self.version = version
        self.checked = 0
        self.parsed = 0
        self.unmodelled = 0
        self.typed_calls = 0  # made through a generated operation's function
        self.ungenerated_calls = 0  # to operations the generator could not generate (its warnings)
        self.plain_calls = 0  # values the generated function cannot express (see ``typed_call``)
        self.generated = generated

    def __call__(self, method: str, path: str, **kw: Any) -> httpx.Response:
        r = self.request(method, path, **kw)
        assert r.status_code < 500, r.text
        errors = self.validator.errors(method, path, r.status_code, r.json())
        assert errors == [], (method, path, r.status_code, errors[:5])
        meta = r.json()["meta"]
        assert meta["plugin"]["data_parser"] == f"data_parser/{self.version}"
        self.checked += 1
        if self.generated is not None and r.status_code < 400:
            self.parse(method, path, r)
        return r

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """The call through the generated client where it can make it, else as plain HTTP."""
        r = self.typed_call(method, path, **kw) if self.generated is not None else None
        if r is None:
            r = self.client.request(method, path, **kw)
        return r

    def _operation(self, method: str, path: str) -> tuple[str, ModuleType | None]:
        from spur.rest.conformance import find_operation

        template, op = find_operation(document(self.version), method, path)
        tag = op.get("tags", ["slurm"])[0]
        try:
            return template, importlib.import_module(f"{_package(self.version)}.api.{tag}.{op['operationId']}")
        except ModuleNotFoundError:
            return template, None  # openapi-python-client could not generate it (its warning at set-up)

    def typed_call(self, method: str, path: str, **kw: Any) -> httpx.Response | None:
        """Call the generated operation's ``sync_detailed`` with the path's parameters, ``params`` as its
        typed query arguments and ``json`` as its typed request model; None when the operation was not
        generated or a value has no typed form (an unknown flag: the typed client cannot send it)."""
        template, module = self._operation(method, path)
        if module is None:
            self.ungenerated_calls += 1
            return None
        fn = module.sync_detailed
        hints = get_type_hints(fn)
        names = re.findall(r"{(\w+)}", template)
        pattern = "^" + re.sub(r"\\{\w+\\}", "([^/]+)", re.escape(template.rstrip("/"))) + "/?$"
        m = re.match(pattern, path.split("?", 1)[0])
        assert m, (template, path)
        args: dict[str, Any] = dict(zip(names, m.groups(), strict=True))
        for name, value in (kw.get("params") or {}).items():
            typed = _typed(hints.get(name), value)
            if typed is None:
                self.plain_calls += 1
                return None
            args[name] = typed
        if "json" in kw:
            model = next(t for t in get_args(hints["body"]) or (hints["body"],) if hasattr(t, "from_dict"))
            args["body"] = model.from_dict(kw["json"])
        client_mod = importlib.import_module(f"{_package(self.version)}.client")
        client = client_mod.Client(base_url=str(self.client.base_url), headers={"X-SLURM-USER-NAME": USER},
                                   timeout=httpx.Timeout(30), raise_on_unexpected_status=False)  # fmt: skip
        answer = fn(client=client, **args)
        self.typed_calls += 1
        return httpx.Response(
            int(answer.status_code), content=answer.content, headers=answer.headers,
            request=httpx.Request(method, f"{self.client.base_url}{path}"),
        )  # fmt: skip

    def parse(self, method: str, path: str, r: httpx.Response) -> None:
        """The generated operation's response parser on ``r``: typed models, then back to a dict."""
        _, module = self._operation(method, path)
        if module is None:
            return
        client_mod = importlib.import_module(f"{_package(self.version)}.client")
        client = client_mod.Client(base_url=str(self.client.base_url))
        model = module._parse_response(client=client, response=r)
        if model is None:  # the generator made no model for this answer (its warning at set-up)
            self.unmodelled += 1
            return
        assert model.to_dict() is not None, (method, path)
        self.parsed += 1


def _typed(hint: Any, value: str) -> Any:
    """``value`` as the generated function's argument type ``hint`` (``str | Unset``, an enum of flags
    ``| Unset``); None when it has no such form."""
    if hint is None:
        return None
    for t in get_args(hint) or (hint,):
        if isinstance(t, type) and issubclass(t, enum.Enum):
            try:
                return t(value)
            except ValueError:
                return None
        if t is str:
            return value
    return None


def _job(api: Checked, S: str, job_id: int) -> dict[str, Any]:
    return api("GET", f"{S}/job/{job_id}").json()["jobs"][0]


def _state(api: Checked, S: str, job_id: int) -> str:
    return _job(api, S, job_id)["job_state"][0]


def _submit(api: Checked, S: str, cwd: Path, script: str, **job: Any) -> dict[str, Any]:
    job.setdefault("environment", ["PATH=/usr/bin:/bin"])
    job.setdefault("current_working_directory", str(cwd))
    job["script"] = script
    r = api("POST", f"{S}/job/submit", json={"job": job})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("version", V4)
def test_a_client_session_validates_against_the_real_document(
    cluster: Cluster, generated: Path, tmp_path: Path, version: str
) -> None:
    api = Checked(f"http://127.0.0.1:{cluster.rest_port}", version, generated)
    S, D = f"/slurm/{version}", f"/slurmdb/{version}"
    ping = api("GET", f"{S}/ping/").json()["pings"]
    assert ping[0]["pinged"] == "UP" and ping[0]["mode"] == "primary"

    # submit with environment, working directory and output file; poll to COMPLETED
    answer = _submit(api, S, tmp_path, '#!/bin/sh\necho "hi $GREETING from $(pwd)"\n', name="v4",
                     environment=["PATH=/usr/bin:/bin", "GREETING=v4"], standard_output="out-%j.txt",
                     time_limit={"set": True, "infinite": False, "number": 5})  # fmt: skip
    job_id = answer["job_id"]
    assert answer["errors"] == [] and answer["step_id"] == "batch"
    wait_for(lambda: _state(api, S, job_id) == "COMPLETED", timeout=30, what="the job to complete")
    job = _job(api, S, job_id)
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 5} and job["name"] == "v4"
    assert job["exit_code"]["status"] == ["SUCCESS"] and job["current_working_directory"] == str(tmp_path)
    assert (tmp_path / f"out-{job_id}.txt").read_text() == f"hi v4 from {tmp_path}\n"
    db = api("GET", f"{D}/job/{job_id}").json()["jobs"][0]
    assert db["state"]["current"] == ["COMPLETED"] and db["job_id"] == job_id

    # held: a warning, as 24.11; update then release
    held = _submit(api, S, tmp_path, "#!/bin/sh\ntrue\n", name="held", hold=True)
    assert held["warnings"] and _state(api, S, held["job_id"]) == "PENDING"
    r = api("POST", f"{S}/job/{held['job_id']}", json={"comment": "updated", "time_limit": {"set": True, "number": 9}})
    assert r.status_code == 200, r.text
    assert _job(api, S, held["job_id"])["comment"] == "updated"
    assert _job(api, S, held["job_id"])["time_limit"]["number"] == 9
    api("POST", f"{S}/job/{held['job_id']}", json={"hold": False})
    wait_for(lambda: _state(api, S, held["job_id"]) == "COMPLETED", timeout=30, what="the released job")

    # signal then cancel a running job
    sleeper = _submit(api, S, tmp_path, "#!/bin/sh\ntrap 'echo usr1' USR1\necho ready\nwhile true; do sleep 0.2; done\n",
                      name="sleeper", standard_output="sl-%j.txt")["job_id"]  # fmt: skip
    wait_for(lambda: _state(api, S, sleeper) == "RUNNING", timeout=30, what="the sleeper to run")
    # the trap is set once "ready" is written (a USR1 before it would end the shell, as it would under Slurm)
    out = tmp_path / f"sl-{sleeper}.txt"
    wait_for(lambda: out.exists() and "ready" in out.read_text(), timeout=30, what="the sleeper's trap")
    # until the agent has launched it the controller answers 409 (try again): retry until delivered
    # as scancel: without BATCH_JOB (or FULL_JOB) a signal reaches only the steps, and this job has none
    assert api("DELETE", f"{S}/job/{sleeper}", params={"signal": "USR1", "flags": "NOPE"}).status_code == 400
    wait_for(lambda: api("DELETE", f"{S}/job/{sleeper}", params={"signal": "USR1", "flags": "BATCH_JOB"}).status_code == 200,
             timeout=30, what="the signal to be accepted")  # fmt: skip
    wait_for(lambda: "usr1" in (tmp_path / f"sl-{sleeper}.txt").read_text(), timeout=30, what="the signal")
    assert _state(api, S, sleeper) == "RUNNING"
    assert api("DELETE", f"{S}/job/{sleeper}").status_code == 200
    wait_for(lambda: _state(api, S, sleeper) == "CANCELLED", timeout=30, what="the cancel")

    # an array and a dependency on it
    arr = _submit(api, S, tmp_path, "#!/bin/sh\ntrue\n", name="arr", array="1-3")["job_id"]
    dep = _submit(api, S, tmp_path, "#!/bin/sh\ntrue\n", name="dep", dependency=f"afterok:{arr}")["job_id"]
    wait_for(lambda: _state(api, S, dep) == "COMPLETED", timeout=60, what="the dependent job")
    tasks = [j for j in api("GET", f"{S}/jobs/").json()["jobs"] if j["array_job_id"]["number"] == arr]
    assert sorted(j["array_task_id"]["number"] for j in tasks) == [1, 2, 3]
    assert all(j["job_state"] == ["COMPLETED"] for j in tasks)

    # nodes, partitions and the rest of the read operations
    nodes = api("GET", f"{S}/nodes/").json()["nodes"]
    assert [n["name"] for n in nodes] == ["n1"] and nodes[0]["cpus"] == 4
    assert api("GET", f"{S}/node/n1").json()["nodes"][0]["name"] == "n1"
    parts = api("GET", f"{S}/partitions/").json()["partitions"]
    assert parts[0]["nodes"]["configured"] == "n1" and parts[0]["cpus"]["total"] == 4
    assert api("GET", f"{S}/partition/{parts[0]['name']}").json()["partitions"][0]["name"] == parts[0]["name"]
    for path in ("diag/", "licenses/", "reservations/", "shares", "jobs/state/"):
        assert api("GET", f"{S}/{path}").status_code == 200, path
    for path in ("jobs/", "diag/", "config", "tres/"):
        assert api("GET", f"{D}/{path}").status_code == 200, path

    # slurmdb entities: create, modify, list, delete
    acct = f"acct{version[-2:]}"
    r = api("POST", f"{D}/accounts/", json={"accounts": [{"name": acct, "description": "d1", "organization": "o"}]})
    assert r.status_code == 200, r.text
    assert api("GET", f"{D}/account/{acct}").json()["accounts"][0]["description"] == "d1"
    r = api("POST", f"{D}/accounts/", json={"accounts": [{"name": acct, "description": "d2", "organization": "o"}]})
    assert r.status_code == 200, r.text
    assert api("GET", f"{D}/account/{acct}").json()["accounts"][0]["description"] == "d2"
    # (the document requires "user": the user record's defaults, here none)
    r = api("POST", f"{D}/users_association/",
            json={"association_condition": {"users": [f"u{version[-2:]}"], "accounts": [acct]}, "user": {}})  # fmt: skip
    assert r.status_code == 200 and r.json()["added_users"] == f"u{version[-2:]}", r.text
    assocs = api("GET", f"{D}/associations/", params={"account": acct}).json()["associations"]
    assert {a["user"] for a in assocs} >= {f"u{version[-2:]}"}
    r = api("DELETE", f"{D}/associations/", params={"account": acct, "user": f"u{version[-2:]}"})
    assert r.status_code == 200, r.text
    assert api("DELETE", f"{D}/user/u{version[-2:]}").status_code == 200
    assert api("DELETE", f"{D}/account/{acct}").status_code == 200
    assert api("GET", f"{D}/account/{acct}").status_code == 404

    # job/allocate (v0.0.41+): an allocation without a script, then cancelled
    if version != "v0.0.40":
        r = api("POST", f"{S}/job/allocate", json={"job": {"name": "alloc", "current_working_directory": str(tmp_path),
                                                            "environment": ["PATH=/bin"]}})  # fmt: skip
        assert r.status_code == 200, r.text
        alloc = r.json()["job_id"]
        wait_for(lambda: _state(api, S, alloc) == "RUNNING", timeout=30, what="the allocation")
        assert _job(api, S, alloc)["batch_flag"] is False
        assert api("DELETE", f"{S}/job/{alloc}").status_code == 200
        wait_for(lambda: _state(api, S, alloc) == "CANCELLED", timeout=30, what="the allocation's end")
    else:
        assert api.client.post(f"{S}/job/allocate", json={}).status_code == 404  # not in v0.0.40

    # node update: drain with a reason, then resume; reconfigure
    r = api("POST", f"{S}/node/n1", json={"state": ["DRAIN"], "reason": "rest test"})
    assert r.status_code == 200, r.text
    node = api("GET", f"{S}/node/n1").json()["nodes"][0]
    assert "DRAIN" in node["state"] and node["reason"] == "rest test"
    assert api("POST", f"{S}/node/n1", json={"state": ["RESUME"]}).status_code == 200
    assert "DRAIN" not in api("GET", f"{S}/node/n1").json()["nodes"][0]["state"]
    assert api("GET", f"{S}/reconfigure/").status_code == 200

    # errors: 24.11's numbers, the version's meta, nothing changed
    before = len(api("GET", f"{S}/jobs/").json()["jobs"])
    missing = api("GET", f"{S}/job/999999")
    assert missing.status_code == 404 and missing.json()["errors"][0]["error_number"] == 2017
    bad = api("POST", f"{S}/job/submit", json={"job": {"name": "x", "current_working_directory": "/tmp"}})
    assert bad.status_code == 422 and bad.json()["errors"][0]["error_number"] == 9000
    nope = api("POST", f"{S}/job/submit", json={"job": {"script": "no shebang", "environment": []}})
    assert nope.status_code == 400 and nope.json()["errors"][0]["error_number"] == 2009
    assert len(api("GET", f"{S}/jobs/").json()["jobs"]) == before
    unknown = httpx.get(f"http://127.0.0.1:{cluster.rest_port}{S}/nonesuch", headers={"X-SLURM-USER-NAME": USER})
    assert unknown.status_code == 404 and unknown.json()["meta"]["plugin"]["data_parser"] == f"data_parser/{version}"
    print(f"{version}: {api.checked} answers validated, {api.typed_calls} calls made by the generated client "
          f"({api.ungenerated_calls} to operations it lacks, {api.plain_calls} it cannot express), "
          f"{api.parsed} answers parsed by it, {api.unmodelled} without a generated model")  # fmt: skip
    assert api.checked > 30 and api.parsed > 10, (api.checked, api.parsed, api.unmodelled)
    # Only the deliberately unknown flag went out as plain HTTP beside the operations not generated.
    counts = (api.typed_calls, api.ungenerated_calls, api.plain_calls)
    assert api.plain_calls == 1 and api.typed_calls + api.ungenerated_calls + 1 == api.checked, counts
    assert api.typed_calls > api.checked // 2, counts


def test_v0038_session_validates_against_the_unmodified_22_05_document(
    cluster: Cluster, generated: Path, tmp_path: Path
) -> None:
    api = Checked(f"http://127.0.0.1:{cluster.rest_port}", "v0.0.38", generated)
    api.validator = DocumentValidator(document("v0.0.38"), SENT_AS_NULL["v0.0.38"])
    S = "/slurm/v0.0.38"

    def call(method: str, path: str, **kw: Any) -> httpx.Response:
        r = api.request(method, path, **kw)
        if r.status_code < 400:  # 22.05 declares its error answers as a bare array; it sends an object
            assert api.validator.errors(method, path, r.status_code, r.json()) == [], (path, r.text[:300])
            api.parse(method, path, r)
        return r

    r = call("POST", f"{S}/job/submit", json={"script": "#!/bin/sh\ntrue\n", "job": {
        "environment": {"PATH": "/bin"}, "current_working_directory": str(tmp_path), "cpus_per_task": 2}})  # fmt: skip
    job_id = r.json()["job_id"]
    wait_for(lambda: call("GET", f"{S}/job/{job_id}").json()["jobs"][0]["job_state"] == "COMPLETED",
             timeout=30, what="the job")  # fmt: skip
    job = call("GET", f"{S}/job/{job_id}").json()["jobs"][0]
    assert job["cpus_per_task"] == "2"  # the document declares a string
    for path in ("jobs", "nodes", "partitions", "ping", "diag", "licenses", "reservations", "node/n1"):
        assert call("GET", f"{S}/{path}").status_code == 200, path
    for path in ("jobs", "diag", "config", f"job/{job_id}"):
        assert call("GET", f"/slurmdb/v0.0.38/{path}").status_code == 200, path
    assert api.parsed >= 12 and api.plain_calls == 0 and api.typed_calls >= 12, (api.parsed, api.typed_calls)
