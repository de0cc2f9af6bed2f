"""The GitHub Action's entry point: ``python -m rune_council.review.action run|finish``.

``action.yml`` holds no logic: its steps install this package, call ``run``, upload the SARIF
``run`` wrote when it says to, and call ``finish``, which exits with the gate's code. So the
whole action can be run, and tested, as one program with the environment GitHub sets:

- ``GITHUB_EVENT_PATH`` (a ``pull_request`` or ``pull_request_target`` event),
  ``GITHUB_REPOSITORY``, ``GITHUB_API_URL``, ``GITHUB_SERVER_URL``, ``GITHUB_WORKSPACE``,
  ``RUNNER_TEMP``, ``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``;
- the action's inputs as ``INPUT_*`` (``action.yml`` passes each one through ``env``).

``run`` reviews the pull request's diff (from the merge base of its base and head, as the
pull request shows it), writes the SARIF, prints one annotation per finding, writes the
comment into the step summary and posts it on the pull request, or updates the comment it
posted before (found by its hidden marker, among the comments of the token's own account).
A fork's pull request gets no secrets from GitHub: with no key to seat a voice, ``run``
says so in a notice and passes neutral. Everything printed is either an annotation whose
values are escaped or a line of ours, so no voice, file name or reply can issue a workflow
command.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..core.errors import CouncilError, ExitCode, RequestError, exit_code_for

_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_EVENTS = ("pull_request", "pull_request_target")
EVENT_CAP = 25 * 1024 * 1024
API_TIMEOUT_S = 30.0
MAX_COMMENT_PAGES = 20
COMMENTS_CAP = 16 * 1024 * 1024
DEFAULT_COMMENTER = "github-actions[bot]"
KEY_VAR = "RUNE_REVIEW_API_KEY"
# The CLIs the action can install and the variable each one's key goes in.
CLI_KEYS: dict[str, tuple[str, str]] = {
    "anthropic_api_key": ("ANTHROPIC_API_KEY", "claude"),
    "openai_api_key": ("OPENAI_API_KEY", "codex"),
    "gemini_api_key": ("GEMINI_API_KEY", "gemini"),
}
CLI_PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini": "@google/gemini-cli",
}


class ActionError(RequestError):
    """The action cannot run as configured (a missing event, a bad input); the message says
    which, and it ends the step with the table's code for bad input."""


def say(line: str) -> None:
    """One line of ours on stdout, made inert: it never starts with ``::`` and carries no
    line break, so the runner reads it as text."""
    from .annotations import escape_data

    text = escape_data(line)
    if text.startswith("::"):
        text = " " + text
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def command(line: str) -> None:
    """An annotation built (and escaped) by ``annotations.annotation``."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _input(env: Mapping[str, str], name: str, default: str = "") -> str:
    # GitHub passes an input as INPUT_<NAME> with spaces as underscores, upper-cased;
    # action.yml passes ours with dashes as underscores.
    return env.get(f"INPUT_{name.upper()}", default).strip()


def _words(value: str) -> list[str]:
    return [w for w in re.split(r"[\s,]+", value) if w]


@dataclass(frozen=True)
class PullRequest:
    number: int
    base: str
    head: str
    fork: bool
    repository: str


def read_event(env: Mapping[str, str]) -> PullRequest:
    from ..core.safejson import loads

    name = env.get("GITHUB_EVENT_NAME", "pull_request")
    if name not in _EVENTS:
        raise ActionError(f"this action reviews pull requests; the event is {name[:60]!r}")
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        raise ActionError("GITHUB_EVENT_PATH is not set: run this inside a GitHub workflow")
    try:
        raw = Path(path).read_bytes()[: EVENT_CAP + 1]
    except OSError as exc:
        raise ActionError(f"cannot read the event at {path}: {exc.strerror}") from None
    event = loads(raw, max_bytes=EVENT_CAP, what="the event")
    pr = event.get("pull_request") if isinstance(event, dict) else None
    if not isinstance(pr, dict):
        raise ActionError("the event has no pull_request: this action reviews pull requests")
    repository = env.get("GITHUB_REPOSITORY", "")
    if not _REPOSITORY.match(repository):
        raise ActionError(f"GITHUB_REPOSITORY is not OWNER/NAME: {repository[:120]!r}")

    def sha(side: str) -> str:
        value = (pr.get(side) or {}).get("sha") if isinstance(pr.get(side), dict) else None
        if not isinstance(value, str) or not _SHA.match(value):
            raise ActionError(f"the pull request's {side}.sha is not a commit id")
        return value

    number = pr.get("number", event.get("number"))
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise ActionError("the pull request has no number")
    head_repo = (pr.get("head") or {}).get("repo")
    base_repo = (pr.get("base") or {}).get("repo")
    head_name = head_repo.get("full_name") if isinstance(head_repo, dict) else None
    base_name = base_repo.get("full_name") if isinstance(base_repo, dict) else repository
    return PullRequest(number, sha("base"), sha("head"), head_name != base_name, repository)


def _council_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The environment the council runs in: the runner's, without the action's inputs and
    the runner's tokens (no voice needs them), with each given key in its own variable."""
    out = _without_tokens(env)
    keyed: list[str] = []
    api_key = _input(env, "api_key")
    if api_key:
        out[KEY_VAR] = api_key
        keyed.append("api-key")
    for name, (var, cli) in CLI_KEYS.items():
        value = _input(env, name)
        if value:
            out[var] = value
            keyed.append(cli)
    return out, keyed


def _without_tokens(env: Mapping[str, str]) -> dict[str, str]:
    # ACTIONS_RUNTIME_TOKEN and ACTIONS_ID_TOKEN_REQUEST_* reach the cache, artifacts and
    # OIDC; GITHUB_TOKEN the repository. The review needs none of them.
    return {
        k: v
        for k, v in env.items()
        if not k.startswith(("INPUT_", "ACTIONS_")) and k != "GITHUB_TOKEN"
    }


def _keys(env: Mapping[str, str]) -> dict[str, Any]:
    keys: dict[str, Any] = {"yes": _input(env, "allow_external", "true").lower() != "false"}
    for name in ("template", "n", "timeout", "deadline"):
        value = _input(env, name)
        if value:
            keys[name] = value
    endpoints = _words(_input(env, "endpoints"))
    if endpoints:
        keys["endpoints"] = endpoints
        if _input(env, "api_key"):
            keys["key_env"] = KEY_VAR
    return keys


def _git(repo: Path, args: Sequence[str]) -> int:
    import subprocess

    from .diff import Git

    git = Git(repo)
    return subprocess.run(
        git._argv(args), env=git.env, stdin=subprocess.DEVNULL, capture_output=True, timeout=300
    ).returncode


def _ensure_commits(repo: Path, pr: PullRequest) -> None:
    """Both commits, fetched by id when the checkout is shallow (the ids are validated)."""
    missing = [s for s in (pr.base, pr.head) if _git(repo, ["cat-file", "-e", f"{s}^{{commit}}"])]
    if missing:
        say(f"rune council review: fetching {len(missing)} commit(s) the checkout lacks")
        _git(repo, ["fetch", "--no-tags", "--quiet", "origin", *missing])


@dataclass(frozen=True)
class Posted:
    action: str  # "created", "updated", "skipped" or "failed"
    detail: str = ""


def post_comment(
    api: str, repository: str, number: int, token: str, body: str, author: str
) -> Posted:
    """Create the one review comment, or update the one this account posted before."""
    import httpx

    from ..core.safejson import loads
    from .comment import MARKER

    if not re.match(r"^https?://[^\s/]+(/[^\s]*)?$", api):
        return Posted("failed", f"GITHUB_API_URL is not an http(s) URL: {api[:120]!r}")
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "rune-council-review",
    }
    base = api.rstrip("/")
    with httpx.Client(headers=headers, timeout=API_TIMEOUT_S, trust_env=False) as client:
        try:
            found = None
            for page in range(1, MAX_COMMENT_PAGES + 1):
                got = client.get(
                    f"{base}/repos/{repository}/issues/{number}/comments",
                    params={"per_page": 100, "page": page},
                )
                if got.status_code != 200:
                    return Posted("failed", f"listing comments: HTTP {got.status_code}")
                comments = loads(got.content, max_bytes=COMMENTS_CAP, what="the comments")
                if not isinstance(comments, list):
                    return Posted("failed", "listing comments: not a list")
                for c in comments:
                    if not isinstance(c, dict):
                        continue
                    user, text = c.get("user"), c.get("body")
                    mine = isinstance(user, dict) and user.get("login") == author
                    if mine and isinstance(text, str) and text.startswith(MARKER):
                        found = c.get("id")
                        break
                if found is not None or len(comments) < 100:
                    break
            if isinstance(found, int) and not isinstance(found, bool):
                sent = client.patch(
                    f"{base}/repos/{repository}/issues/comments/{found}", json={"body": body}
                )
                action = "updated"
            else:
                sent = client.post(
                    f"{base}/repos/{repository}/issues/{number}/comments", json={"body": body}
                )
                action = "created"
        except (httpx.HTTPError, CouncilError) as exc:
            return Posted("failed", f"{type(exc).__name__}")
    if sent.status_code not in (200, 201):
        return Posted("failed", f"HTTP {sent.status_code}")
    return Posted(action)


def _output(env: Mapping[str, str], values: Mapping[str, str]) -> None:
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for key, value in values.items():
            fh.write(f"{key}={' '.join(value.split())}\n")


def _summary(env: Mapping[str, str], body: str) -> None:
    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(body + "\n")


def _install_clis(env: Mapping[str, str], keyed: Sequence[str]) -> None:
    import shutil
    import subprocess

    wanted = _words(_input(env, "clis"))
    unknown = [w for w in wanted if w not in CLI_PACKAGES]
    if unknown:
        raise ActionError(
            f"clis: {', '.join(u[:40] for u in unknown)} not known "
            f"(known: {', '.join(CLI_PACKAGES)})"
        )
    npm = shutil.which("npm")
    for name in wanted:
        if shutil.which(name) is not None:
            continue
        if npm is None:
            raise ActionError(f"clis: {name} is not installed and npm is not on PATH")
        say(f"rune council review: installing {name} ({CLI_PACKAGES[name]})")
        done = subprocess.run(
            [npm, "install", "--global", "--no-fund", "--no-audit", CLI_PACKAGES[name]],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise ActionError(f"clis: npm could not install {CLI_PACKAGES[name]}")


def run(env: Mapping[str, str] | None = None) -> int:
    """The review step; returns the step's exit status (the gate's code is for ``finish``)."""
    from .annotations import annotation

    env = dict(os.environ if env is None else env)
    try:
        return _run(env)
    except Exception as exc:
        # One escaped line, whatever the error quotes (a git message, a file name, a reply).
        what = str(exc) if isinstance(exc, CouncilError) else f"{type(exc).__name__}: {exc}"
        command(annotation("error", what, title="rune council review"))
        code = int(exit_code_for(exc))
        _output(env, {"upload-sarif": "false", "verdict": "error", "exit-code": str(code)})
        return code


def _run(env: dict[str, str]) -> int:
    from ..council.intake import Door
    from .annotations import annotation, annotation_lines
    from .comment import blob_link, comment_body
    from .diff import parse_range, read_git
    from .gate import DEFAULT_FAIL_ON, FAIL_ON, FailOn
    from .run import conclude, is_empty, prepare_review
    from .sarif import sarif_log

    pr = read_event(env)
    council_env, keyed = _council_env(env)
    endpoints = _words(_input(env, "endpoints"))
    if not keyed and pr.fork:
        command(
            annotation(
                "note",
                "This pull request comes from a fork, and GitHub gives a fork's workflow no "
                "secrets: no voice can be seated, so the review passes neutral. A maintainer "
                "can run it from a branch of this repository.",
                title="rune council review: not run",
            )
        )
        _output(env, {"upload-sarif": "false", "verdict": "neutral", "exit-code": "0"})
        return 0
    if not keyed and not endpoints and not _words(_input(env, "clis")):
        raise ActionError(
            "no voice is configured: give endpoints (and api-key), or a CLI's key "
            "(anthropic-api-key, openai-api-key, gemini-api-key) with clis"
        )
    fail_on = _input(env, "fail_on", DEFAULT_FAIL_ON) or DEFAULT_FAIL_ON
    if fail_on not in FAIL_ON:
        raise ActionError(f"fail-on: {fail_on[:40]!r} is not one of {', '.join(FAIL_ON)}")
    _install_clis(env, keyed)
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    _ensure_commits(workspace, pr)
    diff = read_git(workspace, parse_range(f"{pr.base}...{pr.head}"), env=_without_tokens(env))
    diff.source = f"pull request #{pr.number} ({pr.base[:12]}...{pr.head[:12]})"
    rune_dir = workspace / ".rune"
    door = Door(
        name="the rune council review action",
        rune_dir=rune_dir,
        artifact_root=None,
        env=council_env,
        spelling={"key_env": "api-key", "yes": "allow-external"},
    )
    if is_empty(diff):
        from .artifact import build_artifact

        reviewed = conclude(diff, build_artifact(diff), None, cast(FailOn, fail_on))
    else:
        artifact, prepared = prepare_review(diff, _keys(env), door)
        say(f"rune council review: convening on {diff.source}, {len(diff.files)} file(s)")
        reviewed = conclude(diff, artifact, prepared.convene(), cast(FailOn, fail_on))
    temp = Path(env.get("RUNNER_TEMP") or workspace)
    sarif_path = temp / "rune-council-review.sarif"
    sarif_path.write_text(json.dumps(sarif_log(reviewed), indent=2), encoding="utf-8")
    for line in annotation_lines(reviewed):
        command(line)
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    link = blob_link(server, pr.repository, pr.head) if server.startswith("https://") else None
    body = comment_body(reviewed, link)
    _summary(env, body)
    token = _input(env, "github_token") or ""
    posted = Posted("skipped", "comment: false")
    if _input(env, "comment", "true").lower() != "false" and token:
        api = env.get("GITHUB_API_URL", "https://api.github.com")
        author = _input(env, "comment_author", DEFAULT_COMMENTER) or DEFAULT_COMMENTER
        posted = post_comment(api, pr.repository, pr.number, token, body, author)
        if posted.action == "failed":
            command(
                annotation(
                    "warning",
                    f"the pull-request comment could not be posted ({posted.detail}); the "
                    "step summary has it",
                    title="rune council review",
                )
            )
    gate = reviewed.gate
    upload = _input(env, "upload_sarif", "true").lower() != "false" and not pr.fork
    _output(
        env,
        {
            "sarif": str(sarif_path),
            "upload-sarif": "true" if upload else "false",
            "verdict": gate.verdict,
            "exit-code": str(int(gate.code)),
            "run-id": reviewed.result.id if reviewed.result is not None else "",
            "comment": posted.action,
        },
    )
    say(f"rune council review: gate --fail-on {gate.fail_on}: {gate.verdict} ({gate.reason})")
    return 0


def finish(env: Mapping[str, str] | None = None) -> int:
    """The last step: the gate's exit code, as ``run`` left it in its outputs."""
    env = os.environ if env is None else env
    given = env.get("RUNE_REVIEW_EXIT_CODE", "").strip()
    if not given.isdigit() or int(given) not in {int(c) for c in ExitCode}:
        say("rune council review: the review step left no exit code; it did not finish")
        return int(ExitCode.INTERNAL)
    return int(given)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["run"]:
        return run()
    if args == ["finish"]:
        return finish()
    say("usage: python -m rune_council.review.action run|finish")
    return int(ExitCode.BAD_INPUT)


if __name__ == "__main__":
    sys.exit(main())
