"""The CLI adapters: what each one runs, what it reads back, and what it is allowed to see.

Output samples below are trimmed copies of what the pinned real binaries printed against
the loopback model server (qwen 0.15.10, opencode 1.18.33, aider 0.86.2, cline 3.0.65), once
answering and once after the server forced an HTTP 400.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from rune_council import CouncilOptions, convene
from rune_council.core.families import classify_model
from rune_council.discovery.detect import probe
from rune_council.runtimes.cli import CliRuntime
from rune_council.runtimes.cli_adapter import adapter_env
from rune_council.runtimes.clis import BUILTIN
from rune_council.runtimes.clis.aider import parse as parse_aider
from rune_council.runtimes.clis.cline import parse as parse_cline
from rune_council.runtimes.clis.opencode import parse as parse_opencode
from rune_council.runtimes.clis.qwen import parse as parse_qwen
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim

Q = "Should we shard the orders table?"
ROLLBACK = claim(
    "The plan has no rollback step", ref="plan.md:6", quote="No rollback step is defined."
)

QWEN_OK = (
    '[{"type":"system","subtype":"init","tools":[],"model":"stub-model"},'
    '{"type":"assistant","message":{"content":[{"type":"text","text":"ANSWER line1\\nline2"}]}},'
    '{"type":"result","subtype":"success","is_error":false,"num_turns":1,'
    '"result":"ANSWER line1\\nline2"}]'
)
QWEN_400 = (
    '[{"type":"system","subtype":"init"},'
    '{"type":"result","subtype":"success","is_error":false,'
    '"result":"[API Error: 400 stub server configured to fail with 400 Bad Request]"}]'
)
OPENCODE_OK = (
    '{"type":"step_start","part":{"type":"step-start"}}\n'
    '{"type":"text","part":{"type":"text","text":"ANSWER \\"quoted\\" $HOME"}}\n'
    '{"type":"step_finish","part":{"type":"step-finish","reason":"stop"}}\n'
)
OPENCODE_400 = (
    '{"type":"error","error":{"name":"APIError","data":{"message":"stub server configured '
    'to fail with 400 Bad Request","statusCode":400,"isRetryable":false}}}\n'
)
AIDER_OK = """Analytics have been permanently disabled.
Detected dumb terminal, disabling fancy input and pretty output.

Aider v0.86.2
Model: openai/stub-model with ask edit format
Git repo: none
Repo-map: disabled

ANSWER "quoted" $HOME line1
line2

Tokens: 64 sent, 5 received.
"""
AIDER_400 = """Aider v0.86.2
Model: openai/stub-model with ask edit format
Git repo: none
Repo-map: disabled

litellm.BadRequestError: OpenAIException - stub server configured to fail with
400 Bad Request

"""
CLINE_OK = (
    '{"type":"agent_event","event":{"type":"iteration_start","iteration":1}}\n'
    '{"type":"run_result","finishReason":"completed","iterations":1,'
    '"text":"ANSWER line1\\nline2","model":{"id":"stub-model"}}\n'
)
CLINE_400 = (
    '{"type":"agent_event","event":{"type":"error","error":{"message":"stub server '
    'configured to fail with 400 Bad Request"},"recoverable":false}}\n'
    '{"type":"run_result","finishReason":"error","iterations":1,'
    '"text":"stub server configured to fail with 400 Bad Request"}\n'
)


# --------------------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    ("parse", "stdout", "expected"),
    [
        (parse_qwen, QWEN_OK, "ANSWER line1\nline2"),
        (parse_opencode, OPENCODE_OK, 'ANSWER "quoted" $HOME'),
        (parse_aider, AIDER_OK, 'ANSWER "quoted" $HOME line1\nline2'),
        (parse_cline, CLINE_OK, "ANSWER line1\nline2"),
    ],
    ids=["qwen", "opencode", "aider", "cline"],
)
def test_each_parser_reads_the_answer_its_cli_printed(
    parse: Any, stdout: str, expected: str
) -> None:
    parsed = parse(stdout, "")
    assert (parsed.text, parsed.error) == (expected, None)


@pytest.mark.parametrize(
    ("parse", "stdout", "fragment"),
    [
        (parse_qwen, QWEN_400, "API Error: 400"),
        (parse_opencode, OPENCODE_400, "HTTP 400"),
        (parse_aider, AIDER_400, "BadRequestError"),
        (parse_cline, CLINE_400, "finished with error"),
    ],
    ids=["qwen", "opencode", "aider", "cline"],
)
def test_an_api_error_is_never_taken_as_an_answer(parse: Any, stdout: str, fragment: str) -> None:
    parsed = parse(stdout, "")
    assert parsed.text is None
    assert parsed.error is not None and fragment in parsed.error


# --------------------------------------------------------------------------- exit 0 errors


@pytest.mark.parametrize(
    ("cli", "settings", "reason"),
    [
        ("qwen", {"answer": "[API Error: 429 quota exhausted]"}, "qwen reported an API error"),
        ("aider", {"answer": "quota exhausted", "format": "aider-error"}, "aider reported an API"),
        ("cline", {"answer": "quota exhausted", "format": "cline-error"}, "finished with error"),
    ],
)
def test_cli_that_exits_0_after_an_api_error_is_a_failed_voice(
    tmp_path: Path, cli: str, settings: dict[str, str], reason: str
) -> None:
    bin_dir = tmp_path / "bin"
    install_fake(bin_dir, "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(bin_dir, cli, **settings)
    result = convene(
        {"id": "e0", "question": Q, "n": 2, "artifact": {"name": "plan.md", "text": PLAN}},
        CouncilOptions(
            rune_dir=tmp_path / ".rune",
            env={"PATH": path_with(bin_dir), "HOME": str(tmp_path)},
            allow_external=True,
        ),
    )
    [voice] = [v for v in result.voices if v.attempts and v.attempts[0].runtime == cli]
    assert voice.status == "dropped" and voice.dropped_by == "council.dispatch"
    assert [(a.outcome, a.exit_code) for a in voice.attempts] == [("error_reported", 0)]
    assert reason in voice.attempts[0].detail
    assert reason in (voice.drop_reason or "")
    assert voice.raw is None  # the error text never became an answer


# --------------------------------------------------------------------------- families


def test_family_map_per_the_dispatch_protocol() -> None:
    got = {name: (a.model_family, a.family_confidence, a.wrapper) for name, a in BUILTIN.items()}
    assert got == {
        "claude": ("anthropic", "confirmed", False),
        "codex": ("openai", "confirmed", False),
        "gemini": ("google", "confirmed", False),
        "qwen": ("qwen", "confirmed", False),
        "agy": ("google", "confirmed", False),
        "grok": ("xai", "confirmed", False),
        "opencode": ("unknown", "unknown", True),
        "aider": ("unknown", "unknown", True),
        "cline": ("unknown", "unknown", True),
        "amp": ("unknown", "unknown", True),
    }


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("openrouter/anthropic/claude-3.5-haiku", "anthropic"),
        ("gpt-4.1", "openai"),
        ("o3-mini", "openai"),
        ("gemini/gemini-2.5-pro", "google"),
        ("qwen3-coder-plus", "qwen"),
        ("openai/stub-model", None),  # a protocol prefix is no evidence
        ("stub/stub-model", None),
        ("ollama/my-finetune", None),
        ("deepseek-r1-distill-llama-70b", None),  # names two families: proves neither
    ],
)
def test_only_the_model_name_says_which_family(model: str, family: str | None) -> None:
    reading = classify_model(model, named_by="client")
    assert (reading.family if reading.confidence == "confirmed" else None) == family


def _probe(adapter_name: str, bin_dir: Path, home: Path, **env: str) -> Any:
    install_fake(bin_dir, adapter_name)
    full = {"PATH": path_with(bin_dir), "HOME": str(home), **env}
    return asyncio.run(probe(BUILTIN[adapter_name], full))


def test_opencode_is_promoted_only_when_its_config_names_a_known_model(tmp_path: Path) -> None:
    config = tmp_path / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text('{\n  // the model the user runs\n  "model": "stub/stub-model",\n}\n')
    unknown = _probe("opencode", tmp_path / "bin", tmp_path)
    assert (unknown.model_family, unknown.family_confidence) == ("unknown", "unknown")
    assert "names no backend model" in unknown.detail

    config.write_text(json.dumps({"model": "anthropic/claude-sonnet-4-5"}))
    promoted = _probe("opencode", tmp_path / "bin", tmp_path)
    assert (promoted.model_family, promoted.family_confidence) == ("anthropic", "confirmed")
    assert "anthropic/claude-sonnet-4-5" in promoted.detail and str(config) in promoted.detail

    inline = _probe(
        "opencode", tmp_path / "bin", tmp_path, OPENCODE_CONFIG_CONTENT='{"model": "openai/gpt-5"}'
    )
    assert inline.model_family == "openai" and "$OPENCODE_CONFIG_CONTENT" in inline.detail


def test_aider_is_promoted_from_its_own_conf_file_or_variable(tmp_path: Path) -> None:
    (tmp_path / ".aider.conf.yml").write_text(
        "# mine\nmodel: openai/stub-model\nyes-always: true\n"
    )
    assert _probe("aider", tmp_path / "bin", tmp_path).model_family == "unknown"
    (tmp_path / ".aider.conf.yml").write_text("model: gemini/gemini-2.5-pro  # fast\n")
    reading = _probe("aider", tmp_path / "bin", tmp_path)
    assert (reading.model_family, reading.family_confidence) == ("google", "confirmed")
    assert ".aider.conf.yml" in reading.detail
    from_env = _probe("aider", tmp_path / "bin", tmp_path, AIDER_MODEL="claude-3-7-sonnet")
    assert from_env.model_family == "anthropic" and "$AIDER_MODEL" in from_env.detail


def test_cline_is_promoted_from_the_provider_it_last_used(tmp_path: Path) -> None:
    settings = tmp_path / ".cline" / "data" / "settings" / "providers.json"
    settings.parent.mkdir(parents=True)
    doc: dict[str, Any] = {
        "version": 1,
        "lastUsedProvider": "openai-compatible",
        "providers": {
            "openai-compatible": {"settings": {"provider": "openai-compatible", "model": "stub"}},
            "anthropic": {"settings": {"provider": "anthropic", "model": "claude-opus-4-1"}},
        },
    }
    settings.write_text(json.dumps(doc))
    assert _probe("cline", tmp_path / "bin", tmp_path).model_family == "unknown"
    doc["lastUsedProvider"] = "anthropic"
    settings.write_text(json.dumps(doc))
    assert _probe("cline", tmp_path / "bin", tmp_path).model_family == "anthropic"


def test_amp_stays_unknown_whatever_is_configured(tmp_path: Path) -> None:
    reading = _probe("amp", tmp_path / "bin", tmp_path, AIDER_MODEL="claude-3-7-sonnet")
    assert (reading.model_family, reading.family_confidence) == ("unknown", "unknown")
    assert "flags from docs only" in reading.detail


def test_a_promoted_wrapper_counts_as_its_family_in_the_council(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    install_fake(bin_dir, "codex", answer=answer(Q, "NO", [ROLLBACK]))
    undo = {**ROLLBACK, "text": "Nothing says how to undo the migration if it fails"}
    install_fake(bin_dir, "opencode", answer=answer(Q, "NO", [undo]))
    env = {"PATH": path_with(bin_dir), "HOME": str(tmp_path)}
    request = {"id": "w1", "question": Q, "n": 2, "artifact": {"name": "plan.md", "text": PLAN}}
    unpromoted = convene(
        request,
        CouncilOptions(rune_dir=tmp_path / "a", env=env, allow_external=True),
    )
    assert unpromoted.decorrelation == "NO_DECORRELATION"  # opencode is unknown

    config = tmp_path / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"model": "anthropic/claude-sonnet-4-5"}))
    promoted = convene(
        request,
        CouncilOptions(rune_dir=tmp_path / "b", env=env, allow_external=True),
    )
    assert promoted.decorrelation == "MULTI_FAMILY"
    assert promoted.distinct_families == ["anthropic", "openai"]
    assert [c.families for c in promoted.agreement.consensus_claims] == [["anthropic", "openai"]]


# --------------------------------------------------------------------------- invocation


def _runtime(name: str, bin_dir: Path, home: Path, **env: str) -> CliRuntime:
    path = str(bin_dir / name)
    return CliRuntime(BUILTIN[name], path, {"PATH": path_with(bin_dir), "HOME": str(home), **env})


def _ask(runtime: CliRuntime, prompt: str = "the prompt") -> Any:
    return asyncio.run(runtime.ask(prompt, timeout_s=20, max_output_bytes=100_000))


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_cline_gets_a_fixed_argument_and_the_prompt_only_on_stdin(tmp_path: Path) -> None:
    log, copy = tmp_path / "argv.jsonl", tmp_path / "stdin"
    install_fake(tmp_path / "bin", "cline", answer="fine", argv_log=log, stdin_copy=copy)
    reply = _ask(_runtime("cline", tmp_path / "bin", tmp_path), "secret question 42")
    assert (reply.outcome, reply.text) == ("ok", "fine")
    [call] = _calls(log)
    assert call["argv"] == [
        "--plan", "--auto-approve", "false", "--json", "Answer the request given on standard input."
    ]  # fmt: skip
    assert copy.read_text() == "secret question 42"


def test_amp_reads_a_private_settings_file_that_rejects_every_tool(tmp_path: Path) -> None:
    log = tmp_path / "argv.jsonl"
    install_fake(
        tmp_path / "bin", "amp", answer="ok", argv_log=log, copy_file_arg="--settings-file"
    )
    reply = _ask(_runtime("amp", tmp_path / "bin", tmp_path))
    assert reply.outcome == "ok"
    [call] = _calls(log)
    assert call["argv"][:2] == ["--execute", "--stream-json"]
    assert json.loads(call["file"]) == {"amp.permissions": [{"tool": "*", "action": "reject"}]}
    assert call["file_mode"] == "0o600"
    settings = Path(call["argv"][call["argv"].index("--settings-file") + 1])
    assert not settings.exists() and not settings.parent.exists()  # removed after the run
    assert call["cwd_entries"] == []


def test_opencode_runs_with_tools_denied_in_an_empty_directory(tmp_path: Path) -> None:
    log, env_copy = tmp_path / "argv.jsonl", tmp_path / "env.json"
    install_fake(tmp_path / "bin", "opencode", answer="ok", argv_log=log, env_copy=env_copy)
    user_perm = json.dumps({"*": "allow"})
    reply = _ask(_runtime("opencode", tmp_path / "bin", tmp_path, OPENCODE_PERMISSION=user_perm))
    assert reply.outcome == "ok"
    [call] = _calls(log)
    assert call["argv"] == ["run", "--pure", "--title", "council", "--format", "json"]
    assert call["cwd_entries"] == [] and not os.path.exists(call["cwd"])
    seen = json.loads(env_copy.read_text())
    assert json.loads(seen["OPENCODE_PERMISSION"]) == {"*": "deny"}  # the user's allow loses


def test_opencode_retries_exactly_once_when_it_demands_an_upgrade(tmp_path: Path) -> None:
    log, state = tmp_path / "argv.jsonl", tmp_path / "state"
    install_fake(
        tmp_path / "bin",
        "opencode",
        answer="after the retry",
        mode="upgrade_demand",
        state_file=state,
        argv_log=log,
    )
    reply = _ask(_runtime("opencode", tmp_path / "bin", tmp_path))
    assert (reply.outcome, reply.text) == ("ok", "after the retry")
    calls = _calls(log)
    assert len(calls) == 2
    assert calls[0]["cwd"] != calls[1]["cwd"]  # each try in its own fresh directory
    assert [c["cwd_entries"] for c in calls] == [[], []]
    assert [a.outcome for a in reply.attempts] == ["exit_nonzero", "ok"]
    assert "retried once" in reply.attempts[0].detail


def test_opencode_gives_up_after_the_one_retry(tmp_path: Path) -> None:
    log, state = tmp_path / "argv.jsonl", tmp_path / "state"
    install_fake(
        tmp_path / "bin",
        "opencode",
        mode="upgrade_demand",
        upgrade_always=1,
        state_file=state,
        argv_log=log,
    )
    reply = _ask(_runtime("opencode", tmp_path / "bin", tmp_path))
    assert reply.outcome == "exit_nonzero"
    assert "still demands an upgrade after one retry" in reply.detail
    assert len(_calls(log)) == 2


def test_other_failures_are_not_retried(tmp_path: Path) -> None:
    log = tmp_path / "argv.jsonl"
    install_fake(
        tmp_path / "bin", "opencode", answer="bad key", format="opencode-error", exit_code=1,
        argv_log=log,
    )  # fmt: skip
    reply = _ask(_runtime("opencode", tmp_path / "bin", tmp_path))
    assert reply.outcome == "exit_nonzero" and "bad key" in reply.detail
    assert len(_calls(log)) == 1


# --------------------------------------------------------------------------- environment

PLANTED = {
    "ANTHROPIC_API_KEY": "sk-ant-planted-aaaa1111",
    "OPENAI_API_KEY": "sk-openai-planted-bbbb2222",
    "GEMINI_API_KEY": "gm-planted-cccc3333",
    "OPENCODE_CONFIG": "/nonexistent/opencode.json",
    "CLINE_DIR": "/nonexistent/cline",
    "AIDER_MODEL": "x",
    "GITHUB_TOKEN": "ghp-planted-dddd4444",
    "AWS_SECRET_ACCESS_KEY": "aws-planted-eeee5555",
    "STRIPE_SECRET_KEY": "sk_live_planted_ffff6666",
    "DATABASE_URL": "postgres://u:p@db/x",
}


@pytest.mark.parametrize(
    ("name", "gets", "never"),
    [
        (
            "claude",
            {"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY"},
            {"OPENAI_API_KEY", "GITHUB_TOKEN"},
        ),
        (
            "codex",
            {"OPENAI_API_KEY"},
            {"ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AWS_SECRET_ACCESS_KEY"},
        ),
        ("gemini", {"GEMINI_API_KEY"}, {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}),
        ("qwen", {"OPENAI_API_KEY"}, {"ANTHROPIC_API_KEY", "GEMINI_API_KEY"}),
        (
            "opencode",
            {"OPENCODE_CONFIG", "ANTHROPIC_API_KEY"},
            {"CLINE_DIR", "AWS_SECRET_ACCESS_KEY"},
        ),
        ("aider", {"AIDER_MODEL", "OPENAI_API_KEY"}, {"OPENCODE_CONFIG", "AWS_SECRET_ACCESS_KEY"}),
        ("cline", {"CLINE_DIR", "ANTHROPIC_API_KEY"}, {"AIDER_MODEL", "AWS_SECRET_ACCESS_KEY"}),
        ("amp", set(), {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}),
    ],
)
def test_each_adapter_passes_only_its_own_variables(
    tmp_path: Path, name: str, gets: set[str], never: set[str]
) -> None:
    env_copy = tmp_path / "env.json"
    install_fake(tmp_path / "bin", name, answer="ok", env_copy=env_copy)
    runtime = _runtime(name, tmp_path / "bin", tmp_path, **PLANTED)
    assert _ask(runtime).outcome == "ok"
    seen = set(json.loads(env_copy.read_text()))
    assert gets <= seen
    assert not (never & seen)
    # Nothing unrelated, ever: no adapter sees the database URL, GitHub or Stripe.
    assert not ({"GITHUB_TOKEN", "STRIPE_SECRET_KEY", "DATABASE_URL"} & seen)


def test_a_variable_the_user_allows_reaches_every_cli(tmp_path: Path) -> None:
    parent = {"PATH": "/usr/bin", "HOME": str(tmp_path), "CORP_PROXY_TOKEN": "t-123456"}
    assert "CORP_PROXY_TOKEN" not in adapter_env(BUILTIN["claude"], parent)
    assert adapter_env(BUILTIN["claude"], parent, ("CORP_PROXY_TOKEN",))["CORP_PROXY_TOKEN"]
