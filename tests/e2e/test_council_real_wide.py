"""``rune council`` end to end over the wider family map: qwen, opencode and aider join
claude, codex and gemini, all real binaries talking to the loopback ModelServer.

What a user would check: one council mixes five real CLIs and counts four confirmed
families; a wrapper (opencode, aider) stays ``unknown`` unless its own config names a
model of a known family; the CLIs that exit 0 after an API error (qwen, aider) are
recorded as failed voices, never as answers.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.clis import cli_environment
from tests.e2e.model_server import ANTHROPIC, GEMINI, OPENAI_CHAT, OPENAI_RESPONSES, ModelServer
from tests.e2e.openai_clis import (
    INSTALL_HINT,
    add_openai_clis,
    only_these_clis,
    openai_clis_installed,
)
from tests.e2e.test_council_real import (
    REPO,
    ROLLBACK_QUOTE,
    ROLLBACK_REF,
    SUBAGENT_SCRIPT,
    Council,
    Sighting,
    claude_answer,
    codex_answer,
    gemini_answer,
    load_result,
    make_question,
    run_council,
    voices_by_runtime,
    watching_answer,
)
from tests.helpers import PLAN, answer, claim

pytestmark = pytest.mark.e2e

CHAT_ROLLBACK = (
    "Once the weekend cutover starts there is no written path back to the single orders "
    "table, so any failure strands the data."
)


def chat_answer(prompt: str) -> str:
    return answer(
        "Is the orders sharding plan safe to execute as written?",
        "NO, there is no way back if the migration fails.",
        [claim(CHAT_ROLLBACK, severity="MUST", ref=ROLLBACK_REF, quote=ROLLBACK_QUOTE)],
    )


@pytest.fixture
def server() -> Any:
    with ModelServer() as running:
        yield running


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    if not openai_clis_installed():
        pytest.fail(f"qwen, opencode or aider not installed: {INSTALL_HINT}", pytrace=False)
    work = tmp_path / "work"
    work.mkdir()
    (work / "plan.md").write_text(PLAN, encoding="utf-8")
    return work


def environment(
    tmp_path: Path, server: ModelServer, names: tuple[str, ...], **kw: str
) -> dict[str, str]:
    env = cli_environment(tmp_path, server)
    add_openai_clis(env, server, **kw)
    only_these_clis(env, names, tmp_path / "only")
    env["PYTHONPATH"] = str(REPO)
    env["RUNE_COUNCIL_ALLOW_EXTERNAL"] = "1"  # consent for external dispatch
    return env


def test_one_council_mixes_five_real_clis_and_four_families(
    tmp_path: Path, server: ModelServer, workdir: Path
) -> None:
    names = ("claude", "codex", "gemini", "qwen", "opencode")
    env = environment(tmp_path, server, names)
    marker = "QXwide5"
    question = make_question(marker)
    council = Council()
    sightings: list[Sighting] = []
    for protocol, reply in (
        (ANTHROPIC, claude_answer),
        (OPENAI_RESPONSES, codex_answer),
        (GEMINI, gemini_answer),
        (OPENAI_CHAT, chat_answer),
    ):
        server.answers[protocol] = watching_answer(protocol, marker, council, sightings, reply)

    ran = run_council(workdir, env, question, "wide5", "--n", "5", council=council)
    result = load_result(ran, workdir, "wide5")

    voices = voices_by_runtime(result)
    assert sorted(voices) == sorted(names), result["voices"]
    for name, voice in voices.items():
        assert voice["status"] == "complete", voice
        assert [(a["runtime"], a["outcome"]) for a in voice["attempts"]] == [(name, "ok")]
    assert (voices["qwen"]["model_family"], voices["qwen"]["family_confidence"]) == (
        "qwen", "confirmed",
    )  # fmt: skip
    assert (voices["opencode"]["model_family"], voices["opencode"]["family_confidence"]) == (
        "unknown", "unknown",
    )  # fmt: skip
    assert result["decorrelation"] == "MULTI_FAMILY"
    assert result["distinct_families"] == ["anthropic", "google", "openai", "qwen"]
    rollback = [
        c
        for c in result["agreement"]["consensus_claims"]
        if c["matched_by"]["key"] == "@artifact:6"
    ]
    assert len(rollback) == 1, result["agreement"]
    assert {"anthropic", "openai", "qwen"} <= set(rollback[0]["families"])
    # The wrapper's agreement is listed, but it is not what makes this consensus.
    assert len({"anthropic", "google", "openai", "qwen"} & set(rollback[0]["families"])) >= 2

    # Every CLI got the question through stdin, and never on a command line.
    chat = server.requests.for_protocol(OPENAI_CHAT)
    assert len(chat) == 2 and all(make_question(marker) in r.prompt for r in chat), chat
    for protocol in (ANTHROPIC, OPENAI_RESPONSES, GEMINI):
        assert len(server.requests.for_protocol(protocol)) == 1
    assert len(sightings) == 5
    for sighting in sightings:
        assert sighting.hits == [], f"the prompt is visible in a process table: {sighting}"
        assert all(r.startswith("127.0.0.1:") for r in sighting.remotes), sighting


def test_wrappers_stay_unknown_unless_their_own_config_names_the_model(
    tmp_path: Path, server: ModelServer, workdir: Path
) -> None:
    # opencode's config names a Claude model on the stub provider; aider's names none.
    names = ("qwen", "opencode", "aider")
    env = environment(tmp_path, server, names, opencode_model="claude-sonnet-4-5")
    server.answers[OPENAI_CHAT] = chat_answer

    ran = run_council(workdir, env, make_question("QXwrap"), "wrap3", "--n", "3")
    result = load_result(ran, workdir, "wrap3")

    voices = voices_by_runtime(result)
    assert sorted(voices) == sorted(names), result["voices"]
    assert all(v["status"] == "complete" for v in voices.values()), result["voices"]
    detected = {d["runtime"]: d for d in result["runtime_report"]["detected"]}
    opencode, aider = detected["opencode"], detected["aider"]
    assert (opencode["model_family"], opencode["family_confidence"]) == ("anthropic", "confirmed")
    assert "claude-sonnet-4-5" in opencode["detail"] and "opencode.json" in opencode["detail"]
    assert (aider["model_family"], aider["family_confidence"]) == ("unknown", "unknown")
    assert voices["aider"]["model_family"] == "unknown"
    assert result["distinct_families"] == ["anthropic", "qwen"]
    models = sorted(r.model or "" for r in server.requests.for_protocol(OPENAI_CHAT))
    assert models == ["claude-sonnet-4-5", "stub-model", "stub-model"]


def test_api_errors_behind_exit_0_are_failed_voices(
    tmp_path: Path, server: ModelServer, workdir: Path
) -> None:
    names = ("qwen", "opencode", "aider")
    env = environment(tmp_path, server, names)
    server.fail[OPENAI_CHAT] = 400
    subagent = f"{shlex.quote(sys.executable)} {shlex.quote(str(SUBAGENT_SCRIPT))}"

    ran = run_council(
        workdir, env, make_question("QXfail"), "fail3", "--n", "3", "--subagent-cmd", subagent
    )
    result = load_result(ran, workdir, "fail3")

    voices = voices_by_runtime(result)
    first = {name: v["attempts"][0] for name, v in voices.items()}
    assert (first["qwen"]["outcome"], first["qwen"]["exit_code"]) == ("error_reported", 0)
    assert "qwen reported an API error" in first["qwen"]["detail"]
    assert (first["aider"]["outcome"], first["aider"]["exit_code"]) == ("error_reported", 0)
    assert "aider reported an API error" in first["aider"]["detail"]
    assert first["opencode"]["outcome"] == "exit_nonzero"
    assert "HTTP 400" in first["opencode"]["detail"]
    for voice in voices.values():
        # The error text never became an answer: each slot went to the subagent.
        assert voice["is_fallback"] is True and voice["runtime"] == "subagent-cmd", voice
    assert sorted(r.status for r in server.requests.for_protocol(OPENAI_CHAT)) == [400] * 3
