"""What each arm of `rune council eval` costs per item, in calls, tokens and time, and where
each token figure comes from: an endpoint's own count when it reports one, the metered
prompt size (labelled an estimate) when it does not, never one passed off as the other.

Endpoint voices are a real HTTP server on 127.0.0.1 (one model reports ``usage``, one does
not); CLI voices are the fake CLIs of tests/fakes, run as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rune_council.evaluation.report import ArmCost, EvalReport
from rune_council.testing import answer_for, question_in
from tests.test_eval_cli import dataset, fakes
from tests.test_eval_cli import env as cli_env

COUNTING = "meta/llama-3.3-70b-instruct"  # reports usage
SILENT = "mistralai/mistral-small-24b"  # reports none
PROMPT_TOKENS, COMPLETION_TOKENS = 900, 40


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": COUNTING}, {"id": SILENT}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        try:
            text = answer_for(question_in(prompt), "YES", [], fenced=False)
        except ValueError:  # not a voice prompt (a ballot, say): plain text
            text = "fine"
        usage = (
            {"usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}}
            if body["model"] == COUNTING
            else {}
        )
        if not body.get("stream"):
            self._send(
                {
                    "choices": [
                        {"index": 0, "message": {"content": text}, "finish_reason": "stop"}
                    ],
                    **usage,
                }
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        events = [
            {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], **usage},
        ]
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def eval_run(tmp: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "eval", str(dataset(tmp)), *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )


def costs(report: EvalReport) -> dict[str, ArmCost]:
    return {c.arm: c for c in report.costs}


def one(found: dict[str, ArmCost], part: str) -> ArmCost:
    [cost] = [c for name, c in found.items() if part in name]
    return cost


def endpoint_env(tmp: Path) -> dict[str, str]:
    # No CLI on PATH: the council is the endpoint's two models.
    empty = tmp / "no-bin"
    empty.mkdir(exist_ok=True)
    return {
        "PATH": str(empty),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }


def test_endpoint_voices_cost_what_the_endpoint_reported_and_no_more(
    tmp_path: Path, base_url: str
) -> None:
    args = ("--endpoint", base_url, "--n", "2", "-c", "1")
    out = eval_run(tmp_path, *args, "--json", env=endpoint_env(tmp_path))
    assert out.returncode == 0, out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    found = costs(report)
    counting, silent = one(found, COUNTING), one(found, SILENT)
    # An endpoint voice is named for its endpoint and model once, not the model twice.
    assert all(name.count(COUNTING) + name.count(SILENT) <= 1 for name in found), list(found)
    # One call per item, each with the endpoint's own count.
    assert (counting.items, counting.calls_per_item) == (5, 1.0)
    assert counting.tokens == "reported" and counting.reported_calls == counting.calls == 5
    assert counting.reported_tokens_per_item == PROMPT_TOKENS + COMPLETION_TOKENS
    assert counting.reported_prompt_tokens_per_item == PROMPT_TOKENS
    assert counting.reported_completion_tokens_per_item == COMPLETION_TOKENS
    # The model that says nothing is estimated from its prompts, and reported as nothing.
    assert silent.tokens == "estimated" and silent.reported_calls == 0
    assert silent.reported_tokens_per_item is None
    assert (silent.estimated_prompt_tokens_per_item or 0) > 0
    # The council: half its calls reported, and the estimate covers every prompt it sent.
    council = found["council"]
    assert council.tokens == "partly reported"
    assert (council.reported_calls, council.calls) == (5, 10)
    assert council.reported_tokens_per_item == PROMPT_TOKENS + COMPLETION_TOKENS
    assert (council.estimated_prompt_tokens_per_item or 0) >= (
        silent.estimated_prompt_tokens_per_item or 0
    )
    # The run files hold the counts on each attempt, which is where they were read from.
    runs = sorted((tmp_path / ".rune" / "council").glob("run-eval-*.json"))
    assert len(runs) == 5
    usage = [
        a.get("usage")
        for run in runs
        for v in json.loads(run.read_text())["voices"]
        for a in v["attempts"]
    ]
    assert sorted(map(json.dumps, usage)) == sorted(
        [json.dumps({"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS})] * 5
        + ["null"] * 5
    )

    # The text report says which figure is which, per arm.
    text = eval_run(tmp_path, *args, env=endpoint_env(tmp_path))
    assert text.returncode == 0, text.stderr
    shown = text.stdout
    assert "Tokens 'reported' are the endpoint's own count" in shown
    assert "940 tokens reported (900 prompt + 40 completion; reported by 5 of 5 calls)" in shown
    silent_line = next(ln for ln in shown.splitlines() if SILENT in ln and "call(s)" in ln)
    assert "prompt tokens est. (no call reported tokens)" in silent_line
    council_line = next(ln for ln in shown.splitlines() if ln.startswith("  council: "))
    assert "940 tokens reported by 5 of 10 calls, ~" in council_line
    assert "prompt tokens est. for all calls" in council_line


def test_cli_voices_show_estimated_prompt_tokens_labelled_as_such(tmp_path: Path) -> None:
    fakes(tmp_path)
    out = eval_run(tmp_path, "--json", env=cli_env(tmp_path))
    assert out.returncode == 0, out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    for cost in report.costs:
        assert cost.tokens == "estimated", cost
        assert cost.reported_calls == 0 and cost.reported_tokens_per_item is None
        assert (cost.estimated_prompt_tokens_per_item or 0) > 0
    # The council sent every voice's prompt: its estimate is the three voices' together.
    found = costs(report)
    voices = sum(
        found[f"voice:{v}"].estimated_prompt_tokens_per_item or 0
        for v in ("claude", "codex", "gemini")
    )
    assert found["council"].estimated_prompt_tokens_per_item == pytest.approx(voices, abs=3)
    text = eval_run(tmp_path, env=cli_env(tmp_path))
    claude = next(ln for ln in text.stdout.splitlines() if ln.startswith("  voice:claude: "))
    assert "1.0 call(s); ~" in claude and "prompt tokens est. (no call reported tokens)" in claude
