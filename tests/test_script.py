"""#SBATCH directive extraction and batch script validation."""

from __future__ import annotations

import pytest

from spur.core.script import (
    NOT_A_BATCH_SCRIPT,
    ScriptError,
    parse_sbatch_directives,
    validate_script,
    wrap_command,
)


@pytest.mark.parametrize(
    ("script", "tokens"),
    [
        ("#!/bin/bash\n#SBATCH -N 2\n#SBATCH --time=5\necho hi\n", ["-N", "2", "--time=5"]),
        # blank lines and comments do not stop scanning; the first command does
        ("#!/bin/sh\n\n# note\n   \n#SBATCH -J a\nhostname\n#SBATCH -J b\n", ["-J", "a"]),
        ("#!/bin/sh\n  # indented comment\n#SBATCH -p debug\n", ["-p", "debug"]),
        # quotes group, backslash escapes, an unquoted '#' starts a comment
        (
            "#!/bin/sh\n#SBATCH --job-name=\"my job\" --comment 'a b'\n",
            ["--job-name=my job", "--comment", "a b"],
        ),
        # as in Slurm, a backslash does not protect whitespace (only quotes do)
        ("#!/bin/sh\n#SBATCH --job-name=a\\ b\n", ["--job-name=a", "b"]),
        ("#!/bin/sh\n#SBATCH --comment=\\#x\n", ["--comment=#x"]),
        ('#!/bin/sh\n#SBATCH --comment="say \\"hi\\""\n', ['--comment=say "hi"']),
        ("#!/bin/sh\n#SBATCH -N 2 # two nodes\n#SBATCH -n 4\n", ["-N", "2", "-n", "4"]),
        ("#!/bin/sh\n#SBATCH --comment=a#b\n", ["--comment=a"]),
        ("#!/bin/sh\n#SBATCH --comment='a#b'\n", ["--comment=a#b"]),
        # only "#SBATCH" at column 0 followed by a blank is a directive
        ("#!/bin/sh\n #SBATCH -N 3\n##SBATCH -N 4\n#SBATCHX -N 5\n#sbatch -N 6\n", []),
        ("#!/bin/sh\n#SBATCH\n#SBATCH\t-N1\n", ["-N1"]),
        ("#!/bin/sh\r\n#SBATCH -N 2\r\n", ["-N", "2"]),
        ("", []),
    ],
)
def test_parse_sbatch_directives(script: str, tokens: list[str]) -> None:
    assert parse_sbatch_directives(script) == tokens


def test_custom_prefix() -> None:
    assert parse_sbatch_directives("#!/bin/sh\n#SPUR -N 2\n#SBATCH -n 1\n", prefix="#SPUR") == ["-N", "2"]


def test_unmatched_quote_is_an_error_naming_the_line() -> None:
    with pytest.raises(ScriptError, match='line 2: Unmatched `"`'):
        parse_sbatch_directives('#!/bin/sh\n#SBATCH --job-name="oops\n')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Batch script is empty!"),
        ("   \n\n", "Batch script contains only whitespace!"),
        ("echo hi\n", NOT_A_BATCH_SCRIPT),
        (" #!/bin/sh\necho\n", NOT_A_BATCH_SCRIPT),
        ("#!/bin/sh\necho \x00\n", "binary"),
        ("\x7fELF\x00\x00", "binary"),
        ("#!/bin/sh\r\necho hi\r\n", "DOS line breaks"),
    ],
)
def test_validate_script_refuses(text: str, message: str) -> None:
    with pytest.raises(ScriptError) as exc:
        validate_script(text)
    assert message in str(exc.value)


def test_not_a_batch_script_message_is_slurms(tmp_path) -> None:
    """Slurm 22.05's sbatch wraps it over three lines, each with its own prefix."""
    from spur.cli.client import CliError
    from spur.cli.sbatch import prepare

    (tmp_path / "j.sh").write_text("echo x\n")
    with pytest.raises(CliError) as exc:
        prepare([str(tmp_path / "j.sh")], {}, str(tmp_path))
    assert exc.value.message.split("\n") == [
        "sbatch: error: This does not look like a batch script.  The first",
        "sbatch: error: line must start with #! followed by the path to an interpreter.",
        "sbatch: error: For instance: #!/bin/sh",
    ]
    assert exc.value.exit_code == 1


def test_validate_script_accepts_a_shebang_script() -> None:
    validate_script("#!/bin/bash\n#SBATCH -N 1\nsrun hostname\n")


def test_wrap_command_builds_slurms_script() -> None:
    script = wrap_command("hostname -s")
    assert script == "#!/bin/sh\n# This script was created by sbatch --wrap.\n\nhostname -s\n"
    validate_script(script)
    assert parse_sbatch_directives(script) == []
