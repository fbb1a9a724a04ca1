"""Accounting: the account tree with fair share and usage (sshare's rows), each association's limits
(sacctmgr's) and how many pending jobs its limits hold back (squeue's Assoc*/QOS* reasons)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from spur.rest.errors import RestError
from spur.rpc.proto import accounting_pb2 as apb
from spur.rpc.proto import spur_pb2 as pb
from spur.ui.context import ViewContext
from spur.ui.reasons import explain_reason

TEMPLATE = "accounting.html"
LIMIT_FIELDS = (("grptres", "GrpTRES"), ("grpjobs", "GrpJobs"), ("maxjobs", "MaxJobs"), ("maxwall", "MaxWall"),
                ("maxtres", "MaxTRES"), ("maxsubmit", "MaxSubmit"))  # fmt: skip


def held_back(jobs: Iterable[pb.JobInfo]) -> tuple[Counter[tuple[str, str]], Counter[str]]:
    """Pending jobs held by an association or QOS limit, by (account, user) and by reason."""
    by_assoc: Counter[tuple[str, str]] = Counter()
    by_reason: Counter[str] = Counter()
    for j in jobs:
        if j.state == "PENDING" and j.reason.startswith(("Assoc", "QOS")):
            by_assoc[(j.spec.account, j.user)] += 1
            by_assoc[(j.spec.account, "")] += 1
            by_reason[j.reason] += 1
    return by_assoc, by_reason


async def load(ctx: ViewContext) -> dict[str, Any]:
    try:
        shares = (await ctx.acct_call("Shares", apb.SharesRequest(all_users=True))).records
        assocs = (await ctx.acct_call("Show", apb.AcctShowRequest(entity="association"))).records
    except RestError as exc:
        if exc.status in (401, 403):
            raise
        return {"rows": [], "unavailable": exc.entry().get("description", str(exc)), "reasons": []}
    limits = {(r.fields.get("account", ""), r.fields.get("user", "")): r.fields for r in assocs}
    jobs = (await ctx.call("GetJobs", pb.GetJobsRequest(states=["PENDING"]))).jobs
    by_assoc, by_reason = held_back(jobs)
    rows = []
    for rec in shares:
        f = rec.fields
        account_text = f.get("account", "")
        account, user = account_text.strip(), f.get("user", "")
        lim = limits.get((account, user), {})
        rows.append({
            "depth": len(account_text) - len(account_text.lstrip(" ")), "account": account, "user": user,
            "rawshares": f.get("rawshares", ""), "normshares": f.get("normshares", ""),
            "rawusage": f.get("rawusage", ""), "effectvusage": f.get("effectvusage", ""),
            "fairshare": f.get("fairshare", ""),
            "limits": [(label, lim[key]) for key, label in LIMIT_FIELDS if lim.get(key)],
            "held": by_assoc.get((account, user), 0),
        })  # fmt: skip
    reasons = [{"reason": r, "count": n, "why": explain_reason(r)} for r, n in by_reason.most_common()]
    return {"rows": rows, "unavailable": "", "reasons": reasons}
