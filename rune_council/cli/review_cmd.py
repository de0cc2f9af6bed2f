"""``rune council review [REV_RANGE]``: a council on a change, as SARIF, annotations or a
PR comment, with a CI gate for its exit code.

Only the flags are read here; the diff, the artifact, the council and the formats are the
library's (``rune_council.review``), imported inside the command so that a council asking a
question never loads them.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from ..core.errors import ExitCode
from .app import council_app, council_errors, echo, echo_json, fail
from .options import (
    PreferOption,
    RuneDirOption,
    RunIdOption,
    SubagentFamilyOption,
    SubagentModelOption,
    TimeoutOption,
)

FORMATS = ("text", "sarif", "github", "markdown")


@council_app.command(
    "review",
    help="Review a change with the council: the working tree against HEAD, --staged, "
    "a range (BASE..HEAD, BASE...HEAD, REV) or --diff FILE. The exit code is the gate's "
    "(--fail-on): 0 pass, 3 failed, 1 no verdict.",
)
def review_command(
    rev_range: Annotated[
        str | None,
        typer.Argument(
            metavar="REV_RANGE",
            help="BASE..HEAD, BASE...HEAD (from their merge base) or REV (the working tree "
            "against it); default: the working tree against HEAD.",
        ),
    ] = None,
    staged: Annotated[
        bool, typer.Option("--staged", help="Review the staged changes against HEAD.")
    ] = False,
    diff_file: Annotated[
        str | None,
        typer.Option(
            "--diff", metavar="FILE", help="Review a unified diff from FILE ('-': standard input)."
        ),
    ] = None,
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="text | sarif (SARIF 2.1.0) | github (workflow-command annotations) | "
            "markdown (a pull-request comment).",
        ),
    ] = "text",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the CouncilResult as JSON instead.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write the output to FILE."),
    ] = None,
    fail_on: Annotated[
        str,
        typer.Option(
            help="needs-decision (default: a finding agreed at MUST/SHOULD or one needing a "
            "decision fails) | consensus (agreed at MUST/SHOULD) | must (agreed at MUST) | "
            "never."
        ),
    ] = "needs-decision",
    context: Annotated[int, typer.Option(help="Lines of context around each change (0-50).")] = 5,
    link_base: Annotated[
        str | None,
        typer.Option(
            help="For --format markdown: link each finding to BASE/PATH#LLINE "
            "(e.g. https://github.com/OWNER/REPO/blob/SHA)."
        ),
    ] = None,
    template: Annotated[
        str | None, typer.Option(help="A named council setup, e.g. security-review.")
    ] = None,
    n: Annotated[int | None, typer.Option("--n", help="Voices, 2-5; default 3.")] = None,
    timeout: TimeoutOption = None,
    deadline: Annotated[
        float | None, typer.Option(help="Stop waiting for stragglers after this many seconds.")
    ] = None,
    run_id: RunIdOption = None,
    prefer: PreferOption = None,
    endpoint: Annotated[
        list[str] | None,
        typer.Option(help="OpenAI-compatible endpoint (URL, preset or name); repeatable."),
    ] = None,
    key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the endpoints' key.")
    ] = None,
    subagent_cmd: Annotated[
        str | None, typer.Option(help="Command answering a prompt on stdin; takes empty slots.")
    ] = None,
    subagent_family: SubagentFamilyOption = None,
    subagent_endpoint: Annotated[
        str | None, typer.Option(help="Endpoint whose model takes failed or empty slots.")
    ] = None,
    subagent_model: SubagentModelOption = None,
    refresh: Annotated[bool, typer.Option(help="Probe the CLIs again.")] = False,
    refresh_models: Annotated[bool, typer.Option(help="List the endpoints' models again.")] = False,
    rune_dir: RuneDirOption = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", "-y", help="Allow sending the change to the external AI CLIs."),
    ] = False,
) -> None:
    from ..core.paths import RuneDir
    from ..council.intake import FLAGS, Door
    from ..review.diff import parse_range, read_diff_input, read_git
    from ..review.gate import FAIL_ON, FailOn
    from ..review.run import conclude, is_empty, prepare_review
    from .consent_prompt import external_consent
    from .live import progress
    from .signals import terminating_signals

    if output_format not in FORMATS:
        raise fail(f"--format: {output_format!r} is not one of {', '.join(FORMATS)}", 2)
    if fail_on not in FAIL_ON:
        raise fail(f"--fail-on: {fail_on!r} is not one of {', '.join(FAIL_ON)}", 2)
    if diff_file is not None and (rev_range is not None or staged):
        raise fail("--diff: give a diff, or a range (or --staged), not both", 2)
    where = RuneDir.resolve(rune_dir)
    keys: dict[str, Any] = {
        "template": template,
        "n": n,
        "timeout": timeout,
        "deadline": deadline,
        "id": run_id,
        "prefer": prefer,
        "endpoints": endpoint,
        "key_env": key_env,
        "subagent_cmd": subagent_cmd,
        "subagent_family": subagent_family,
        "subagent_endpoint": subagent_endpoint,
        "subagent_model": subagent_model,
        "refresh": refresh,
        "refresh_models": refresh_models,
        "yes": yes,
    }
    given = {k: v for k, v in keys.items() if v is not None and v is not False and v != []}
    door = Door(name="rune council review", rune_dir=where.root, artifact_root=None, spelling=FLAGS)
    with council_errors(cancellable=True), terminating_signals():
        if diff_file is not None:
            diff = read_diff_input(diff_file)
        else:
            diff = read_git(Path.cwd(), parse_range(rev_range, staged=staged), context=context)
        if is_empty(diff):
            from ..review.artifact import build_artifact

            reviewed = conclude(diff, build_artifact(diff), None, cast("FailOn", fail_on))
            result = None
        else:
            artifact, prepared = prepare_review(diff, given, door)
            for note in artifact.left_out:
                echo(f"rune council review: left out: {note}", err=True)
            if prepared.consent_undecided:
                allowed = external_consent(
                    where, yes=False, refresh=refresh, config=prepared.options.config
                )
                prepared = prepared.with_consent(allowed)
            quiet = as_json or output_format != "text"
            with progress(enabled=not quiet) as on_event:
                result = prepared.with_options(on_event=on_event).convene()
            reviewed = conclude(diff, artifact, result, cast("FailOn", fail_on))
    _show(reviewed, result, output_format, as_json, output, link_base)
    gate = reviewed.gate
    if result is None:
        echo(f"rune council review: nothing to review: {diff.source} changes no file", err=True)
    elif gate.verdict == "no-verdict":
        echo(
            "rune council review: no verdict: no voice produced a usable answer; the notes and "
            "`rune council doctor` say why (--yes, --subagent-cmd or --endpoint add voices)",
            err=True,
        )
    else:
        echo(
            f"rune council review: gate --fail-on {gate.fail_on}: {gate.verdict} ({gate.reason})",
            err=True,
        )
    if gate.code != ExitCode.OK:
        raise typer.Exit(gate.code)


def _show(
    reviewed: Any,
    result: Any,
    output_format: str,
    as_json: bool,
    output: Path | None,
    link_base: str | None,
) -> None:
    import json

    from ..review.annotations import annotation_lines
    from ..review.comment import comment_body
    from ..review.findings import Location

    if as_json:
        text = result.model_dump_json(indent=2) if result is not None else "null"
        kind = "json"
    elif output_format == "sarif":
        from ..review.sarif import sarif_log

        text, kind = json.dumps(sarif_log(reviewed), indent=2, ensure_ascii=False), "json"
    elif output_format == "github":
        text, kind = "\n".join(annotation_lines(reviewed)), "text"
    elif output_format == "markdown":

        def link(loc: Location) -> str | None:
            if link_base is None:
                return None
            from urllib.parse import quote

            anchor = f"#L{loc.line}" if loc.line is not None else ""
            return f"{link_base.rstrip('/')}/{quote(loc.path.lstrip('/'), safe='/')}{anchor}"

        text, kind = comment_body(reviewed, link if link_base else None), "text"
    else:
        text, kind = _text(reviewed), "text"
    if output is not None:
        from ..files import atomic_write_bytes

        data = (text.rstrip("\n") + "\n").encode("utf-8")
        with council_errors():
            if _is_device_or_pipe(output):
                # ``-o /dev/null`` or a named pipe: written into, never replaced.
                with open(output, "wb") as handle:
                    handle.write(data)
            else:
                atomic_write_bytes(output, data)
        return
    if kind == "json":
        echo_json(text)
        return
    # In a GitHub Actions step a printed line starting with "::" is a command; text quoting
    # voices is printed with command processing stopped, under a token nobody can guess.
    guarded = os.environ.get("GITHUB_ACTIONS") == "true" and output_format != "github"
    token = secrets.token_hex(16)
    if guarded:
        echo(f"::stop-commands::{token}")
    echo(text)
    if guarded:
        echo(f"::{token}::")


def _text(reviewed: Any) -> str:
    from ..deliberation.render import render_deliberation
    from ..render import render
    from ..review.findings import decides

    res = reviewed.result
    if res is None:
        return f"nothing to review: {reviewed.diff.source} changes no file"
    lines = [render(res) + render_deliberation(res), "", "Findings on the change:"]
    for f in reviewed.findings.findings:
        where = f.location.shown if f.location is not None else "(no place in the change)"
        need = " [needs decision]" if decides(f) else ""
        sev = f" {f.severity}" if f.severity else ""
        lines.append(f"  {f.level:<7}{sev} {where}: {' '.join(f.text.split())}{need}")
    if not reviewed.findings.findings:
        lines.append("  none")
    for note in reviewed.artifact.left_out:
        lines.append(f"  left out: {note}")
    return "\n".join(lines)


def _is_device_or_pipe(path: Path) -> bool:
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)
