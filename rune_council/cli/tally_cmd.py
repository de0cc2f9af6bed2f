"""``rune council tally FILE``: validate and tally a council transcript, no model involved."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .. import safejson
from ..errors import ExitCode
from ..safefile import read_capped
from ..safetext import plain
from .app import council_app, fail

if TYPE_CHECKING:
    from ..contract import TallyReport

MAX_TRANSCRIPT_BYTES = 20_000_000


def _transcript_from(raw: str) -> str:
    """A transcript as given, or the rank-stage transcript kept in a run file."""
    if raw.lstrip().startswith("{"):
        try:
            data = safejson.loads(raw, what="the run file")
        except json.JSONDecodeError:
            return raw
        rank = (data.get("deliberation") or {}).get("rank") if isinstance(data, dict) else None
        if isinstance(rank, dict) and isinstance(rank.get("transcript"), str):
            return str(rank["transcript"])
        raise fail(
            "the JSON file holds no rank transcript (deliberation.rank.transcript)",
            ExitCode.BAD_INPUT,
        )
    return raw


def render_tally(report: TallyReport, source: str) -> str:
    out: list[str] = []
    state = "valid" if report.valid else f"INVALID ({len(report.errors)} error(s))"
    out.append(f"tally of {source}: {state}")
    pruned = {p.label: p for p in report.pruned}
    out.append(
        "proposals: "
        + (" ".join(p + (" (pruned)" if p in pruned else "") for p in report.proposals) or "none")
    )
    for p in report.pruned:
        out.append(f"  pruned {p.label} (line {p.line}): {p.reason}")
    out.append("rankers:" if report.rankers else "rankers: none")
    for r in report.rankers:
        points = " ".join(f"{k}={v:g}" for k, v in r.points.items()) or "-"
        rho = "-" if r.mean_spearman is None else f"{r.mean_spearman:.3f}"
        flag = "  DISSENTING" if r.dissenting else ""
        out.append(
            f"  {r.ranker:<10} line {r.line:<4} {r.ballot or '(nothing left to rank)'}  "
            f"conf {r.conf:g}  points {points}  mean rho {rho}{flag}"
        )
    if report.scores:
        out.append(
            "scores (Borda x conf): "
            + ", ".join(
                f"{s.label} {s.score:g}" + (" [blocked]" if s.blocked else "")
                for s in report.scores
            )
        )
        out.append("final order: " + " > ".join("=".join(level) for level in report.final_order))
    out.append(f"winner: {report.winner or 'none (no ballot, a tie, or all blocked)'}")
    for b in report.blocked:
        out.append(f"blocked: {b.label} (lines {', '.join(map(str, b.lines))}): {b.reason}")
    c = report.consensus
    if c.w is None:
        out.append(f"consensus: undefined ({c.note})")
    else:
        out.append(
            f"consensus: W = {c.w:.4f} ({c.label}), {c.rankers} ranking(s) over "
            f"{c.proposals} proposal(s); {c.method}"
        )
    out.append("dissenting rankers: " + (", ".join(report.dissenters) or "none"))
    for v in report.votes:
        out.append(
            f"vote on {v.target}: yes {len(v.yes)} ({', '.join(v.yes) or '-'}), "
            f"no {len(v.no)} ({', '.join(v.no) or '-'}), abstain {len(v.abstain)}"
        )
    if report.synth is not None:
        s = report.synth
        closing = (
            "closes the council"
            if s.closes
            else f"does NOT close the council: open {'; '.join(s.open)}"
        )
        out.append(f"synth (line {s.line}): {s.text or '(no text)'} — {closing}")
    if report.dropped:
        out.append(f"dropped lines ({len(report.dropped)}):")
        out += [f"  line {d.line}: {d.text}  — {d.reason}" for d in report.dropped]
    if report.errors:
        out.append(f"errors ({len(report.errors)}):")
        out += [f"  line {e.line}: {e.text}  — {e.reason}" for e in report.errors]
    return "\n".join(out)


@council_app.command(
    "tally", help="Validate and tally a council transcript (typed moves); exit 1 on errors."
)
def tally_command(
    file: Annotated[
        str,
        typer.Argument(help="Transcript file, '-' for stdin, or a run file (its rank transcript)."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the tally as JSON.")] = False,
) -> None:
    from ..deliberation.tally import tally_text

    if file == "-":
        raw = sys.stdin.read(MAX_TRANSCRIPT_BYTES)
        source = "stdin"
    else:
        try:
            # Regular files only, read up to the cap: a FIFO or a device is refused at once.
            data, cut = read_capped(Path(file), MAX_TRANSCRIPT_BYTES)
        except OSError as exc:
            from ..errors import RequestError, exit_code_for, file_error

            error = file_error(f"cannot read {file}", exc, bad_path=RequestError)
            raise fail(str(error), exit_code_for(error)) from None
        if cut:
            raise fail(f"{file} is larger than {MAX_TRANSCRIPT_BYTES} bytes", ExitCode.BAD_INPUT)
        raw = data.decode("utf-8", errors="replace")
        source = file
    report = tally_text(_transcript_from(raw))
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        typer.echo(plain(render_tally(report, source)))
    if not report.valid:
        raise typer.Exit(ExitCode.NO_VERDICT)
