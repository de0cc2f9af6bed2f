"""What reaches a terminal is inert: no escape sequence or C1 control from an endpoint, a
voice or a file is printed as it came.

A hostile model server on 127.0.0.1 serves model ids and answers carrying OSC (retitle the
window), CSI (clear the screen) and one-byte C1 CSI sequences; ``rune`` runs as a real
process and its stdout and stderr are read as bytes. A source scan keeps every command on
the one printing path (``cli/app.py``: ``echo``, ``echo_json``), so a new command cannot
print around it.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rune_council.core.safetext import json_text
from tests.helpers import answer, claim
from tests.http_server import OpenAIServer, answering
from tests.test_security_endpoints import HostileServer, Reply

Q = "Should we shard the orders table?"
CLI = Path(__file__).resolve().parents[1] / "rune_council" / "cli"

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
C1_CSI = "\x9b31m"
BIDI = "\u202e"
HOSTILE_IDS = [
    f"evil/{TITLE}llama-3.3-70b-instruct",
    f"evil/{CLEAR}mistral-large-instruct",
    f"evil/{C1_CSI}qwen2.5-72b-instruct",
]
# ESC, BEL, CSI/OSC and every other C1 control, as bytes in UTF-8 output.
RAW_CONTROL = re.compile(rb"[\x07\x1b]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def rune(tmp: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    (tmp / "bin").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", *args],
        cwd=tmp,
        env={
            "PATH": f"{tmp / 'bin'}:/usr/bin:/bin",
            "HOME": str(tmp),
            "LANG": "C.UTF-8",
            "RUNE_COUNCIL_LOGIN_SHELL": "0",
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        },
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def inert(ran: subprocess.CompletedProcess[bytes]) -> None:
    for name, data in (("stdout", ran.stdout), ("stderr", ran.stderr)):
        found = RAW_CONTROL.findall(data)
        assert not found, f"{name} carries raw control bytes {found[:5]}: {data[:400]!r}"


@pytest.fixture
def hostile() -> Iterator[OpenAIServer]:
    good = answer(Q, "NO", [claim("The plan has no rollback step")])
    with OpenAIServer(
        models=list(HOSTILE_IDS), behaviours={m: answering(good) for m in HOSTILE_IDS}
    ) as srv:
        yield srv


def test_model_ids_with_escape_sequences_are_listed_inert(
    tmp_path: Path, hostile: OpenAIServer
) -> None:
    user = tmp_path / ".config" / "rune-council"
    user.mkdir(parents=True)
    (user / "council.toml").write_text(f'[endpoints.lab]\nbase_url = "{hostile.base_url}"\n')
    listed = rune(tmp_path, "council", "endpoints", "--refresh-models")
    assert listed.returncode == 0, listed.stderr
    assert hostile.models_calls == 1
    inert(listed)
    shown = listed.stdout.decode()
    # The ids are still shown, without what they tried to do to the terminal.
    assert "evil/llama-3.3-70b-instruct" in shown and "evil/mistral-large-instruct" in shown
    as_json = rune(tmp_path, "council", "endpoints", "--json")
    inert(as_json)
    assert {m["model"] for m in json.loads(as_json.stdout)[0]["ranked"]} <= set(HOSTILE_IDS)

    doctor = rune(tmp_path, "council", "doctor")
    assert doctor.returncode in (0, 1), doctor.stderr
    inert(doctor)
    inert(rune(tmp_path, "council", "doctor", "--json"))


def test_an_error_body_with_escape_sequences_is_shown_inert(tmp_path: Path) -> None:
    message = f"models are down {TITLE}{CLEAR}{C1_CSI}{BIDI}\nFAKE LINE"
    error = json.dumps({"error": {"message": message}}).encode()
    with HostileServer(models=Reply(error, status=500), chat=Reply(error, status=500)) as srv:
        listed = rune(tmp_path, "council", "endpoints", "--endpoint", srv.base_url)
        council = rune(tmp_path, "council", "--endpoint", srv.base_url, "--n", "2", Q)
    inert(listed)
    assert "models are down" in listed.stdout.decode()
    # A newline in the server's text does not start a line of its own.
    assert not any(line.startswith("FAKE LINE") for line in listed.stdout.decode().splitlines())
    inert(council)


def test_a_voice_answer_with_c1_controls_prints_as_json_a_terminal_cannot_act_on(
    tmp_path: Path,
) -> None:
    """pydantic writes C1 controls and bidirectional overrides into JSON as they are; the
    printed document escapes them and still reads back as the same answer."""
    text = f"{C1_CSI}{BIDI}Read this first.\n" + answer(Q, "NO", [claim("No rollback step")])
    model = "meta/llama-3.3-70b-instruct"
    with OpenAIServer(models=[model], behaviours={model: answering(text)}) as server:
        ran = rune(
            tmp_path,
            "council",
            "--endpoint",
            server.base_url,
            "--n",
            "2",
            "--id",
            "c1",
            "--json",
            Q,
        )
    assert ran.stdout, ran.stderr
    inert(ran)
    doc = json.loads(ran.stdout)
    run_file = json.loads((tmp_path / ".rune" / "council" / "run-c1.json").read_text())
    # Nothing lost: the printed document is the run file's, value for value.
    assert doc["voices"][0]["raw"] == run_file["voices"][0]["raw"]
    assert C1_CSI in json.dumps(doc["voices"][0]["raw"], ensure_ascii=False)


def test_every_reader_of_a_run_prints_it_inert(tmp_path: Path) -> None:
    """show, list, watch and verify, text and JSON, print a run whose voice answered with C1
    controls without them; ``show --json`` is still the run file, value for value."""
    text = f"{C1_CSI}{BIDI}Read this first.\n" + answer(Q, "NO", [claim("No rollback step")])
    model = "meta/llama-3.3-70b-instruct"
    with OpenAIServer(models=[model], behaviours={model: answering(text)}) as server:
        ran = rune(tmp_path, "council", "--endpoint", server.base_url, "--n", "2", "--id", "c1", Q)
    assert ran.returncode == 0, ran.stderr
    for args in (
        ("show", "c1", "--json"),
        ("show", "c1"),
        ("list",),
        ("list", "--json"),
        ("watch", "c1", "--json"),
        ("watch", "c1"),
        ("verify", "c1"),
        ("verify", "c1", "--json"),
    ):
        read = rune(tmp_path, "council", *args)
        assert read.stdout, (args, read.stderr)
        inert(read)
    shown = json.loads(rune(tmp_path, "council", "show", "c1", "--json").stdout)
    assert shown == json.loads((tmp_path / ".rune" / "council" / "run-c1.json").read_text())


@pytest.mark.parametrize("door", ["serve", "mcp"])
def test_a_server_that_will_not_start_says_why_inert(tmp_path: Path, door: str) -> None:
    """serve and mcp print their own errors before they start: a project directory whose
    name carries escapes, refused for its symlinked .rune, is named without them."""
    proj = tmp_path / f"proj{TITLE}{C1_CSI}{BIDI}"
    proj.mkdir()
    (proj / ".rune").symlink_to(tmp_path)
    ran = rune(proj, "council", door, *(("--port", "0") if door == "serve" else ()))
    assert ran.returncode == 2, ran.stderr
    inert(ran)
    assert b"is a symbolic link" in ran.stderr and b"Traceback" not in ran.stderr


# --------------------------------------------------------------------------- one path

# The helpers every command prints through.
PRINTING_HOME = "app.py"
# Files still printing on their own, each with what it prints; an entry that no longer
# prints around the helpers fails the test, so the list only shrinks.
NOT_YET: dict[str, str] = {}

_WRITERS = {
    ("typer", "echo"),
    ("typer", "secho"),
    ("click", "echo"),
    ("click", "secho"),
    ("sys.stdout", "write"),
    ("sys.stderr", "write"),
    ("sys.stdout.buffer", "write"),
    ("sys.stderr.buffer", "write"),
}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def raw_prints(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "print":
            found.append(f"{path.name}:{node.lineno} print()")
        elif isinstance(func, ast.Attribute):
            owner = _dotted(func.value)
            if owner is not None and (owner, func.attr) in _WRITERS:
                found.append(f"{path.name}:{node.lineno} {owner}.{func.attr}()")
    return found


def test_every_command_prints_through_the_one_sanitizing_path() -> None:
    offenders = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == PRINTING_HOME or path.name in NOT_YET:
            continue
        offenders += raw_prints(path)
    assert not offenders, (
        "print with echo()/echo_json() from cli/app.py, which make untrusted text inert: "
        + "; ".join(offenders)
    )
    stale = [name for name in NOT_YET if not raw_prints(CLI / name)]
    assert not stale, f"no longer printing on their own, remove from NOT_YET: {stale}"


def test_json_text_escapes_what_a_terminal_acts_on_and_keeps_the_document() -> None:
    doc = {"id": f"{TITLE}{CLEAR}{C1_CSI}{BIDI}\x7f", "nested": ["tab\there", "new\nline"]}
    written = json.dumps(doc, ensure_ascii=False, indent=2)
    shown = json_text(written)
    assert not RAW_CONTROL.search(shown.encode())
    assert json.loads(shown) == doc
