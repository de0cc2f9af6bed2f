"""Reading the answer (or the failure) out of each AI CLI's headless output.

Every parser takes the decoded stdout and stderr of a finished run and returns ``Parsed``:
the answer text, or the reason there is none. Several CLIs exit 0 after an API error and
only say so in their output (qwen, aider, cline's ``finishReason``), so a parser must look
for the failure before it takes any text as an answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .. import safejson


@dataclass(frozen=True)
class Parsed:
    """What an adapter read out of a finished CLI run."""

    text: str | None
    error: str | None = None  # the CLI reported a failure even if it exited 0


def tail(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def json_objects(stdout: str) -> list[dict[str, object]]:
    """Whole-output JSON first, else one object per line (JSONL); junk lines are skipped."""
    stripped = stdout.strip()
    try:
        whole = safejson.loads(stripped, what="CLI output")
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    if isinstance(whole, list):
        return [x for x in whole if isinstance(x, dict)]
    found = []
    for line in stripped.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = safejson.loads(line, what="CLI output line")
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _nonblank(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def parse_claude(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") == "result" or "result" in obj:
            result = obj.get("result")
            if obj.get("is_error"):
                status = obj.get("api_error_status")
                where = f" (HTTP {status})" if status else ""
                return Parsed(None, f"claude reported an error{where}: {tail(str(result))}")
            if _nonblank(result):
                return Parsed(str(result))
            return Parsed(None, "claude returned an empty result")
    return Parsed(None, f"no result object in claude output: {tail(stdout or stderr)}")


def parse_codex(stdout: str, stderr: str) -> Parsed:
    answer: str | None = None
    failure: str | None = None
    for obj in json_objects(stdout):
        kind = obj.get("type")
        item = obj.get("item")
        if kind == "item.completed" and isinstance(item, dict):
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                answer = item["text"]
        elif kind == "turn.failed":
            err = obj.get("error")
            msg = err.get("message") if isinstance(err, dict) else err
            failure = f"codex turn failed: {tail(str(msg))}"
    if answer is not None and answer.strip():
        return Parsed(answer)
    return Parsed(None, failure or f"no agent message in codex output: {tail(stderr or stdout)}")


def parse_gemini(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if "error" in obj and obj.get("error"):
            return Parsed(None, f"gemini reported an error: {tail(json.dumps(obj['error']))}")
        response = _nonblank(obj.get("response"))
        if response:
            return Parsed(response)
    return Parsed(None, f"no response in gemini output: {tail(stderr or stdout)}")


# qwen prints an API failure as the answer text and still says is_error: false.
_QWEN_API_ERROR = re.compile(r"^\s*\[API Error\b", re.IGNORECASE)


def parse_qwen(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") != "result":
            continue
        result = obj.get("result")
        if obj.get("is_error") or obj.get("subtype") not in (None, "success"):
            return Parsed(None, f"qwen reported an error: {tail(str(result or obj))}")
        text = _nonblank(result)
        if text is None:
            return Parsed(None, "qwen returned an empty result")
        if _QWEN_API_ERROR.match(text):
            return Parsed(None, f"qwen reported an API error: {tail(text)}")
        return Parsed(text)
    return Parsed(None, f"no result element in qwen output: {tail(stdout or stderr)}")


def parse_opencode(stdout: str, stderr: str) -> Parsed:
    pieces: list[str] = []
    for obj in json_objects(stdout):
        kind = obj.get("type")
        if kind == "error":
            return Parsed(None, f"opencode reported an error: {_opencode_error(obj)}")
        part = obj.get("part")
        if kind == "text" and isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(part["text"])
    text = "".join(pieces)
    if text.strip():
        return Parsed(text)
    return Parsed(None, f"no text in opencode output: {tail(stderr or stdout)}")


def _opencode_error(obj: dict[str, object]) -> str:
    err = obj.get("error")
    if isinstance(err, dict):
        data = err.get("data")
        if isinstance(data, dict) and data.get("message"):
            status = data.get("statusCode")
            where = f" (HTTP {status})" if status else ""
            return f"{err.get('name', 'error')}{where}: {tail(str(data['message']))}"
        return tail(json.dumps(err))
    return tail(str(err))


# aider has no JSON mode. Its start-up banner is a handful of known lines, the answer
# follows, and a "Tokens: ..." line closes a turn that reached the model.
_AIDER_BANNER = re.compile(
    r"^(Aider v|Model:|Main model:|Weak model:|Editor model:|Git repo:|Repo-map:|"
    r"Analytics have been|Detected dumb terminal|Warning|You can skip this check|"
    r"Added .* to the chat|Use /help|https://aider\.chat)"
)
_AIDER_TOKENS = re.compile(r"^Tokens: ")
_AIDER_ERROR = re.compile(
    r"(litellm\.\w+(Error|Exception)|\w+Exception - |APIConnectionError|"
    r"The API provider|Retrying in [\d.]+ seconds|^Error:)",
    re.MULTILINE,
)


def parse_aider(stdout: str, stderr: str) -> Parsed:
    lines = stdout.splitlines()
    end = next((i for i in range(len(lines) - 1, -1, -1) if _AIDER_TOKENS.match(lines[i])), None)
    if end is None:
        found = _AIDER_ERROR.search(stdout) or _AIDER_ERROR.search(stderr)
        reason = "aider reported an API error" if found else "aider printed no answer"
        return Parsed(None, f"{reason}: {tail(stdout or stderr)}")
    start = 0
    while start < end and (not lines[start].strip() or _AIDER_BANNER.match(lines[start])):
        start += 1
    text = "\n".join(lines[start:end]).strip()
    if not text:
        return Parsed(None, "aider returned an empty answer")
    return Parsed(text)


def parse_cline(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") != "run_result":
            continue
        reason = obj.get("finishReason")
        text = _nonblank(obj.get("text"))
        if reason not in (None, "completed"):
            # On failure cline puts the error message where the answer would be.
            return Parsed(None, f"cline finished with {reason}: {tail(text or '')}")
        if text is None:
            return Parsed(None, "cline returned an empty result")
        return Parsed(text)
    return Parsed(None, f"no run_result in cline output: {tail(stderr or stdout)}")


def parse_amp(stdout: str, stderr: str) -> Parsed:
    # amp's --stream-json follows claude's stream format: the last line is the result.
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") != "result":
            continue
        result = obj.get("result")
        if obj.get("is_error") or obj.get("subtype") not in (None, "success"):
            return Parsed(None, f"amp reported an error: {tail(str(result or obj))}")
        text = _nonblank(result)
        return Parsed(text) if text else Parsed(None, "amp returned an empty result")
    return Parsed(None, f"no result in amp output: {tail(stdout or stderr)}")


def parse_plain_text(stdout: str, stderr: str) -> Parsed:
    """The whole of stdout is the answer (agy prints plain text in print mode)."""
    if stdout.strip():
        return Parsed(stdout.strip())
    return Parsed(None, f"printed nothing: {tail(stderr)}" if stderr.strip() else "printed nothing")
