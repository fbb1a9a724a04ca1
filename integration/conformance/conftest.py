"""Session fixtures of the conformance suite: one real Slurm 22.05 and one Spur cluster for all cases,
the cached environment jobs, and the match ratio per command printed at the end of the session."""

from __future__ import annotations

import pytest

from integration.conformance.cases import KEYED, SHARED_JOBS, TABLES, env_snippet
from integration.conformance.pair import run_both
from integration.conformance.systems import PRELUDE, Outcome
from integration.conformance.tally import TALLY


@pytest.fixture(scope="session")
def pair(tmp_path_factory):
    """(slurm, spur): both clusters, up for the whole session; skipped only when Slurm cannot be
    installed here (not root, no apt-get)."""
    from integration.conformance.pair import running_pair
    from integration.slurm_real import Skip, ensure_slurm

    try:
        ensure_slurm(install=True, accounting=True)
    except Skip as exc:
        pytest.skip(f"real Slurm 22.05 is not available: {exc}")
    with running_pair(tmp_path_factory.mktemp("conformance")) as systems:
        yield systems


@pytest.fixture(scope="session")
def env_jobs(pair):
    """option set -> (slurm's variables, spur's variables), each job run once per session."""
    cache: dict[str, tuple[dict[str, str], dict[str, str], Outcome, Outcome]] = {}

    def get(option_set: str) -> tuple[dict[str, str], dict[str, str], Outcome, Outcome]:
        if option_set not in cache:
            a, b = run_both(pair, f"env-{option_set}", env_snippet(option_set))
            cache[option_set] = (_variables(a), _variables(b), a, b)
        return cache[option_set]

    return get


@pytest.fixture(scope="session")
def shared_jobs(pair):
    """Each side's held, running and completed job (``$JP``, ``$JR``, ``$JD`` in the table snippets,
    ``<JP>``, ``<JR>``, ``<JD>`` in their outputs); the running one is cancelled at the end."""
    import subprocess

    made = []
    for system in pair:
        cwd = system.case_dir("shared-jobs")
        system.names[str(cwd)] = "<SHARED_DIR>"
        proc = subprocess.run(
            ["bash", "-c", PRELUDE + SHARED_JOBS],
            cwd=cwd,
            env=system.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        ids = proc.stdout.split()
        assert proc.returncode == 0 and len(ids) == 3, (
            f"{system.name}: shared jobs:\n{proc.stdout}{proc.stderr}"
        )
        for name, job_id in zip(("JP", "JR", "JD"), ids, strict=True):
            system.env[name] = job_id
            system.names[job_id] = f"<{name}>"
        made.append((system, ids))
    yield
    for system, ids in made:
        subprocess.run(["scancel", *ids[:2]], env=system.env, capture_output=True, timeout=30)


@pytest.fixture(scope="session")
def table_runs(pair, shared_jobs):
    """table index -> (slurm's outcome, spur's outcome), each table run once per session."""
    cache: dict[object, tuple[Outcome, Outcome]] = {}

    def get(key: object) -> tuple[Outcome, Outcome]:
        if key not in cache:
            script = TABLES[key].script() if isinstance(key, int) else KEYED[str(key)][0]
            cache[key] = run_both(pair, f"table-{key}", script)
        return cache[key]

    return get


def _variables(outcome: Outcome) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in outcome.stdout.splitlines():
        name, sep, value = line.partition("=")
        # SLURM_CONF is the path of slurm.conf the Slurm side's commands were given; Spur has none.
        if sep and name != "SLURM_CONF":
            out[name] = value
    return out


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not TALLY:
        return
    tr = terminalreporter
    tr.section("Slurm 22.05 conformance: match ratio per command")
    total = {"match": 0, "allowed": 0, "differ": 0}
    for command in sorted(TALLY):
        t = TALLY[command]
        n = sum(t.values())
        for k in total:
            total[k] += t[k]
        tr.write_line(
            f"{command:24} {t['match']:4}/{n:<4} match ({100 * t['match'] / n:5.1f}%)"
            f"  allowed {t['allowed']:3}  differ {t['differ']:3}"
        )
    n = sum(total.values())
    tr.write_line(
        f"{'all':24} {total['match']:4}/{n:<4} match ({100 * total['match'] / n:5.1f}%)"
        f"  allowed {total['allowed']:3}  differ {total['differ']:3}"
    )
