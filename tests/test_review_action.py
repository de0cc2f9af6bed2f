"""The GitHub Action's one entry point, run as a workflow step runs it.

The environment is GitHub's (a pull_request event file, GITHUB_REPOSITORY, GITHUB_OUTPUT,
...), GITHUB_API_URL points at a loopback server that records every request, the checkout is
a real git repository with the pull request's base and head, and the voices are fake CLIs.
Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from rune_council.review.comment import MARKER
from tests.fixtures.review.kit import (
    INJECTION,
    INJECTION_TOO,
    RENAMED,
    Repo,
    answer,
    change_repo,
    rune_env,
    sarif_schema,
    voices,
)

ROOT = Path(__file__).resolve().parents[1]
EVENT = ROOT / "tests" / "fixtures" / "review" / "pull_request.json"
BOT = "github-actions[bot]"


@dataclass
class GitHub:
    """Just enough of the issues-comments API, on 127.0.0.1, recording what it was sent."""

    comments: list[dict[str, Any]] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 1000
    url: str = ""

    def handle(self, method: str, path: str, auth: str | None, body: bytes) -> tuple[int, Any]:
        sent = json.loads(body) if body else None
        self.seen.append({"method": method, "path": path, "auth": auth, "body": sent})
        if method == "GET" and re.match(r"^/repos/o/r/issues/7/comments\?", path):
            return 200, self.comments
        if method == "POST" and path == "/repos/o/r/issues/7/comments":
            self.next_id += 1
            made = {"id": self.next_id, "body": sent["body"], "user": {"login": BOT}}
            self.comments.append(made)
            return 201, made
        m = re.match(r"^/repos/o/r/issues/comments/(\d+)$", path)
        if method == "PATCH" and m:
            for c in self.comments:
                if c["id"] == int(m.group(1)):
                    c["body"] = sent["body"]
                    return 200, c
        return 404, {"message": "Not Found"}


@pytest.fixture
def github() -> Iterator[GitHub]:
    api = GitHub()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status, doc = api.handle(
                self.command, self.path, self.headers.get("Authorization"), self.rfile.read(length)
            )
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()


def event_file(tmp: Path, repo: Repo, *, fork: bool = False) -> Path:
    event = json.loads(EVENT.read_text(encoding="utf-8"))
    event["pull_request"]["base"]["sha"] = repo.base
    event["pull_request"]["head"]["sha"] = repo.head
    if fork:
        event["pull_request"]["head"]["repo"]["full_name"] = "someone/r"
    path = tmp / "event.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    return path


def step(
    tmp: Path, repo: Repo, api: GitHub, *what: str, fork: bool = False, **inputs: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    runner = tmp / "runner"
    runner.mkdir(exist_ok=True)
    output = runner / "output.txt"
    output.write_text("", encoding="utf-8")
    env = rune_env(
        tmp,
        GITHUB_ACTIONS="true",
        GITHUB_EVENT_NAME="pull_request",
        GITHUB_EVENT_PATH=str(event_file(tmp, repo, fork=fork)),
        GITHUB_REPOSITORY="o/r",
        GITHUB_API_URL=api.url,
        GITHUB_SERVER_URL="https://github.example",
        GITHUB_WORKSPACE=str(repo.path),
        GITHUB_OUTPUT=str(output),
        GITHUB_STEP_SUMMARY=str(runner / "summary.md"),
        RUNNER_TEMP=str(runner),
        **{f"INPUT_{k.upper()}": v for k, v in inputs.items()},
    )
    del env["RUNE_COUNCIL_ALLOW_EXTERNAL"]  # the action's allow-external input decides
    ran = subprocess.run(
        [sys.executable, "-m", "rune_council.review.action", *(what or ("run",))],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    outputs = dict(
        line.split("=", 1) for line in output.read_text(encoding="utf-8").splitlines() if line
    )
    return ran, outputs


def keyed(**more: str) -> dict[str, str]:
    return {"github_token": "ghs_test_token", "anthropic_api_key": "sk-ant-test", **more}


def test_the_action_reviews_the_pull_request_and_keeps_one_comment(
    tmp_path: Path, github: GitHub
) -> None:
    repo = change_repo(tmp_path)
    copy = tmp_path / "claude-env.json"
    voices(tmp_path, codex=answer([INJECTION_TOO]), gemini=answer([RENAMED]))
    from tests.fakes.bin import install_fake

    install_fake(
        tmp_path / "bin",
        "claude",
        answer=answer([INJECTION]),
        mode="answer_question",
        env_copy=str(copy),
    )
    # Someone else's comment carrying the marker is not ours to update.
    github.comments.append({"id": 5, "body": f"{MARKER}\nplanted", "user": {"login": "mallory"}})

    ran, outputs = step(tmp_path, repo, github, **keyed(template="security-review"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert outputs["verdict"] == "fail" and outputs["exit-code"] == "3"
    assert outputs["upload-sarif"] == "true"
    doc = json.loads(Path(outputs["sarif"]).read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)
    [must] = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "consensus-must"]
    assert must["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/app.py"
    assert doc["runs"][0]["properties"]["base"] == repo.base
    # Every line the step printed is an annotation of ours or a plain line.
    for line in ran.stdout.splitlines():
        assert not line.startswith("::") or re.match(r"^::(error|warning|notice)[ :]", line)
    assert "::error file=src/app.py,line=6," in ran.stdout

    [listed, created] = github.seen
    assert (listed["method"], created["method"]) == ("GET", "POST")
    assert created["auth"] == "Bearer ghs_test_token"
    body = created["body"]["body"]
    assert body.startswith(MARKER) and "FAIL" in body
    assert f"https://github.example/o/r/blob/{repo.head}/src/app.py#L6" in body
    assert (tmp_path / "runner" / "summary.md").read_text(encoding="utf-8").startswith(MARKER)
    # The voices got their key and nothing of the token or the inputs.
    seen_env = json.loads(copy.read_text(encoding="utf-8"))
    assert seen_env.get("ANTHROPIC_API_KEY") == "sk-ant-test"
    assert not any(k.startswith("INPUT_") for k in seen_env)
    assert "ghs_test_token" not in json.dumps(seen_env)

    # The next push updates the same comment instead of adding one.
    github.seen.clear()
    again, outputs = step(tmp_path, repo, github, **keyed())
    assert again.returncode == 0, again.stdout + again.stderr
    assert [s["method"] for s in github.seen] == ["GET", "PATCH"]
    assert github.seen[1]["path"] == f"/repos/o/r/issues/comments/{created_id(github)}"
    assert [c["user"]["login"] for c in github.comments] == ["mallory", BOT]
    assert github.comments[0]["body"] == f"{MARKER}\nplanted"

    finish, _ = step(tmp_path, repo, github, "finish")
    # Without the review step's code, the gate cannot pass: the review did not finish.
    assert finish.returncode == 70
    gate = subprocess.run(
        [sys.executable, "-m", "rune_council.review.action", "finish"],
        env={**rune_env(tmp_path), "RUNE_REVIEW_EXIT_CODE": outputs["exit-code"]},
        capture_output=True,
        timeout=60,
    )
    assert gate.returncode == 3


def created_id(api: GitHub) -> int:
    return next(int(c["id"]) for c in api.comments if c["user"]["login"] == BOT)


def test_a_forks_pull_request_without_secrets_passes_neutral_with_a_notice(
    tmp_path: Path, github: GitHub
) -> None:
    repo = change_repo(tmp_path)
    voices(tmp_path, claude=answer([INJECTION]), codex=answer([INJECTION_TOO]))
    ran, outputs = step(tmp_path, repo, github, fork=True, github_token="ghs_read_only")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("::notice title=rune council review%3A not run::")
    assert "fork" in ran.stdout
    assert outputs == {"upload-sarif": "false", "verdict": "neutral", "exit-code": "0"}
    assert github.seen == []  # nothing sent anywhere
    assert not (repo.path / ".rune" / "council").exists()


def test_a_workflow_without_any_voice_configured_fails_with_one_error(
    tmp_path: Path, github: GitHub
) -> None:
    repo = change_repo(tmp_path)
    ran, outputs = step(tmp_path, repo, github, github_token="ghs")
    assert ran.returncode == 2
    assert ran.stdout.startswith("::error title=rune council review::no voice is configured")
    assert outputs["upload-sarif"] == "false"
    assert github.seen == []


def test_a_council_that_reaches_no_verdict_fails_the_gate_with_no_verdict(
    tmp_path: Path, github: GitHub
) -> None:
    repo = change_repo(tmp_path)
    (tmp_path / "bin").mkdir()  # a key, but no CLI to use it: nobody answers
    ran, outputs = step(tmp_path, repo, github, **keyed())
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (outputs["verdict"], outputs["exit-code"]) == ("no-verdict", "1")
    assert "NO VERDICT" in github.seen[-1]["body"]["body"]


def test_action_yml_calls_the_entry_point_and_keeps_logic_out_of_expressions() -> None:
    spec = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert spec["runs"]["using"] == "composite"
    runs = [s["run"] for s in spec["runs"]["steps"] if "run" in s]
    assert runs == [
        'python -m pip install --quiet "$GITHUB_ACTION_PATH"',
        "python -m rune_council.review.action run",
        "python -m rune_council.review.action finish",
    ]
    uses = [s["uses"] for s in spec["runs"]["steps"] if "uses" in s]
    assert uses == ["actions/setup-python@v5", "github/codeql-action/upload-sarif@v3"]
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    expressions = re.findall(r"\$\{\{(.*?)\}\}", text)
    plain = re.compile(r"^ (inputs\.[a-z-]+|steps\.review\.outputs\.[a-z-]+|github\.token) $")
    assert expressions and all(plain.match(e) for e in expressions), expressions
    # The only condition reads the entry point's own decision.
    conditions = [s["if"] for s in spec["runs"]["steps"] if "if" in s]
    assert conditions == ["steps.review.outputs.upload-sarif == 'true'"]
    # Every input the steps pass is one the action declares.
    review = next(s for s in spec["runs"]["steps"] if s.get("id") == "review")
    for name, value in review["env"].items():
        key = name.removeprefix("INPUT_").lower().replace("_", "-")
        assert value == f"${{{{ inputs.{key} }}}}" and key in spec["inputs"]
