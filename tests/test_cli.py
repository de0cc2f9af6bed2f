"""`rune council` as a user runs it: real processes, exit codes, outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from rune_council.cli import app
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim, run_rune, user_env

Q = "Should we shard the orders table?"
ROLLBACK = claim(
    "The plan has no rollback step",
    severity="MUST",
    ref="plan.md:6",
    quote="No rollback step is defined.",
)


def rune(
    tmp: Path, *args: str, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, {**user_env(tmp), **(env_extra or {})}, *args)


def fakes(tmp: Path) -> None:
    install_fake(tmp / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(
        tmp / "bin",
        "codex",
        answer=answer(Q, "NO", [{**ROLLBACK, "text": "Nothing says how to undo the migration"}]),
    )
    install_fake(tmp / "bin", "gemini", answer=answer(Q, "YES", [claim("Fine as is")]))
    (tmp / "plan.md").write_text(PLAN)


def test_human_output_puts_the_decorrelation_stamp_first(tmp_path: Path) -> None:
    fakes(tmp_path)
    out = rune(tmp_path, "council", Q, "--artifact", "plan.md", "--id", "h1")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "## Council Result: h1"
    assert lines[1].startswith("- **Decorrelation**: MULTI_FAMILY")
    assert "### Consensus (verified, cross-family)" in out.stdout
    assert "The plan has no rollback step" in out.stdout
    assert "v2 codex" in out.stderr  # progress lines go to stderr
    assert (tmp_path / ".rune" / "council" / "run-h1.json").is_file()


def test_json_output_is_the_council_result_and_only_that(tmp_path: Path) -> None:
    fakes(tmp_path)
    out = rune(tmp_path, "council", "--json", "--n", "2", "--id", "j1", Q)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["id"] == "j1" and doc["voices_requested"] == 2
    assert doc["decorrelation"] in ("MULTI_FAMILY", "NO_DECORRELATION")
    assert out.stderr == ""


def test_bad_input_exits_2_with_one_clear_line(tmp_path: Path) -> None:
    fakes(tmp_path)
    for args, fragment in [
        (["council", Q, "--id", "../escape"], "not a safe file name"),
        (["council", Q, "--n", "1"], "n: Input should be greater than or equal to 2"),
        (["council", Q, "--mode", "generate"], "NOT_IMPLEMENTED"),
        (["council", Q, "--artifact", "missing.md"], "cannot read artifact"),
    ]:
        out = rune(tmp_path, *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert fragment in out.stderr
        assert "Traceback" not in out.stderr
    assert (
        not list((tmp_path / ".rune" / "council").glob("run-*.json"))
        if (tmp_path / ".rune" / "council").exists()
        else True
    )


def test_nothing_gathered_exits_1(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    out = rune(tmp_path, "council", Q, "--id", "empty")
    assert out.returncode == 1
    assert "no voice produced a usable answer" in out.stderr
    assert "NO_DECORRELATION" in out.stdout


def test_subagent_cmd_takes_the_slots_no_cli_can(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    script = tmp_path / "host.py"
    script.write_text(
        "import sys, json\nprompt = sys.stdin.read()\n"
        f"print(json.dumps({{'question_echo': {Q!r}, 'stance': 'NO', 'claims': []}}))\n"
    )
    out = rune(
        tmp_path,
        "council",
        Q,
        "--json",
        "--subagent-cmd",
        f"{sys.executable} {script}",
        "--id",
        "sub",
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["voices_valid"] == 3 and doc["decorrelation"] == "NO_DECORRELATION"
    assert {v["runtime"] for v in doc["voices"]} == {"subagent-cmd"}


def test_subagent_from_config_file(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    script = tmp_path / "host.py"
    script.write_text(
        "import sys, json\nsys.stdin.read()\n"
        f"print(json.dumps({{'question_echo': {Q!r}, 'stance': 'YES', 'claims': []}}))\n"
    )
    (tmp_path / ".rune").mkdir()
    (tmp_path / ".rune" / "council.toml").write_text(
        f'[subagent]\ncommand = "{sys.executable} {script}"\nfamily = "anthropic"\n'
    )
    assert rune(tmp_path, "council", "trust").returncode == 0  # it runs a program
    out = rune(tmp_path, "council", Q, "--json", "--n", "2", "--id", "cfg")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {v["model_family"] for v in doc["voices"]} == {"anthropic"}
    # A family named in config is still not "confirmed": it cannot buy decorrelation.
    assert doc["decorrelation"] == "NO_DECORRELATION"


def test_detect_lists_found_and_missing_clis_and_caches(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "claude", version="2.1.197")
    out = rune(tmp_path, "council", "detect", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    by = {d["runtime"]: d for d in doc["detected"]}
    assert by["claude"]["status"] == "available" and by["claude"]["version"] == "2.1.197"
    assert by["claude"]["model_family"] == "anthropic"
    assert by["claude"]["family_confidence"] == "confirmed"
    assert os.path.isabs(by["claude"]["path"])
    assert by["codex"]["status"] == "unavailable" and "not found" in by["codex"]["detail"]
    cached = json.loads((tmp_path / ".rune" / "runtimes.json").read_text())
    assert cached["checked_at"] == doc["checked_at"]

    install_fake(tmp_path / "bin", "codex")
    again = rune(tmp_path, "council", "detect")
    assert "cached today" in again.stdout and "codex    unavailable" in again.stdout
    fresh = rune(tmp_path, "council", "detect", "--refresh")
    assert "probed now" in fresh.stdout and "codex    available" in fresh.stdout


def test_detect_with_nothing_installed_is_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    out = rune(tmp_path, "council", "detect")
    assert out.returncode == 0
    assert "subagent-only" in out.stdout


def test_help_documents_every_option() -> None:
    result = CliRunner().invoke(app, ["council", "run", "--help"])
    assert result.exit_code == 0
    for option in ("--mode", "--n", "--artifact", "--timeout", "--id", "--subagent-cmd", "--json"):
        assert option in result.output


def test_question_from_stdin_keeps_it_out_of_argv(tmp_path: Path) -> None:
    fakes(tmp_path)
    env = {
        "PATH": path_with(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "-", "--json", "--id", "stdin"],
        cwd=tmp_path,
        env=env,
        input=Q + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["question"] == Q


def test_ctrl_c_kills_every_voice_and_records_a_cancelled_run(tmp_path: Path) -> None:
    import signal
    import time

    import psutil

    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", []))
    install_fake(
        tmp_path / "bin",
        "codex",
        answer=answer(Q, "NO", []),
        mode="ignore_sigterm",
        pid_file=tmp_path / "pids",
    )
    env = {
        "PATH": path_with(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", Q, "--n", "2", "--id", "sig"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "pids").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "cancelled" in err and "Traceback" not in err
    doc = json.loads((tmp_path / ".rune" / "council" / "run-sig.json").read_text())
    assert doc["status"] == "cancelled"
    assert doc["voices"][0]["status"] == "complete"
    assert doc["voices"][1]["status"] == "dropped"
    pid = int((tmp_path / "pids").read_text().split()[1])
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_a_process_still_tells_a_question_from_a_subcommand(tmp_path: Path) -> None:
    # The process builds only `run` once the first word is a question; a subcommand's name,
    # help and the full command list must come out as before.
    listed = rune(tmp_path, "council", "templates", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "architecture-review" in {t["name"] for t in json.loads(listed.stdout)["templates"]}
    helped = rune(tmp_path, "council", "--help")
    assert helped.returncode == 0
    assert all(word in helped.stdout for word in ("watch", "tally", "templates", "doctor"))
    # A question (even one that starts with a subcommand's name) convenes a council, which
    # finds no voice here and says so in its run file.
    asked = rune(tmp_path, "council", "--json", "templates please, which one?", "--id", "q1")
    assert json.loads(asked.stdout)["question"] == "templates please, which one?"
    assert (tmp_path / ".rune" / "council" / "run-q1.json").is_file()
