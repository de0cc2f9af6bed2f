"""A detected AI CLI as a council runtime."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ..core.contract import Attempt, FamilyConfidence, VoiceSource
from ..core.runtime import ReplyCheck, RuntimeReply
from ..core.schema import wire_schema
from . import lineage
from .base import merged_path, redact, secret_values
from .cli_adapter import CliAdapter, adapter_env, classify_exit
from .parsers import tail
from .process import ProcessResult, make_scratch_dir, remove_scratch_dir, run_process

# What a failed run printed last, kept whole in its attempt record (the reason is one line).
OUTPUT_TAIL_CAP = 2000


@functools.cache
def answer_schema_bytes() -> bytes:
    """The voice answer's wire schema as a CLI's schema file holds it."""
    return (json.dumps(wire_schema("voice-answer"), indent=2) + "\n").encode("utf-8")


@dataclass(frozen=True)
class CliRuntime:
    adapter: CliAdapter
    path: str
    parent_env: Mapping[str, str] | None = None
    # Detection may promote a wrapper to the family its own config names.
    family: str | None = None
    confidence: FamilyConfidence | None = None
    # Directories from the user's login-shell PATH (nvm, volta, pipx ...), so a CLI found
    # there also finds its interpreter.
    extra_path: tuple[str, ...] = ()
    # Variables the user allows through to every external CLI, besides the adapter's own.
    allow_env: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.adapter.name

    @property
    def source(self) -> VoiceSource:
        return "external-cli"

    @property
    def model_family(self) -> str:
        return self.family or self.adapter.model_family

    @property
    def family_confidence(self) -> FamilyConfidence:
        return self.confidence or self.adapter.family_confidence

    @property
    def default_max_concurrent(self) -> int:
        """Calls in flight at once across councils sharing limits (``runtimes.limits``)."""
        return self.adapter.max_concurrent

    def environment(self) -> dict[str, str]:
        parent = dict(os.environ) if self.parent_env is None else dict(self.parent_env)
        env = adapter_env(self.adapter, parent, self.allow_env)
        if self.extra_path:
            env["PATH"] = merged_path(env.get("PATH", os.defpath), self.extra_path)
        return env

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        # ``check`` is not applied: a CLI has no other model to fail over to, so GATE
        # judges its answer like any other. It does say a voice answer is wanted (ballots
        # and merges come without one), which a CLI that takes a schema is held to.
        wants_answer = check is not None and bool(self.adapter.answer_schema_args)
        env = self.environment()
        secrets = secret_values(env)
        started = time.monotonic()
        first = await self._run_once(prompt, env, timeout_s, max_output_bytes, wants_answer)
        retry = self.adapter.retry_once_when
        if retry is None or first[0].outcome == "ok" or not _demanded(first[1], retry):
            reply = first[0]
            return _redacted(reply, secrets, int((time.monotonic() - started) * 1000))
        # Exactly one more try, in a fresh empty directory like the first.
        second = await self._run_once(prompt, env, timeout_s, max_output_bytes, wants_answer)
        attempts = (
            self._attempt(first[0], secrets, "demanded an upgrade; retried once"),
            self._attempt(second[0], secrets),
        )
        reply = second[0]
        if reply.outcome != "ok" and _demanded(second[1], retry):
            reply = replace(
                reply, text=None, detail=f"still demands an upgrade after one retry: {reply.detail}"
            )
            attempts = (attempts[0], self._attempt(reply, secrets))
        total = int((time.monotonic() - started) * 1000)
        out = _redacted(reply, secrets, total)
        return replace(out, latency_ms=total, attempts=attempts)

    async def _run_once(
        self,
        prompt: str,
        env: dict[str, str],
        timeout_s: float,
        max_output_bytes: int,
        wants_answer: bool = False,
    ) -> tuple[RuntimeReply, ProcessResult | None]:
        support: str | None = None
        # The support directory carries the voice's marker in its name, as its working
        # directory does, so a council killed mid-run leaves nothing the next reader cannot
        # tell for its own.
        marker = lineage.next_voice_marker()
        try:
            prompt_file: str | None = None
            schema_file: str | None = None
            stdin = prompt.encode("utf-8")
            if self.adapter.needs_support_dir or wants_answer:
                support = make_scratch_dir(marker)
                for name, content in self.adapter.support_files.items():
                    _write_private(os.path.join(support, name), content.encode("utf-8"))
                if self.adapter.prompt_via == "file":
                    prompt_file = os.path.join(support, "prompt.txt")
                    _write_private(prompt_file, stdin)
                    stdin = b""
                if wants_answer:
                    # Beside the prompt file, not in the voice's working directory, which
                    # stays empty so the model is shown nothing but the prompt.
                    schema_file = os.path.join(support, "answer-schema.json")
                    _write_private(schema_file, answer_schema_bytes())
            started = time.monotonic()
            argv = self.adapter.argv(self.path, support, prompt_file, schema_file)
            # From here the run owns the support directory, removed with the voice's own
            # once nothing it started is running.
            dirs, support = ((support,) if support is not None else ()), None
            result = await run_process(
                argv,
                stdin=stdin,
                env=env,
                timeout_s=timeout_s,
                max_stdout=max_output_bytes,
                marker=marker,
                also_remove=dirs,
            )
        finally:
            if support is not None:
                remove_scratch_dir(support)
        latency = int((time.monotonic() - started) * 1000)
        if result.outcome in ("timeout", "too_large", "spawn_error", "cancelled"):
            printed = result.stderr.decode("utf-8", errors="replace")
            reply = RuntimeReply(
                outcome=result.outcome,
                detail=result.detail,
                exit_code=result.exit_code,
                latency_ms=latency,
                output_tail=tail(printed, OUTPUT_TAIL_CAP) if printed.strip() else None,
            )
            return reply, None
        stdout = result.stdout.decode("utf-8", errors="replace")
        stderr = result.stderr.decode("utf-8", errors="replace")
        parsed = self.adapter.parse(stdout, stderr)
        outcome, detail = classify_exit(result.exit_code, parsed)
        reply = RuntimeReply(
            outcome=outcome,
            text=parsed.text,
            detail=detail,
            exit_code=result.exit_code,
            latency_ms=latency,
            output_tail=None if outcome == "ok" else tail(stderr or stdout, OUTPUT_TAIL_CAP),
        )
        return reply, result

    def _attempt(self, reply: RuntimeReply, secrets: list[str], note: str = "") -> Attempt:
        detail = redact(reply.detail, secrets)
        return Attempt(
            runtime=self.name,
            source=self.source,
            outcome=reply.outcome,
            detail=(f"{detail} ({note})" if note else detail)[:1000],
            exit_code=reply.exit_code,
            latency_ms=reply.latency_ms,
            output_tail=redact(reply.output_tail, secrets) if reply.output_tail else None,
        )


def _demanded(result: ProcessResult | None, check: Callable[[str, str], bool]) -> bool:
    if result is None:
        return False
    return check(
        result.stdout.decode("utf-8", errors="replace"),
        result.stderr.decode("utf-8", errors="replace"),
    )


def _redacted(reply: RuntimeReply, secrets: list[str], latency_ms: int) -> RuntimeReply:
    text = redact(reply.text, secrets) if reply.text is not None else None
    out_tail = redact(reply.output_tail, secrets) if reply.output_tail is not None else None
    return replace(
        reply,
        text=text,
        detail=redact(reply.detail, secrets),
        latency_ms=latency_ms,
        output_tail=out_tail,
    )


def _write_private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
