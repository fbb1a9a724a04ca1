"""squeue formatting against Slurm 22.05's reference outputs, on hand-built JobInfo records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_jobs import NOW, array_task, job, reference_queue

from spur.cli.formats import FormatError
from spur.cli.jobfields import SQUEUE_DEFAULT_FORMAT, squeue_value
from spur.cli.squeue import (
    QueueError,
    format_jobs,
    jobs_json,
    parse_job_filters,
    parse_sort,
    parse_states,
    select_jobs,
)

REFERENCE = Path("/work/shared/reference/slurm-22.05-outputs.txt")


def reference_section(title: str) -> str:
    text = REFERENCE.read_text() if REFERENCE.exists() else ""
    if f"## {title}\n" not in text:
        pytest.skip("reference outputs not available")
    body = text.split(f"## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0].rstrip("\n") + "\n"


DEFAULT = """\
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
       218_[3-5%2]     debug      arr     root PD       0:00      1 (JobArrayTaskLimit)
               217     debug     held     root PD       0:00      1 (JobHeldUser)
               216     debug longname     root  R       0:03      1 vm
             218_1     debug      arr     root  R       0:03      1 vm
             218_2     debug      arr     root  R       0:03      1 vm
"""

EXPANDED = """\
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
             218_3     debug      arr     root PD       0:00      1 (JobArrayTaskLimit)
             218_4     debug      arr     root PD       0:00      1 (JobArrayTaskLimit)
             218_5     debug      arr     root PD       0:00      1 (JobArrayTaskLimit)
               217     debug     held     root PD       0:00      1 (JobHeldUser)
               216     debug longname     root  R       0:03      1 vm
             218_1     debug      arr     root  R       0:03      1 vm
             218_2     debug      arr     root  R       0:03      1 vm
"""


def test_default_layout_folds_pending_array_tasks_like_slurm() -> None:
    out = format_jobs(reference_queue(), SQUEUE_DEFAULT_FORMAT, header=True, now=NOW)
    assert out == DEFAULT
    assert out == reference_section("squeue")


def test_array_flag_prints_one_line_per_task() -> None:
    out = format_jobs(reference_queue(), SQUEUE_DEFAULT_FORMAT, header=True, now=NOW, expand=True)
    assert out == EXPANDED
    assert out == reference_section("squeue -r")


def test_custom_format_matches_reference_except_own_job_ids() -> None:
    fmt = "%i|%j|%t|%T|%M|%l|%D|%R|%A|%a|%r|%C"
    out = format_jobs(reference_queue(), fmt, header=True, now=NOW).splitlines()
    ref = reference_section(f"squeue -o '{fmt}'").splitlines()
    assert out[0] == ref[0]
    assert out[1:4] == ref[1:4]
    # Spur's first array task owns the array's job id (Slurm's meta record); tasks are consecutive.
    assert out[4] == "218_1|arr|R|RUNNING|0:03|UNLIMITED|1|vm|218|(null)|None|1"
    assert out[5] == "218_2|arr|R|RUNNING|0:03|UNLIMITED|1|vm|219|(null)|None|1"


def test_noheader_and_width_truncation() -> None:
    out = format_jobs([job(5, "a_very_long_name")], "%.5i %.4j %-6t|", header=False, now=NOW)
    assert out == "    5 a_ve R     |\n"


@pytest.mark.parametrize(
    ("letter", "expected"),
    [("F", "218"), ("K", "4"), ("A", "221"), ("i", "218_4"), ("t", "PD"), ("T", "PENDING")],
)
def test_array_letters_of_a_task(letter: str, expected: str) -> None:
    task = array_task(221, 218, 4, "PENDING", reason="JobArrayTaskLimit")
    assert squeue_value(task, letter, NOW) == expected


@pytest.mark.parametrize(("letter", "expected"), [("F", "7"), ("K", "N/A"), ("A", "7"), ("i", "7")])
def test_array_letters_of_a_plain_job(letter: str, expected: str) -> None:
    assert squeue_value(job(7), letter, NOW) == expected


def test_group_letters_show_the_task_ranges() -> None:
    out = format_jobs(reference_queue(), "%i %F %K %A", header=False, now=NOW).splitlines()
    assert out[0] == "218_[3-5%2] 218 3-5%2 218"


def test_suspended_job_shows_S_and_excludes_suspended_time() -> None:
    j = job(9, state="SUSPENDED", start_time=NOW - 100, suspend_time=NOW - 40, suspended_secs=10)
    assert squeue_value(j, "t", NOW) == "S"
    assert squeue_value(j, "M", NOW) == "0:50"


def test_long_format_default_width_and_justification() -> None:
    jobs = [job(216, "longname_job_for_width", time_limit_secs=600)]
    out = format_jobs(jobs, "JobID,Name:10,State:.9,TimeLimit:", header=True, now=NOW, long=True)
    assert out.splitlines() == [
        "JOBID               NAME          STATETIME_LIMIT",
        "216                 longname_j  RUNNING10:00",
    ]


def test_long_format_suffix_separates_fields() -> None:
    jobs = [array_task(219, 218, 2, "RUNNING")]
    out = format_jobs(
        jobs, "JobArrayID:|,ArrayTaskID:|,JobID:|,StateCompact:", header=True, now=NOW, long=True
    )
    assert out == "JOBID|ARRAY_TASK_ID|JOBID|ST\n218_2|2|219|R\n"


def test_long_format_rejects_unknown_field() -> None:
    with pytest.raises(FormatError, match="Invalid job format specification: Bogus"):
        format_jobs([], "JobID,Bogus", header=True, now=NOW, long=True)


@pytest.mark.parametrize(
    ("values", "expected"), [(["218"], [(218, None)]), (["218_3", "5"], [(218, 3), (5, None)])]
)
def test_job_filters(values: list[str], expected: list) -> None:
    assert parse_job_filters(values) == expected


@pytest.mark.parametrize("bad", ["abc", "0", "12_x", "-3"])
def test_bad_job_filter_says_invalid_job_id(bad: str) -> None:
    with pytest.raises(QueueError, match=f"squeue: error: Invalid job id: {bad}"):
        parse_job_filters([bad])


def test_state_filters_accept_short_long_and_all() -> None:
    assert parse_states(["pd", "RUNNING", "cd"]) == {"PENDING", "RUNNING", "COMPLETED"}
    assert parse_states(["all"]) is None
    with pytest.raises(QueueError):
        parse_states(["nonsense"])
    # Slurm's state flags filter as Slurm's squeue takes them (no Spur job carries one).
    assert parse_states(["CF", "configuring", "SO"]) == {"CONFIGURING", "STAGE_OUT"}


def test_alloc_sid_is_the_submitters_session() -> None:
    held = job(217, "held", "PENDING", spec={"alloc_sid": 4242})
    assert squeue_value(held, "@alloc_sid", NOW) == "4242"


def test_select_jobs_by_task_name_and_state() -> None:
    jobs = reference_queue()
    picked = select_jobs(jobs, filters=[(218, 4)], states=None, names=set(), accounts=set(), nodes=set())
    assert [j.job_id for j in picked] == [221]
    picked = select_jobs(jobs, filters=[], states={"PENDING"}, names={"held"}, accounts=set(), nodes=set())
    assert [j.job_id for j in picked] == [217]


def test_json_has_slurm_2205_shape() -> None:
    doc = json.loads(jobs_json(reference_queue(), NOW))
    assert set(doc) == {"meta", "errors", "jobs"}
    assert doc["errors"] == []
    by_id = {j["job_id"]: j for j in doc["jobs"]}
    task = by_id[221]
    assert (task["array_job_id"], task["array_task_id"], task["job_state"]) == (218, 4, "PENDING")
    assert by_id[216]["array_task_id"] is None
    assert by_id[216]["time_limit"] == 10
    assert by_id[218]["time_limit"] is None
    assert by_id[216]["user_name"] == "root" and by_id[216]["nodes"] == "vm"
    for key in ("partition", "name", "submit_time", "start_time", "end_time", "exit_code"):
        assert key in task


QUICK_ARGVS = [
    [],
    ["-h"],
    ["--noheader", "-l", "-a", "-r", "--me", "--json", "--local", "--noconvert"],
    ["-o", "%i %j"],
    ["-o%.18i %T"],
    ["--format", "%i"],
    ["--format=%i %R"],
    ["--format="],
    ["-o", ""],
    ["-O", "JobID,Name:20"],
    ["--Format=jobid"],
    ["-u", "alice,bob", "-u", "carol", "--user=dave"],
    ["-t", "PD", "--states", "all", "-p", "debug", "-n", "x", "-A", "acct", "-w", "n[1-3]"],
    ["-j", "5,6_2", "--jobs", "7", "--job=8", "--jobs="],
    ["-i", "5"],
    ["--iterate=+3"],
    ["-S-t"],
    ["-v", "--verbose"],
    ["-o", "%i", "-o", "%j"],
]
FALLBACK_ARGVS = [
    ["-hl"],
    ["-vv"],
    ["-j"],
    ["-j", "-h"],
    ["-o"],
    ["-o", "-h"],
    ["-i", "x"],
    ["--form", "%i"],
    ["--help"],
    ["-V"],
    ["extra"],
    ["-"],
    ["--noheader=1"],
    ["-x"],
    ["-S", "-t,i"],
]


@pytest.mark.parametrize("argv", QUICK_ARGVS, ids=lambda a: " ".join(a) or "none")
def test_quick_parse_agrees_with_the_argparse_parser(argv: list[str]) -> None:
    """squeue parses plain option uses without argparse; the result is exactly argparse's."""
    from spur.cli.squeue import build_parser, quick_parse

    quick = quick_parse(argv)
    assert quick is not None
    assert vars(quick) == vars(build_parser().parse_args(argv))


@pytest.mark.parametrize("argv", FALLBACK_ARGVS, ids=" ".join)
def test_quick_parse_leaves_everything_else_to_argparse(argv: list[str]) -> None:
    from spur.cli.squeue import quick_parse

    assert quick_parse(argv) is None


# ---- -S / SQUEUE_SORT (as Slurm 22.05's squeue sorts, compared in integration/conformance)


def test_sort_spec_letters_and_direction() -> None:
    assert parse_sort("-t,%i,+j") == [("t", True), ("i", False), ("j", False)]
    with pytest.raises(QueueError, match=r"^squeue: error: Invalid sort specification: \?$"):
        parse_sort("?")


def test_sort_by_state_name_then_id_descending() -> None:
    jobs = [job(3, "c", "PENDING", priority=0), job(1, "a", "RUNNING"), job(2, "b", "COMPLETED")]
    out = format_jobs(jobs, "%i %T", header=False, now=NOW, sort=parse_sort("T"))
    assert out == "2 COMPLETED\n3 PENDING\n1 RUNNING\n"
    out = format_jobs(jobs, "%i", header=False, now=NOW, sort=parse_sort("-i"))
    assert out == "3\n2\n1\n"
    out = format_jobs(jobs, "%j", header=False, now=NOW, sort=parse_sort("j"))
    assert out == "a\nb\nc\n"


def test_default_order_compares_state_names() -> None:
    jobs = [job(1, "a", "RUNNING"), job(2, "b", "COMPLETED"), job(3, "c", "PENDING")]
    assert format_jobs(jobs, "%i", header=False, now=NOW) == "2\n3\n1\n"


def test_letters_of_features_spur_lacks_print_slurms_values() -> None:
    held = job(5, "h", "PENDING", priority=0)
    values = {letter: squeue_value(held, letter, NOW) for letter in "dhHIJOvWXYzp"}
    assert values == {
        "d": "0", "h": "OK", "H": "*", "I": "*", "J": "*", "O": "0", "v": "(null)", "W": "(null)",
        "X": "N/A", "Y": "(null)", "z": "*:*:*", "p": "0.00000000000000",
    }  # fmt: skip
