"""The ``1devtool-agent`` bridge: one local program that fans a prompt out to installed agents.

When present (on PATH, on the login-shell PATH, or in its per-user location) DETECT asks
``1devtool-agent list --json`` which agents it can reach, and a voice for such an agent runs
``1devtool-agent run --to=<agent> --prompt-stdin --json`` with the prompt on stdin. A CLI that
rune-council can run itself is always run directly, with its own read-only flags; the bridge
only serves agents that are not otherwise reachable.

The bridge's output is read tolerantly, because its exact JSON shape is not published: the
agent list may be a list of names, a list of objects (``name``/``id``/``agent``, with an
optional ``available``/``installed``/``status`` and ``version``) or either under ``agents``;
an answer is the first of ``output``, ``response``, ``text``, ``result``, ``answer``, and a
truthy ``error`` (or ``ok``/``success`` false, or ``status: "error"``) is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import safejson
from ..core.contract import FamilyConfidence, VoiceSource
from ..core.records import record
from ..core.runtime import ReplyCheck, RuntimeReply
from .base import EnvPolicy, merged_path, redact, secret_values
from .clis import BUILTIN

if TYPE_CHECKING:
    from .parsers import Parsed

# Finding the bridge is all a council asks of this module when no bridge is installed (every
# council checks): running one, and reading what it prints, load the process and parsing
# machinery in the functions that do so.

BRIDGE_NAME = "1devtool-agent"
RUNTIME_PREFIX = "1devtool:"
LIST_TIMEOUT_S = 10.0
_ANSWER_KEYS = ("output", "response", "text", "result", "answer")
_BRIDGE_ENV_PREFIXES = ("ONEDEVTOOL_", "DEVTOOL_")


def per_user_locations(env: Mapping[str, str]) -> list[Path]:
    home = Path(env.get("HOME") or "~").expanduser()
    return [home / ".1devtool" / "bin" / BRIDGE_NAME, home / ".local" / "bin" / BRIDGE_NAME]


def find_bridge(env: Mapping[str, str], extra_path: Sequence[str] = ()) -> str | None:
    search = merged_path(env.get("PATH", os.defpath), extra_path)
    found = shutil.which(BRIDGE_NAME, path=search)
    if found:
        return os.path.abspath(found)
    for candidate in per_user_locations(env):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@record(frozen=True)
class BridgeAgent:
    name: str
    version: str | None


def parse_agent_list(stdout: str) -> list[BridgeAgent]:
    try:
        doc = safejson.loads(stdout, what="agent list")
    except json.JSONDecodeError:
        return []
    if isinstance(doc, dict):
        doc = doc.get("agents", [])
    if not isinstance(doc, list):
        return []
    agents: list[BridgeAgent] = []
    for entry in doc:
        if isinstance(entry, str) and entry.strip():
            agents.append(BridgeAgent(entry.strip(), None))
            continue
        if not isinstance(entry, dict):
            continue
        name = next(
            (entry[k] for k in ("name", "id", "agent") if isinstance(entry.get(k), str)), ""
        )
        if not name.strip() or not _usable(entry):
            continue
        version = entry.get("version")
        agents.append(BridgeAgent(name.strip(), version if isinstance(version, str) else None))
    return agents


def _usable(entry: Mapping[str, object]) -> bool:
    for key in ("available", "installed"):
        if key in entry and entry[key] is not True:
            return False
    status = entry.get("status")
    return not isinstance(status, str) or status.lower() in (
        "available",
        "ready",
        "installed",
        "ok",
    )


async def list_agents(bridge: str, env: Mapping[str, str]) -> tuple[list[BridgeAgent], str]:
    """The agents the bridge reaches, and a line saying how asking it went."""
    from .process import run_process

    result = await run_process(
        [bridge, "list", "--json"],
        stdin=b"",
        env=bridge_env(None, env),
        timeout_s=LIST_TIMEOUT_S,
        max_stdout=1_000_000,
    )
    if result.outcome != "ok":
        return [], f"{BRIDGE_NAME} list failed: {result.detail}"
    agents = parse_agent_list(result.stdout.decode("utf-8", errors="replace"))
    return agents, f"{BRIDGE_NAME} lists {len(agents)} agent(s)"


def bridge_env(agent: str | None, parent: Mapping[str, str]) -> dict[str, str]:
    """The bridge gets its own variables plus those of the agent it is asked to run."""
    adapter = BUILTIN.get(agent) if agent else None
    policy = adapter.env if adapter else EnvPolicy()
    names = adapter.extra_env_names(parent) if adapter else []
    merged = EnvPolicy(
        names=policy.names,
        prefixes=policy.prefixes + _BRIDGE_ENV_PREFIXES,
        fixed=policy.fixed,
    )
    return merged.build(parent, names)


def parse_bridge_answer(stdout: str, stderr: str) -> Parsed:
    from .parsers import Parsed, json_objects, tail

    for obj in reversed(json_objects(stdout)):
        failed = (
            bool(obj.get("error"))
            or obj.get("ok") is False
            or obj.get("success") is False
            or (isinstance(obj.get("status"), str) and str(obj["status"]).lower() == "error")
        )
        if failed:
            why = obj.get("error") or obj.get("message") or obj.get("status")
            return Parsed(None, f"{BRIDGE_NAME} reported an error: {tail(str(why))}")
        for key in _ANSWER_KEYS:
            value = obj.get(key)
            if isinstance(value, str) and value.strip():
                return Parsed(value)
    return Parsed(None, f"no answer in {BRIDGE_NAME} output: {tail(stdout or stderr)}")


@record(frozen=True)
class BridgeRuntime:
    """One agent reached through the bridge."""

    bridge: str
    agent: str
    family: str
    confidence: FamilyConfidence
    parent_env: Mapping[str, str] | None = None
    extra_path: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{RUNTIME_PREFIX}{self.agent}"

    @property
    def source(self) -> VoiceSource:
        return "external-cli"

    @property
    def model_family(self) -> str:
        return self.family

    @property
    def family_confidence(self) -> FamilyConfidence:
        return self.confidence

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        parent = dict(os.environ) if self.parent_env is None else dict(self.parent_env)
        env = bridge_env(self.agent, parent)
        if self.extra_path:
            env["PATH"] = merged_path(env.get("PATH", os.defpath), self.extra_path)
        secrets = secret_values(env)
        from .cli_adapter import classify_exit
        from .process import run_process

        started = time.monotonic()
        result = await run_process(
            [self.bridge, "run", f"--to={self.agent}", "--prompt-stdin", "--json"],
            stdin=prompt.encode("utf-8"),
            env=env,
            timeout_s=timeout_s,
            max_stdout=max_output_bytes,
        )
        latency = int((time.monotonic() - started) * 1000)
        if result.outcome in ("timeout", "too_large", "spawn_error", "cancelled"):
            return RuntimeReply(
                outcome=result.outcome,
                detail=redact(result.detail, secrets),
                exit_code=result.exit_code,
                latency_ms=latency,
            )
        parsed = parse_bridge_answer(
            result.stdout.decode("utf-8", errors="replace"),
            result.stderr.decode("utf-8", errors="replace"),
        )
        outcome, detail = classify_exit(result.exit_code, parsed)
        text = redact(parsed.text, secrets) if parsed.text is not None else None
        return RuntimeReply(
            outcome=outcome,
            text=text,
            detail=redact(detail, secrets),
            exit_code=result.exit_code,
            latency_ms=latency,
        )
