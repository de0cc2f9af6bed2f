"""A detected AI CLI as a council runtime."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..contract import FamilyConfidence, VoiceSource
from .adapters import CliAdapter, adapter_env, classify_exit
from .base import RuntimeReply, redact, secret_values
from .process import run_process


@dataclass(frozen=True)
class CliRuntime:
    adapter: CliAdapter
    path: str
    parent_env: Mapping[str, str] | None = None

    @property
    def name(self) -> str:
        return self.adapter.name

    @property
    def source(self) -> VoiceSource:
        return "external-cli"

    @property
    def model_family(self) -> str:
        return self.adapter.model_family

    @property
    def family_confidence(self) -> FamilyConfidence:
        return self.adapter.family_confidence

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        on_start: Callable[[int], None] | None = None,
    ) -> RuntimeReply:
        env = adapter_env(self.adapter, self.parent_env)
        secrets = secret_values(env)
        started = time.monotonic()
        result = await run_process(
            self.adapter.argv(self.path),
            stdin=prompt.encode("utf-8"),
            env=env,
            timeout_s=timeout_s,
            max_stdout=max_output_bytes,
            on_start=on_start,
        )
        latency = int((time.monotonic() - started) * 1000)
        if result.outcome in ("timeout", "too_large", "spawn_error", "cancelled"):
            return RuntimeReply(
                result.outcome, None, redact(result.detail, secrets), result.exit_code, latency
            )
        stdout = result.stdout.decode("utf-8", errors="replace")
        stderr = result.stderr.decode("utf-8", errors="replace")
        parsed = self.adapter.parse(stdout, stderr)
        outcome, detail = classify_exit(result.exit_code, parsed)
        text = redact(parsed.text, secrets) if parsed.text is not None else None
        return RuntimeReply(outcome, text, redact(detail, secrets), result.exit_code, latency)
