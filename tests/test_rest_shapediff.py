"""spur.rest.shapediff: the comparison behind integration/test_rest_vs_slurm24.py (pure)."""

from __future__ import annotations

from spur.rest.shapediff import generic_path, json_type, shape_diff


def _texts(real: object, spur: object, unequal: tuple[str, ...] = ()) -> list[str]:
    return [str(d) for d in shape_diff(real, spur, unequal)]


def test_equal_answers_have_no_difference() -> None:
    body = {"jobs": [{"job_id": 3, "job_state": ["COMPLETED"], "time_limit": {"set": True, "infinite": False, "number": 5}}]}
    assert shape_diff(body, body) == []


def test_types_are_json_types_and_a_type_difference_stops_the_walk() -> None:
    assert [json_type(v) for v in ({}, [], "", 1, 1.5, True, None)] == ["object", "list", "str", "number", "number", "bool", "null"]
    assert _texts({"jobs": [{"job_state": ["RUNNING"]}]}, {"jobs": [{"job_state": "RUNNING"}]}) == [
        "jobs[0].job_state: real list, spur str"
    ]
    assert _texts({"a": {"b": 1}}, {"a": None}) == ["a: real object, spur null"]
    assert _texts({"n": 1}, {"n": 1.0}) == []  # both JSON numbers, and equal
    assert _texts({"n": True}, {"n": 1}) == ["n: real bool, spur number"]


def test_missing_and_extra_keys_at_any_depth() -> None:
    real = {"a": {"b": 1, "c": "x"}}
    spur = {"a": {"b": 1, "d": []}}
    assert _texts(real, spur) == [
        "a.c: missing in spur (real sends str)",
        "a.d: only in spur (list; real does not send it)",
    ]


def test_values_compared_except_under_unequal_keys_and_paths() -> None:
    real = {"jobs": [{"job_id": 7, "nodes": "vm", "name": "a", "submit_time": {"set": True, "infinite": False, "number": 10}}]}
    spur = {"jobs": [{"job_id": 1, "nodes": "n1", "name": "b", "submit_time": {"set": True, "infinite": False, "number": 99}}]}
    assert _texts(real, spur, ("job_id", "submit_time", "jobs[].nodes")) == ["jobs[0].name: real 'a', spur 'b'"]
    # a path names one place only: "nodes" elsewhere is still compared
    assert _texts({"nodes": ["vm"]}, {"nodes": ["n1"]}, ("jobs[].nodes",)) == ["nodes: real ['vm'], spur ['n1']"]


def test_the_form_of_a_number_object_is_compared_even_under_an_unequal_key() -> None:
    real = {"end_time": {"set": True, "infinite": False, "number": 10}}
    spur = {"end_time": {"set": False, "infinite": False, "number": 0}}
    assert _texts(real, spur, ("end_time",)) == ["end_time.set: real True, spur False"]
    assert _texts(real, {"end_time": 10}, ("end_time",)) == ["end_time: real object, spur number"]


def test_flag_arrays_compare_as_sets_and_object_lists_by_position() -> None:
    assert _texts({"flags": ["A", "B"]}, {"flags": ["B", "A"]}) == []
    assert _texts({"flags": ["A"]}, {"flags": ["A", "C"]}) == ["flags: real ['A'], spur ['A', 'C']"]
    real = {"tres": [{"type": "cpu", "count": 1}, {"type": "mem", "count": 5}]}
    spur = {"tres": [{"type": "cpu", "count": 1}]}
    assert _texts(real, spur) == ["tres: real 2 items, spur 1"]
    # the element without a partner is still compared by shape, with the other side's first
    spur_bad = {"tres": [{"type": "cpu", "count": 1, "extra": 0}]}
    assert "tres[1].extra: only in spur (number; real does not send it)" in _texts(real, spur_bad)
    # lengths are values: not compared under an unequal key, shapes still are
    assert _texts(real, spur, ("tres",)) == []
    assert _texts({"tres": [{"count": 1}]}, {"tres": [{"count": "1"}]}, ("tres",)) == [
        "tres[0].count: real number, spur str"
    ]


def test_generic_path_drops_list_positions() -> None:
    assert generic_path("jobs[12].exit_code.status") == "jobs[].exit_code.status"
    assert generic_path("a[0].b[3]") == "a[].b[]"
