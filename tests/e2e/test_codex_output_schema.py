"""The real codex holds a voice answer to the contract's schema (``exec --output-schema``),
and asks for no shape when the council wants free text (a ballot)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from rune_council.core.answer import answer_problem
from rune_council.core.schema import wire_schema
from rune_council.runtimes.cli import CliRuntime
from rune_council.runtimes.clis.codex import ADAPTER
from tests.e2e.clis import INSTALL_HINT, cli_environment, node_bin_dir, real_clis_installed
from tests.e2e.model_server import OPENAI_RESPONSES, ModelServer
from tests.helpers import answer, claim

pytestmark = pytest.mark.e2e

QUESTION = "Is the orders sharding plan safe to execute as written?"
ANSWER = answer(
    QUESTION,
    "NO, there is no way back.",
    [claim("No rollback step", severity="MUST", ref="plan.md:6", quote="No rollback.")],
    fenced=False,
)


def ask(runtime: CliRuntime, prompt: str, **kw: Any) -> Any:
    return asyncio.run(runtime.ask(prompt, timeout_s=60, max_output_bytes=1_000_000, **kw))


def test_codex_sends_the_answer_schema_only_when_an_answer_is_asked(tmp_path: Path) -> None:
    if not real_clis_installed():
        pytest.fail(f"real CLIs not found in {node_bin_dir()}: {INSTALL_HINT}", pytrace=False)
    with ModelServer(keep_bodies=True) as server:
        server.answers[OPENAI_RESPONSES] = ANSWER
        env = cli_environment(tmp_path, server)
        codex = shutil.which("codex", path=env["PATH"])
        assert codex is not None
        runtime = CliRuntime(ADAPTER, codex, parent_env=env)

        voiced = ask(runtime, f"Answer as a council voice: {QUESTION}", check=answer_problem)
        asked_answer = server.requests.for_protocol(OPENAI_RESPONSES)
        ballot = ask(runtime, "Rank the proposals: reply with one RANK line.")
        asked_ballot = server.requests.for_protocol(OPENAI_RESPONSES)[len(asked_answer) :]

    assert voiced.outcome == "ok", voiced.detail
    assert answer_problem(voiced.text) is None
    assert asked_answer, "codex never reached the model server"
    for request in asked_answer:
        fmt = request.body["text"]["format"]
        assert fmt["type"] == "json_schema" and fmt["strict"] is True
        assert fmt["schema"] == wire_schema("voice-answer")

    assert ballot.outcome == "ok", ballot.detail
    assert asked_ballot
    for request in asked_ballot:
        fmt = (request.body.get("text") or {}).get("format") or {}
        assert fmt.get("type") != "json_schema"
