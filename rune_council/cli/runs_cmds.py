"""Reading runs: ``rune council watch``, ``show``, ``list`` and ``verify``.

All four take a run id (looked up in ``<rune dir>/council``) or a path to a run file, so they
work as well on a run another process is writing as on one copied from elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..core.errors import ExitCode, exit_code_for, exit_code_for_status
from ..core.safetext import one_line
from .app import council_app, echo, echo_json, fail

if TYPE_CHECKING:
    from ..core.contract import CouncilResult, RunEvent


def _complete_run_ids(incomplete: str) -> list[str]:
    """Shell completion: the ids of the runs in ./.rune (file names only, nothing parsed)."""
    from ..core.paths import RuneDir

    directory = RuneDir.resolve().council_dir
    try:
        names = sorted(p.name for p in directory.glob("run-*.json"))
    except OSError:
        return []
    ids = [n.removeprefix("run-").removesuffix(".json") for n in names]
    return [i for i in ids if i.startswith(incomplete)]


RunRef = Annotated[
    str,
    typer.Argument(
        metavar="RUN",
        autocompletion=_complete_run_ids,
        help="A run id (its file is <rune dir>/council/run-<id>.json) or a path to a run file.",
    ),
]
RuneDirOption = Annotated[
    Path | None,
    typer.Option(help="Where .rune files are (default ./.rune, or $RUNE_COUNCIL_DIR)."),
]


def exit_code_of(result: CouncilResult) -> int:
    """The code ``rune council`` exited with (or would have) for this run's final state."""
    return exit_code_for_status(result.shown_status())


def _locate(ref: str, rune_dir: Path | None) -> Path:
    from ..core.errors import CouncilError
    from ..runs import locate

    try:
        return locate(ref, rune_dir)
    except CouncilError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None


def _load(ref: str, rune_dir: Path | None) -> CouncilResult:
    from ..core.errors import CouncilError
    from ..runs import load

    path = _locate(ref, rune_dir)
    try:
        return load(path)
    except CouncilError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None


def _clock(stamp: str) -> str:
    """HH:MM:SS.mmm of an ISO timestamp, in local time."""
    from ..runs import parse_time

    moment = parse_time(stamp)
    return moment.astimezone().strftime("%H:%M:%S.%f")[:-3] if moment else stamp


def _event_line(result: CouncilResult, event: RunEvent) -> str:
    from ..runs import seconds_between
    from .live import voice_line

    when = _clock(event.at)
    voice = next((v for v in result.voices if v.id == event.voice_id), None)
    if voice is None:
        what = {
            "council.dispatched": "dispatched",
            "council.result": "result",
            "deliberation.status": "deliberation",
        }.get(event.kind, event.kind)
        return f"{when}  council {what}: {one_line(event.detail, 400)}".rstrip()
    # Elapsed since the run started: a reader joining late still sees when things happened.
    return f"{when}" + voice_line(
        voice.id,
        voice.runtime,
        voice.model_family,
        event.status or voice.status,
        seconds_between(result.started_at, event.at),
        one_line(event.detail, 400),
    )


def report(result: CouncilResult, *, status: tuple[str, str] | None = None) -> str:
    """The text ``rune council`` prints for a result: the Output Format, then deliberation.

    ``status`` is what the reader is told about the run when it differs from the file
    (an abandoned run still says ``running`` inside).
    """
    from ..deliberation.render import render_deliberation
    from ..render import render

    return render(result, status=status) + render_deliberation(result)


def _summary(result: CouncilResult) -> str:
    dropped = len(result.voices_dropped)
    stamp = f"{result.stamp_label()}, " if result.decorrelation else ""
    return (
        f"run {result.id} {result.shown_status()}: {stamp}{result.voices_valid}/"
        f"{result.voices_requested} valid, {dropped} dropped"
    )


@council_app.command(
    "watch",
    short_help="Follow a run live until it ends; exit with its code.",
    help=(
        "Follow a run as another process writes it: print each transition once, then exit "
        "with the code the run had (0 result, 1 nothing gathered, 70 failed, 130 "
        f"cancelled, {ExitCode.ABANDONED} abandoned: its orchestrator died before finishing). "
        "Waits for a run that has not started writing yet. Ctrl-C stops watching, not the run."
    ),
)
def watch_command(
    run: RunRef,
    rune_dir: RuneDirOption = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="One JSON object per line: each transition, then the outcome."),
    ] = False,
    show_result: Annotated[
        bool, typer.Option("--result", help="When the run completes, print its result.")
    ] = False,
    wait: Annotated[
        float | None,
        typer.Option(
            help="Give up (exit 2) if no run file has appeared after this many seconds "
            "(default: wait for ever).",
            min=0,
        ),
    ] = None,
) -> None:
    from ..core.errors import CouncilError
    from ..watch import follow

    path = _locate(run, rune_dir)

    def emit(record: dict[str, Any], line: str) -> None:
        # Questions, runtimes and details come from voices: text on a terminal, never escapes.
        if as_json:
            echo_json(json.dumps(record))
        else:
            echo(line)

    try:
        for update in follow(path, wait_s=wait):
            result = update.result
            if update.kind == "waiting":
                emit({"type": "waiting", "path": str(path)}, f"waiting for {path} ...")
            elif update.kind == "started" and result is not None:
                emit(
                    {
                        "type": "started",
                        "run": result.id,
                        "question": result.question,
                        "voices": [
                            {
                                "id": v.id,
                                "runtime": v.runtime,
                                "model_family": v.model_family,
                                "slot_role": v.slot_role,
                                "status": v.status,
                            }
                            for v in result.voices
                        ],
                        "path": str(path),
                    },
                    f"run {result.id}: {result.question}\n"
                    f"  {len(result.voices)} voice(s): "
                    + ", ".join(f"{v.id} {v.runtime} ({v.model_family})" for v in result.voices)
                    + f"\n  file: {path}",
                )
            elif update.kind == "events" and result is not None:
                for event in update.events:
                    emit(
                        {"type": "event", "run": result.id, **event.model_dump(mode="json")},
                        _event_line(result, event),
                    )
            elif update.kind == "stalled":
                emit({"type": "stalled", "detail": update.detail}, f"warning: {update.detail}")
            elif update.kind == "finished" and result is not None:
                code = exit_code_of(result)
                emit(
                    {
                        "type": "finished",
                        "run": result.id,
                        "status": result.shown_status(),
                        "decorrelation": result.decorrelation,
                        "voices_valid": result.voices_valid,
                        "exit_code": code,
                    },
                    f"{_summary(result)} (exit {code})",
                )
                if show_result and not as_json:
                    echo("")
                    echo(report(result))
                raise typer.Exit(code)
            elif update.kind == "abandoned" and result is not None:
                emit(
                    {
                        "type": "abandoned",
                        "run": result.id,
                        "detail": update.detail,
                        "exit_code": ExitCode.ABANDONED,
                    },
                    f"run {result.id} abandoned: {update.detail}; it will not finish "
                    f"(exit {ExitCode.ABANDONED})",
                )
                raise typer.Exit(ExitCode.ABANDONED)
    except KeyboardInterrupt:
        raise fail("stopped watching; the run itself goes on", ExitCode.CANCELLED) from None
    except CouncilError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None


@council_app.command(
    "show",
    short_help="Print a run's result (the Output Format).",
    help="Print a run's result in the council's Output Format (or --json: the file).",
)
def show_command(
    run: RunRef,
    rune_dir: RuneDirOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run file's CouncilResult as JSON.")
    ] = False,
) -> None:
    from ..runs import displayed_status

    result = _load(run, rune_dir)
    if as_json:
        echo_json(result.model_dump_json(indent=2))
        return
    text = report(result, status=displayed_status(result))
    check = _verification_line(result)
    if check:  # right under the stamp, which stays the first thing said
        lines = text.split("\n")
        text = "\n".join([*lines[:2], check, *lines[2:]])
    echo(text)


def _verification_line(result: CouncilResult) -> str | None:
    """A finished run is re-derived before it is shown: an edited file is never shown plain."""
    from ..core.errors import CouncilError
    from ..verify import verify

    if result.status not in ("complete", "no_verdict"):
        return None
    try:
        outcome = verify(result)
    except CouncilError as exc:
        return f"- **Verification**: could not re-derive this run ({exc})"
    if outcome.reproduced and outcome.unchecked:
        return (
            "- **Verification**: reproduced from the recorded raw answers, except "
            f"{len(outcome.unchecked)} part(s) that could not be checked (rune council verify "
            "lists them)"
        )
    if outcome.reproduced:
        return "- **Verification**: reproduced from the recorded raw answers"
    fields = ", ".join(d.field for d in outcome.differences[:3])
    more = f" and {len(outcome.differences) - 3} more" if len(outcome.differences) > 3 else ""
    return (
        f"- **Verification**: NOT REPRODUCED: the file differs from its own raw answers at "
        f"{fields}{more}; what follows is what the file claims, not a verified result "
        "(rune council verify shows every difference)"
    )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


@council_app.command(
    "list",
    short_help="Recent runs with their status and stamp.",
    help="Recent runs, newest first: id, status (running, complete, no_verdict when no "
    "voice's answer counted, cancelled, failed, or abandoned when its orchestrator is gone), "
    "decorrelation, valid/requested voices, duration, question.",
)
def list_command(
    rune_dir: RuneDirOption = None,
    limit: Annotated[int, typer.Option(help="Show at most this many runs.", min=1)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    from ..core.paths import RuneDir
    from ..runs import list_runs

    where = RuneDir.resolve(rune_dir)
    rows = list_runs(where, limit)
    if as_json:
        echo_json(
            json.dumps(
                [
                    {
                        "id": r.run_id,
                        "question": r.question,
                        "status": r.status,
                        "decorrelation": r.decorrelation,
                        "partial": r.partial,
                        "voices_valid": r.voices_valid,
                        "voices_requested": r.voices_requested,
                        "started_at": r.started_at or None,
                        "duration_s": r.duration_s,
                        "path": str(r.path),
                        **({"problem": r.problem} if r.problem else {}),
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
        return
    if not rows:
        echo(f"no runs in {where.council_dir}")
        return
    width = max(len("id"), *(len(r.run_id) for r in rows))
    echo(
        f"{'id':<{width}}  {'status':<10} {'decorrelation':<26} {'voices':>6} "
        f"{'duration':>8}  question"
    )
    for r in rows:
        voices = f"{r.voices_valid}/{r.voices_requested}" if r.problem is None else "-"
        question = r.question if len(r.question) <= 60 else r.question[:59] + "…"
        if r.problem:
            question = r.problem
        echo(
            f"{r.run_id:<{width}}  {r.status:<10} {r.stamp or '-':<26} {voices:>6} "
            f"{_duration(r.duration_s):>8}  {question}"
        )


def _value(value: Any, limit: int = 160) -> str:
    from ..verify import ABSENT

    if value is ABSENT:
        return repr(value)
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@council_app.command(
    "verify",
    short_help="Re-arbitrate a run from its raw answers and compare.",
    help="Re-run GATE, NORMALIZE and ARBITRATE from the raw answers recorded in a completed "
    "run file and report whether they reproduce the recorded result, field by field where "
    "they do not. Exit 0 reproduced, 1 a difference, 2 unreadable or not a completed run. "
    "It checks the arithmetic, not the voices: their recorded raw answers are taken as given.",
)
def verify_command(
    run: RunRef,
    rune_dir: RuneDirOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the verification as JSON.")
    ] = False,
) -> None:
    from ..core.errors import CouncilError
    from ..verify import verify

    result = _load(run, rune_dir)
    try:
        outcome = verify(result)
    except CouncilError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None
    if as_json:
        echo_json(
            json.dumps(
                {
                    "run": outcome.run_id,
                    "reproduced": outcome.reproduced,
                    "checked": outcome.checked,
                    "differences": [
                        {"field": d.field, "recorded": d.recorded, "recomputed": d.recomputed}
                        for d in outcome.differences
                    ],
                    "unchecked": outcome.unchecked,
                    "cannot_check": list(outcome.cannot_check),
                },
                indent=2,
                default=repr,
            )
        )
    elif outcome.reproduced:
        echo(
            f"run {outcome.run_id}: reproduced — GATE → NORMALIZE → ARBITRATE on the recorded "
            f"raw answers gives the recorded result ({result.decorrelation}, "
            f"{len(result.agreement.consensus_claims)} consensus, "
            f"{len(result.agreement.dissent)} dissent, {len(result.voices_dropped)} dropped)"
            + (
                f"; {len(outcome.unchecked)} part(s) of it could not be checked, listed below"
                if outcome.unchecked
                else ""
            )
        )
    else:
        count = len(outcome.differences)
        echo(
            f"run {outcome.run_id}: NOT reproduced — {count} field(s) differ from a fresh "
            "GATE → NORMALIZE → ARBITRATE on the recorded raw answers:"
        )
        for d in outcome.differences:
            echo(f"  {d.field}: recorded {_value(d.recorded)}, recomputed {_value(d.recomputed)}")
    if not as_json:
        for note in outcome.unchecked:
            echo(f"  not checked: {note}")
        echo("verify cannot check:")
        for limit in outcome.cannot_check:
            echo(f"  - {limit}")
    if not outcome.reproduced:
        raise typer.Exit(ExitCode.NO_VERDICT)
