"""The library's front door: one ``CouncilOptions`` value, and the same choices as the CLI."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from rune_council import CouncilOptions, FunctionRuntime, RequestError, convene
from rune_council.config import trust_file
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, QUESTION, ROLLBACK, UNDO, answer

Q = QUESTION


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return {
        "bin": bin_dir,
        "env": {"PATH": path_with(bin_dir), "HOME": str(tmp_path)},
        "rune": tmp_path / ".rune",
        "tmp": tmp_path,
    }


def request(run_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": run_id, "question": Q, "artifact": {"name": "plan.md", "text": PLAN}, **extra}


def host_script(tmp: Path, stance: str) -> str:
    """A subagent command: reads the prompt on stdin, prints one well-formed answer."""
    script = tmp / f"host-{stance}.py"
    script.write_text(
        f"import sys\nsys.stdin.read()\nprint({answer(Q, stance, [])!r})\n", encoding="utf-8"
    )
    return f"{sys.executable} {script}"


def test_options_are_one_frozen_value() -> None:
    options = CouncilOptions(refresh=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.refresh = False  # type: ignore[misc]  # the point: assignment must fail
    assert dataclasses.replace(options, overwrite=True).refresh is True


def test_extra_runtimes_sit_beside_the_detected_clis(world: dict[str, Any]) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]))
    mine = FunctionRuntime(
        lambda p: answer(Q, "NO", [UNDO]),
        name="mine",
        model_family="meta",
        family_confidence="confirmed",
        source="external-cli",
    )
    result = convene(
        request("extra", n=2),
        CouncilOptions(
            extra_runtimes=[mine], allow_external=True, rune_dir=world["rune"], env=world["env"]
        ),
    )
    assert {v.runtime for v in result.voices} == {"claude", "mine"}
    assert result.decorrelation == "MULTI_FAMILY"
    detected = {d.runtime: d for d in result.runtime_report.detected}
    assert detected["claude"].path is not None  # probed on PATH
    assert detected["mine"].detail == "supplied by the caller"


def test_an_extra_runtime_may_not_take_a_detected_ones_name(world: dict[str, Any]) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]))
    clash = FunctionRuntime(lambda p: "", name="claude", model_family="anthropic")
    with pytest.raises(RequestError, match="claude"):
        convene(
            request("clash", n=2),
            CouncilOptions(
                extra_runtimes=[clash],
                allow_external=True,
                rune_dir=world["rune"],
                env=world["env"],
            ),
        )
    assert not (world["rune"] / "council" / "run-clash.json").exists()


def test_the_library_takes_the_subagent_command_from_council_toml(world: dict[str, Any]) -> None:
    world["rune"].mkdir()
    (world["rune"] / "council.toml").write_text(
        f'[subagent]\ncommand = "{host_script(world["tmp"], "YES")}"\nfamily = "anthropic"\n',
        encoding="utf-8",
    )
    # A project file runs no program until the user trusts it.
    trust_file(world["rune"] / "council.toml", world["env"])
    result = convene(request("cfg", n=2), CouncilOptions(rune_dir=world["rune"], env=world["env"]))
    assert result.voices_valid == 2
    assert {v.runtime for v in result.voices} == {"subagent-cmd"}
    assert {v.model_family for v in result.voices} == {"anthropic"}
    # A family named in a file is recorded, never confirmed: it buys no decorrelation.
    assert {v.family_confidence for v in result.voices} == {"unknown"}
    assert result.decorrelation == "NO_DECORRELATION"


def test_the_callers_subagent_comes_before_council_toml(world: dict[str, Any]) -> None:
    world["rune"].mkdir()
    (world["rune"] / "council.toml").write_text(
        f'[subagent]\ncommand = "{host_script(world["tmp"], "YES")}"\n', encoding="utf-8"
    )
    trust_file(world["rune"] / "council.toml", world["env"])
    given = CouncilOptions(
        subagent_command=host_script(world["tmp"], "NO"),
        subagent_family="google",
        rune_dir=world["rune"],
        env=world["env"],
    )
    result = convene(request("own", n=2), given)
    assert result.voices_valid == 2 and {v.stance for v in result.voices} == {"NO"}
    assert {v.model_family for v in result.voices} == {"google"}


def test_a_subagent_and_a_subagent_command_together_are_refused(world: dict[str, Any]) -> None:
    options = CouncilOptions(
        subagent=lambda p: answer(Q, "NO", []),
        subagent_command="my-agent --answer",
        rune_dir=world["rune"],
        env=world["env"],
    )
    with pytest.raises(RequestError, match="not both"):
        convene(request("both", n=2), options)
    assert not (world["rune"] / "council" / "run-both.json").exists()
