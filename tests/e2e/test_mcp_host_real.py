"""A real agent host calls ``rune council mcp``: the pinned claude CLI with the server in its
own MCP configuration, its model being the loopback ModelServer.

The scripted model answers the host's first request with a call of the council's
``convene`` tool; claude starts the server from its MCP configuration, calls the tool, the
council runs (its voices are fake CLIs run as real processes) and claude sends the tool
result back to the model in its next request, where the test reads it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.clis import INSTALL_HINT, STUB_MODEL, cli_environment, node_bin_dir
from tests.e2e.model_server import ANTHROPIC, ModelServer, ToolCall
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, QUESTION, ROLLBACK, SHARDS, UNDO, answer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SERVER = "council"
TOOL = f"mcp__{SERVER}__convene"
RUN_ID = "from-the-host"
FINAL = "The council found no rollback step; I would not run the migration yet."


def _tool_results(body: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for message in body.get("messages", []) if isinstance(body, dict) else []:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            found += [part for part in content if part.get("type") == "tool_result"]
    return found


def _offers_convene(body: Any) -> bool:
    return isinstance(body, dict) and any(t.get("name") == TOOL for t in body.get("tools", []))


def _text(result: dict[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def test_claude_calls_convene_and_the_result_reaches_its_model(tmp_path: Path) -> None:
    claude = node_bin_dir() / "claude"
    if not claude.exists():
        pytest.fail(f"claude not found in {node_bin_dir()}: {INSTALL_HINT}", pytrace=False)
    project = tmp_path / "project"
    project.mkdir()
    (project / "plan.md").write_text(PLAN, encoding="utf-8")
    voices = tmp_path / "voices"
    install_fake(voices, "claude", answer=answer(QUESTION, "NO", [ROLLBACK]))
    install_fake(voices, "codex", answer=answer(QUESTION, "NO", [UNDO]))
    install_fake(voices, "gemini", answer=answer(QUESTION, "YES", [SHARDS]))

    call = ToolCall(
        TOOL,
        {"question": QUESTION, "artifact": "plan.md", "mode": "critique", "id": RUN_ID},
    )

    def script(body: Any) -> ToolCall | None:
        # Ask for the council once, in the conversation that offers the tool.
        return call if _offers_convene(body) and not _tool_results(body) else None

    with ModelServer(keep_bodies=True) as server:
        server.tool_calls[ANTHROPIC] = script
        server.answers[ANTHROPIC] = FINAL
        env = cli_environment(tmp_path, server)
        # In print mode claude connects --mcp-config servers in the background and may ask
        # its model before the tools are there; a user's scripted run would wait the same way.
        env["MCP_CONNECTION_NONBLOCKING"] = "0"
        config = tmp_path / "mcp.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        SERVER: {
                            "command": sys.executable,
                            "args": ["-m", "rune_council.cli", "council", "mcp", "--yes"],
                            # The voices the council finds are the fakes, not this host.
                            "env": {
                                "PATH": path_with(voices),
                                "HOME": str(tmp_path / "home"),
                                "LANG": "C.UTF-8",
                            },
                        }
                    }
                }
            ),
            encoding="utf-8",
        )
        out = subprocess.run(
            [
                str(claude),
                "-p",
                "--bare",
                "--model",
                STUB_MODEL,
                "--mcp-config",
                str(config),
                "--strict-mcp-config",
                "--allowedTools",
                TOOL,
                "--output-format",
                "json",
            ],
            input="Ask the council whether the sharding plan in plan.md is safe to run.",
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        requests = [
            r for r in server.requests.for_protocol(ANTHROPIC) if "count_tokens" not in r.path
        ]

    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    printed = json.loads(out.stdout)
    assert printed["is_error"] is False and printed["result"] == FINAL

    offered = [r for r in requests if _offers_convene(r.body)]
    assert offered, "claude never offered the council's tools to its model"
    tool_defs = {t["name"]: t for t in offered[0].body["tools"]}
    assert {f"mcp__{SERVER}__{n}" for n in ("convene", "detect", "tally")} <= set(tool_defs)
    offered_keys = tool_defs[TOOL]["input_schema"]["properties"]
    assert offered_keys["mode"]["anyOf"][0]["enum"][0] == "critique"
    assert "arguments" in offered_keys and "yes" not in offered_keys

    answered = [r for r in requests if _tool_results(r.body)]
    assert answered, "no request after the tool call carried its result"
    (result,) = [t for t in _tool_results(answered[0].body) if t["tool_use_id"] == call.id]
    text = _text(result)
    assert not result.get("is_error"), text[:2000]
    # This claude hands its model the tool's structured content (the CouncilResult as
    # JSON) rather than the Markdown text part.
    seen = json.loads(text)
    run_file = project / ".rune" / "council" / f"run-{RUN_ID}.json"
    doc = json.loads(run_file.read_text(encoding="utf-8"))
    assert seen["id"] == RUN_ID and seen["decorrelation"] == "MULTI_FAMILY"
    assert seen["agreement"] == doc["agreement"]
    assert any(c["claim"] == ROLLBACK["text"] for c in seen["agreement"]["consensus_claims"])
    assert doc["status"] == "complete" and doc["decorrelation"] == "MULTI_FAMILY"
    assert doc["runtime_report"]["consent"] == "granted (rune council mcp --yes)"
    assert doc["request"]["artifact"]["path"] == str((project / "plan.md").resolve())
