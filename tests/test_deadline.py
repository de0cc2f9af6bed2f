"""Early verdicts: past the deadline, with two confirmed families in, stragglers are stopped.

The stragglers here are fake CLIs run as real processes (one forks a grandchild), so
"stopped" means their process trees are gone, not that a coroutine was abandoned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest

from rune_council import CouncilOptions, convene
from rune_council.runs import load
from rune_council.testing import ScriptedRuntime, answer_for
from rune_council.verify import verify
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, QUESTION, ROLLBACK, UNDO, answer, council_result_schema

Q = QUESTION


def _request(run_id: str, n: int = 3, **budget: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "question": Q,
        "n": n,
        "artifact": {"name": "plan.md", "text": PLAN},
        "budget": {"per_voice_timeout_s": 60, **budget},
    }


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return {
        "bin": bin_dir,
        "env": {
            "PATH": path_with(bin_dir),
            "HOME": str(tmp_path),
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        },
        "rune": tmp_path / ".rune",
        "pids": tmp_path / "gemini.pids",
    }


def _alive(pid_file: Path) -> list[int]:
    pids = [int(line.split()[1]) for line in pid_file.read_text().splitlines() if line.strip()]
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def test_a_straggler_is_stopped_at_the_deadline_and_the_council_says_it_is_partial(
    world: dict[str, Any],
) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(world["bin"], "codex", answer=answer(Q, "NO", [ROLLBACK]))
    # Gemini would answer after 30 s, holding a grandchild: both must be gone at the verdict.
    install_fake(
        world["bin"],
        "gemini",
        answer=answer(Q, "NO", [UNDO]),
        mode="fork_grandchild",
        sleep_s=30,
        pid_file=str(world["pids"]),
    )
    started = time.monotonic()
    result = convene(
        _request("dl1", deadline_s=1.5), CouncilOptions(rune_dir=world["rune"], env=world["env"])
    )
    took = time.monotonic() - started

    assert took < 15, f"the council waited {took:.1f} s for a voice past its deadline"
    gemini = next(v for v in result.voices if v.runtime == "gemini")
    assert gemini.status == "dropped"
    assert gemini.drop_reason is not None and gemini.drop_reason.startswith("late:")
    last = gemini.attempts[-1]
    assert last.outcome == "late" and last.latency_ms is not None and last.latency_ms >= 1500
    assert result.voices_valid == 2 and result.decorrelation == "MULTI_FAMILY"
    assert result.partial is not None and result.partial.late_voice_ids == [gemini.id]
    assert result.stamp_label() == "MULTI_FAMILY (partial: 1 late at the 1.5 s deadline)"
    assert _alive(world["pids"]) == [], "the late voice's process tree outlived the council"

    on_disk = json.loads(Path(result.run_file or "").read_text())
    jsonschema.validate(on_disk, council_result_schema())
    assert on_disk["partial"]["late_voice_ids"] == [gemini.id]
    # As a reader gets it: the artifact kept beside the run file (contract 2.8) put back.
    recorded = load(Path(result.run_file or ""))
    assert verify(recorded).reproduced, verify(recorded).differences


def test_with_one_family_in_the_council_waits_past_the_deadline_for_a_second(
    world: dict[str, Any],
) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(world["bin"], "codex", answer=answer(Q, "NO", [ROLLBACK]), sleep_s=2.5)
    install_fake(world["bin"], "gemini", answer=answer(Q, "NO", [UNDO]), sleep_s=30)
    result = convene(
        _request("dl2", deadline_s=0.5), CouncilOptions(rune_dir=world["rune"], env=world["env"])
    )
    by_runtime = {v.runtime: v for v in result.voices}
    # At 0.5 s only claude had answered: one family is not enough to stop, so codex (2.5 s)
    # was waited for, and only then was gemini cut short.
    assert by_runtime["codex"].status == "complete"
    assert by_runtime["gemini"].attempts[-1].outcome == "late"
    assert result.partial is not None and result.partial.late_voice_ids == [by_runtime["gemini"].id]


def test_a_council_whose_voices_all_answer_in_time_is_not_partial(tmp_path: Path) -> None:
    voices = [
        ScriptedRuntime(answer_for(Q, "NO"), family=f, delay_s=0.05)
        for f in ("anthropic", "openai", "google")
    ]
    result = convene(
        {"id": "dl3", "question": Q, "n": 3, "budget": {"deadline_s": 5}},
        CouncilOptions(runtimes=voices, rune_dir=tmp_path / ".rune"),
    )
    assert result.voices_valid == 3
    assert result.partial is None and result.stamp_label() == "MULTI_FAMILY"


def test_unconfirmed_families_never_end_the_wait(tmp_path: Path) -> None:
    voices = [
        ScriptedRuntime(answer_for(Q, "NO"), family="anthropic", confirmed=False),
        ScriptedRuntime(answer_for(Q, "NO"), family="openai", confirmed=False),
        ScriptedRuntime(answer_for(Q, "NO"), family="google", delay_s=1.0),
    ]
    result = convene(
        {"id": "dl4", "question": Q, "n": 3, "budget": {"deadline_s": 0.2}},
        CouncilOptions(runtimes=voices, rune_dir=tmp_path / ".rune"),
    )
    # Two answers, but of families nobody confirmed: the third voice is waited for.
    assert result.voices_valid == 3 and result.partial is None


def test_the_config_default_applies_and_is_recorded_and_a_request_overrides_it(
    tmp_path: Path,
) -> None:
    rune = tmp_path / ".rune"
    rune.mkdir()
    (rune / "council.toml").write_text("[council]\ndeadline = 0.3\n")
    from rune_council.config import load_config
    from rune_council.core.paths import RuneDir

    config = load_config(RuneDir.resolve(rune), {"HOME": str(tmp_path)})
    assert config.council.deadline == 0.3

    def voices() -> list[ScriptedRuntime]:
        return [
            ScriptedRuntime(answer_for(Q, "NO"), family="anthropic", name="a"),
            ScriptedRuntime(answer_for(Q, "NO"), family="openai", name="b"),
            ScriptedRuntime(answer_for(Q, "NO"), family="google", name="c", delay_s=3),
        ]

    result = convene(
        {"id": "dl5", "question": Q, "n": 3},
        CouncilOptions(runtimes=voices(), rune_dir=rune, config=config),
    )
    assert result.request.budget.deadline_s == 0.3
    assert result.partial is not None and len(result.partial.late_voice_ids) == 1

    result = convene(
        {"id": "dl6", "question": Q, "n": 3, "budget": {"deadline_s": 10}},
        CouncilOptions(runtimes=voices(), rune_dir=rune, config=config),
    )
    assert result.request.budget.deadline_s == 10 and result.partial is None


def test_a_misspelled_council_key_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    rune = tmp_path / ".rune"
    rune.mkdir()
    (rune / "council.toml").write_text("[council]\ndeadlin = 30\n")
    from rune_council.config import load_config
    from rune_council.core.errors import RuntimeConfigError
    from rune_council.core.paths import RuneDir

    with pytest.raises(RuntimeConfigError, match="deadline"):
        load_config(RuneDir.resolve(rune), {"HOME": str(tmp_path)})


def test_the_command_line_flag_and_the_list_and_show_views(world: dict[str, Any]) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(world["bin"], "codex", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(world["bin"], "gemini", answer=answer(Q, "NO", [UNDO]), sleep_s=30)
    env = {**os.environ, **world["env"], "RUNE_COUNCIL_DIR": str(world["rune"])}
    env.pop("RUNE_DEBUG", None)

    def rune(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rune_council.cli", "council", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    out = rune("run", "--deadline", "1", "--id", "dl7", "--json", Q)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["request"]["budget"]["deadline_s"] == 1
    assert data["partial"]["deadline_s"] == 1
    shown = rune("show", "dl7")
    assert "MULTI_FAMILY (partial: 1 late at the 1 s deadline)" in shown.stdout
    listed = rune("list")
    assert "MULTI_FAMILY (partial)" in listed.stdout
