"""The CLI's help, usage, version, man pages and completion come from the option tables that drive
the parsers; the ``spur`` application is built from VERBS; nothing here needs a controller."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from spur import version
from spur.cli import cmdinfo
from spur.cli import main as cli_main
from spur.cli.completion import bash_script
from spur.cli.doctor import config_source, controller_source, shadowed_commands
from spur.cli.manpages import all_pages, write_pages

REPO = Path(__file__).resolve().parents[1]


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli_main.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "code", "first"),
    [
        (["spur"], 0, "Usage: spur COMMAND"),
        (["spur", "--help"], 0, "Usage: spur COMMAND"),
        (["spur", "-h"], 0, "Usage: spur COMMAND"),
        (["spur", "help"], 0, "Usage: spur COMMAND"),
        (["spur", "--version"], 0, f"slurm {version.SLURM_VERSION} (spur {version.spur_version()})"),
        (["spur", "bogus"], 1, "spur: error: unknown command 'bogus' (see 'spur --help')"),
        (
            ["spur", "sbumit"],
            1,
            "spur: error: unknown command 'sbumit'; did you mean 'spur submit'? (see 'spur --help')",
        ),
        (["spur", "--bogus"], 1, "spur: error: unknown option '--bogus' (see 'spur --help')"),
        (["spur", "show", "--help"], 0, "Usage: scontrol <command> [args]"),
        (["spur", "help", "squeue"], 0, "Usage: squeue [OPTIONS...]"),
        (["spur", "help", "nodes"], 0, "Usage: sinfo [OPTIONS...]"),
        (["scontrol", "show", "--help"], 0, "Usage: scontrol <command> [args]"),
        # a program name with no verb behind it (a console script whose module is not installed)
        (
            ["sbogus", "list"],
            1,
            "sbogus: error: sbogus is not a command of this Spur installation; see 'spur --help'",
        ),
        (["squeue", "--usage"], 0, "Usage: squeue [-h] [-o format] [-O long_format] [-j [jobs]] [-u user]"),
        (["salloc", "--usage"], 0, "Usage: salloc [-J name] [-A name] [-p partition] [-q qos] [-N n] [-n n]"),
        (["salloc", "-V"], 0, f"slurm {version.SLURM_VERSION} (spur {version.spur_version()})"),
        (["sbatch", "--version"], 0, f"slurm {version.SLURM_VERSION} (spur {version.spur_version()})"),
    ],
)
def test_spur_and_meta_options_never_crash(argv, code, first, capsys) -> None:
    got, out, err = run_main(argv, capsys)
    assert got == code, (out, err)
    assert (out or err).splitlines()[0] == first


def test_spur_help_lists_every_verb_with_its_slurm_twin(capsys) -> None:
    _code, out, _err = run_main(["spur", "--help"], capsys)
    for verb, (_module, slurm, _help) in cli_main.VERBS.items():
        assert verb in out
        if slurm:
            assert f"({slurm})" in out


@pytest.mark.parametrize("verb", sorted(cli_main.VERBS))
def test_every_verb_answers_help_usage_and_version(verb: str, capsys) -> None:
    """``NAME --help``/``--usage``/``-V`` (and ``spur VERB --help``) print the verb's own text and exit 0
    without a controller; --help lists the verb's options from its table, not only the help flags."""
    _module, slurm, _summary = cli_main.VERBS[verb]
    name = slurm or verb
    prog = [name] if slurm else ["spur", verb]
    doc = cmdinfo.describe(verb)
    code, out, err = run_main([*prog, "--help"], capsys)
    assert code == 0 and out.startswith("Usage: "), (verb, out, err)
    for opt in doc.options:
        if opt.group != "Help":
            assert opt.flags() in out, (verb, opt.flags())
    code, out, err = run_main([*prog, "--usage"], capsys)
    assert code == 0 and out.startswith(f"Usage: {' '.join(prog)}"), (verb, out, err)
    code, out, err = run_main([*prog, "--version"], capsys)
    assert code == 0 and out.strip() == version.version_line(), (verb, out, err)
    if slurm:
        code, out2, err = run_main(["spur", verb, "--help"], capsys)
        assert code == 0 and out2.startswith("Usage: "), (verb, out2, err)


@pytest.mark.parametrize("verb", ["attach", "acct", "shares", "prio"])
def test_accounting_and_attach_verbs_document_their_options(verb: str) -> None:
    assert [o for o in cmdinfo.describe(verb).options if o.group != "Help"], verb


def test_every_option_has_a_description() -> None:
    """A parser option without text would show up blank in --help and the man page."""
    for verb in cli_main.VERBS:
        doc = cmdinfo.describe(verb)
        missing = [o.flags() for o in doc.options if not o.help]
        assert not missing, (verb, missing)


def test_job_options_come_from_the_parser_table() -> None:
    from spur.core.job_options import _OPTIONS

    for command in ("sbatch", "srun", "salloc"):
        longs = {o.long for o in cmdinfo.describe(cmdinfo.verb_of(command)).options}
        assert longs >= {o.long for o in _OPTIONS if command in o.commands}


def test_sbatch_help_groups_options_like_slurm(capsys) -> None:
    _code, out, _err = run_main(["sbatch", "--help"], capsys)
    assert out.splitlines()[0] == "Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]"
    assert "Parallel run options:" in out and "Constraint options:" in out
    assert "  -p, --partition=PARTITION" in out


@pytest.fixture
def fake_verb(monkeypatch):
    """A verb added to VERBS by someone else later, with only the documented hooks."""
    module = types.ModuleType("spur_test_fake_verb")
    module.USAGE = "Usage: sfake [OPTIONS...] JOBID"
    module.OPERANDS = "jobs"
    module.OPTION_HELP = {"frobnicate": "frobnicate the job"}

    def build_parser():
        from spur.cli.slurmargs import SlurmArgParser

        p = SlurmArgParser("sfake")
        p.add_argument("-f", "--frobnicate", action="store_true")
        p.add_argument("-p", "--partition")
        return p

    module.build_parser = build_parser
    module.main = lambda argv: int(bool(build_parser().parse_args(argv)))
    monkeypatch.setitem(sys.modules, "spur_test_fake_verb", module)
    monkeypatch.setitem(cli_main.VERBS, "fake", ("spur_test_fake_verb", "sfake", "Frobnicate jobs (sfake)."))
    monkeypatch.setitem(cli_main.SLURM_NAMES, "sfake", "fake")
    return module


def test_a_new_verb_gets_help_man_and_completion_for_free(fake_verb, capsys) -> None:
    code, out, _ = run_main(["sfake", "--help"], capsys)
    assert code == 0 and out.startswith("Usage: sfake [OPTIONS...] JOBID")
    assert "  -f, --frobnicate" in out and "frobnicate the job" in out
    code, out, _ = run_main(["spur", "fake", "--version"], capsys)
    assert out.startswith("slurm 22.05")
    code, out, _ = run_main(["spur", "--help"], capsys)
    assert "Frobnicate jobs (sfake)." in out
    assert "man1/sfake.1" in all_pages() and "frobnicate the job" in all_pages()["man1/sfake.1"]
    script = bash_script()
    assert "_spur_opts_sfake='--frobnicate --help --partition --usage --version -V -f -p'" in script
    assert "_spur_partitions_sfake='--partition -p'" in script and "_spur_operand_sfake='jobs'" in script
    assert " sfake" in script.splitlines()[-1]


def test_query_commands_do_not_load_cyclopts() -> None:
    code = (
        "import sys; from spur.cli.main import main\n"
        "for argv in (['squeue', '--version'], ['sbatch', '--help'], ['sinfo', '--usage']):\n"
        "    try: main(argv)\n"
        "    except SystemExit: pass\n"
        "print('cyclopts' in sys.modules, 'trio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.stdout.strip().splitlines()[-1] == "False False", out.stderr


@pytest.mark.skipif(
    shutil.which("man") is None, reason="man-db not installed (scripts/setup.sh installs it as root)"
)
def test_man_pages_render_and_man_finds_them(tmp_path: Path) -> None:
    paths = write_pages(tmp_path / "man")
    names = {p.name for p in paths}
    assert {"sbatch.1", "squeue.1", "scontrol.1", "spur.1", "spurctld.8", "spurd.8", "spur.conf.5"} <= names
    env = {**os.environ, "MANPATH": str(tmp_path / "man"), "MANWIDTH": "100", "LC_ALL": "C.UTF-8"}
    found = subprocess.run(["man", "-w", "sbatch"], env=env, capture_output=True, text=True, timeout=30)
    assert found.stdout.strip() == str(tmp_path / "man" / "man1" / "sbatch.1")
    for page in paths:
        shown = subprocess.run(
            ["man", "--warnings", "-l", str(page)], env=env, capture_output=True, text=True, timeout=30
        )
        assert shown.returncode == 0 and not shown.stderr.strip(), (page, shown.stderr)
    sbatch = subprocess.run(
        ["man", "-l", str(tmp_path / "man/man1/sbatch.1")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert "--partition=PARTITION" in sbatch and "--test-only" in sbatch
    conf = (tmp_path / "man/man5/spur.conf.5").read_text()
    assert "enforce_part_limits" in conf and "node_timeout_secs" in conf
    assert "\\-\\-state\\-dir" in (tmp_path / "man/man8/spurctld.8").read_text()


def complete(words: list[str], path: str) -> list[str]:
    """Drive the generated bash completion for ``words`` (the last one is being completed)."""
    script = (
        "source <(spur completion bash)\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_spur_complete; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    env = {**os.environ, "PATH": path}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.splitlines() if w]


@pytest.fixture
def spur_path(tmp_path: Path) -> str:
    """PATH with a ``spur`` that runs this tree's CLI."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "spur").write_text(
        f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -c "
        '\'import sys; from spur.cli.main import main; sys.exit(main(["spur"] + sys.argv[1:]))\' "$@"\n'
    )
    (bindir / "spur").chmod(0o755)
    return f"{bindir}:{os.environ['PATH']}"


def test_bash_completion_of_verbs_and_options(spur_path: str) -> None:
    assert complete(["spur", "qu"], spur_path) == ["queue"]
    assert complete(["spur", "submit", "--par"], spur_path) == ["--parsable", "--partition"]
    assert complete(["sbatch", "--te"], spur_path) == ["--test-only"]
    assert complete(["squeue", "--m"], spur_path) == ["--me"]
    assert complete(["scontrol", "sh"], spur_path) == ["show"]
    assert complete(["spur", "show", "p"], spur_path) == ["partition"]
    assert complete(["spur", "help", "hi"], spur_path) == ["history"]
    assert complete(["spur", "completion", ""], spur_path) == ["bash", "zsh", "--list"]
    assert complete(["sinfo", "-t", "dr"], spur_path) == ["drain", "drained", "draining", "drng"]
    assert complete(["squeue", "--states", "R"], spur_path) == ["RUNNING"]


def test_zsh_script_wraps_the_bash_one(capsys) -> None:
    code, out, _ = run_main(["spur", "completion", "zsh"], capsys)
    assert code == 0 and out.startswith("#compdef spur") and "bashcompinit" in out and "_spur_complete" in out


def test_doctor_config_and_controller_sources() -> None:
    assert config_source({"SPUR_CONF": "/x.conf"}) == ("/x.conf", "from $SPUR_CONF")
    assert config_source({}, exists=lambda p: p == "/etc/spur/spur.conf")[0] == "/etc/spur/spur.conf"
    assert config_source({}, exists=lambda p: False)[0] == ""
    assert controller_source({"SPUR_CONTROLLER": "h:1"}, "/x.conf") == "$SPUR_CONTROLLER"
    assert controller_source({}, "/x.conf").startswith("[agent] controller in /x.conf")


def test_doctor_spots_another_slurm_ahead_on_path(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for d in (ours, theirs):
        d.mkdir()
    for name in ("sbatch", "squeue"):
        (ours / name).write_text("#!/usr/bin/python\nfrom spur.cli.main import entry\n")
        (ours / name).chmod(0o755)
    (theirs / "sbatch").write_bytes(b"\x7fELF...")
    (theirs / "sbatch").chmod(0o755)
    path = f"{theirs}:{ours}"
    assert shadowed_commands(["sbatch", "squeue"], path, str(ours)) == [("sbatch", str(theirs / "sbatch"))]
    assert shadowed_commands(["sbatch", "squeue"], f"{ours}:{theirs}", str(ours)) == []
