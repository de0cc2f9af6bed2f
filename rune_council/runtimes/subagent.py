"""Subagents: the host's own voices, used when no external runtime can take a slot.

A library caller hands in a callable (sync or async, prompt in, answer text out); the CLI
takes a command that reads the prompt on stdin and prints the answer. Both wear the family
the host declares; by default ``unknown``, so they never inflate the decorrelation count.
"""

from __future__ import annotations

import asyncio
import inspect
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..core.contract import FamilyConfidence, VoiceSource
from ..core.errors import RuntimeConfigError
from ..core.runtime import ReplyCheck, RuntimeReply
from .base import EnvPolicy, current_env, redact, secret_values
from .process import run_process

SubagentFn = Callable[[str], str | Awaitable[str]]


@dataclass(frozen=True)
class FunctionRuntime:
    """An in-process callable as a runtime: the library's subagent hook and a test fake."""

    fn: SubagentFn
    name: str = "internal"
    model_family: str = "unknown"
    family_confidence: FamilyConfidence = "unknown"
    source: VoiceSource = "subagent"

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        started = time.monotonic()

        async def call() -> str:
            value = self.fn(prompt)
            if inspect.isawaitable(value):
                value = await value
            return str(value)

        try:
            text = await asyncio.wait_for(call(), timeout=timeout_s)
        except TimeoutError:
            ms = int((time.monotonic() - started) * 1000)
            return RuntimeReply(
                outcome="timeout", detail=f"timed out after {timeout_s:g} s", latency_ms=ms
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a host callable can fail in any way; record, never crash
            ms = int((time.monotonic() - started) * 1000)
            return RuntimeReply(
                outcome="error_reported", detail=f"{type(exc).__name__}: {exc}", latency_ms=ms
            )
        ms = int((time.monotonic() - started) * 1000)
        truncated = len(text.encode("utf-8")) > max_output_bytes
        if truncated:
            return RuntimeReply(
                outcome="too_large",
                detail=f"answer exceeded {max_output_bytes} bytes",
                latency_ms=ms,
            )
        return RuntimeReply(outcome="ok", text=text, detail="answered", latency_ms=ms)


@dataclass(frozen=True)
class CommandRuntime:
    """A configured command as a subagent: prompt on stdin, answer on stdout."""

    argv: Sequence[str]
    name: str = "subagent-cmd"
    model_family: str = "unknown"
    family_confidence: FamilyConfidence = "unknown"
    pass_env: Sequence[str] = ()
    parent_env: Mapping[str, str] | None = None
    source: VoiceSource = field(default="subagent")
    # A process per call, like an AI CLI (see ``runtimes.limits``).
    default_max_concurrent: int = 4

    @classmethod
    def from_command_line(cls, command: str, **kwargs: object) -> CommandRuntime:
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise RuntimeConfigError(f"subagent command cannot be parsed: {exc}") from exc
        if not argv:
            raise RuntimeConfigError("subagent command is empty")
        # ``kwargs`` are the dataclass fields besides ``argv``, forwarded as given; mypy cannot
        # match a ``**kwargs: object`` mapping to each field's own type.
        return cls(argv=argv, **kwargs)  # type: ignore[arg-type]

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        parent = current_env() if self.parent_env is None else self.parent_env
        env = EnvPolicy(prefixes=("RUNE_SUBAGENT_",)).build(parent, self.pass_env)
        secrets = secret_values(env)
        started = time.monotonic()
        result = await run_process(
            list(self.argv),
            stdin=prompt.encode("utf-8"),
            env=env,
            timeout_s=timeout_s,
            max_stdout=max_output_bytes,
        )
        ms = int((time.monotonic() - started) * 1000)
        if result.outcome != "ok":
            return RuntimeReply(
                outcome=result.outcome,
                detail=redact(result.detail, secrets),
                exit_code=result.exit_code,
                latency_ms=ms,
            )
        text = result.stdout.decode("utf-8", errors="replace")
        if not text.strip():
            return RuntimeReply(
                outcome="error_reported",
                detail="printed nothing",
                exit_code=result.exit_code,
                latency_ms=ms,
            )
        return RuntimeReply(
            outcome="ok",
            text=redact(text, secrets),
            detail="answered",
            exit_code=result.exit_code,
            latency_ms=ms,
        )
