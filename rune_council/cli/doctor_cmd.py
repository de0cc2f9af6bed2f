"""``rune council doctor``: one screen saying whether a council can be held here and, for each
problem, the one command that fixes it. Exit 0 when at least two confirmed model families
are ready, 1 otherwise."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..core.errors import ExitCode
from .app import council_app, council_errors, echo, echo_json

if TYPE_CHECKING:
    from ..discovery.doctor import Diagnosis, Row


@council_app.command(
    "doctor",
    help="Which CLIs and endpoints can answer, whether the project's config is trusted, "
    "consent, and the next command for each problem. Exit 0 when two model families are ready.",
)
def doctor_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the diagnosis as JSON.")] = False,
    refresh: Annotated[bool, typer.Option(help="Probe again, ignoring today's cache.")] = False,
    rune_dir: Annotated[Path | None, typer.Option(help="Where .rune files go.")] = None,
) -> None:
    import asyncio

    from ..core.paths import RuneDir
    from ..discovery.doctor import diagnose

    where = RuneDir.resolve(rune_dir)
    with council_errors():
        diagnosis = asyncio.run(diagnose(where, dict(os.environ), refresh=refresh))
    if as_json:
        doc = {**diagnosis.as_json(), "fixes": next_steps(diagnosis)}
        echo_json(json.dumps(doc, indent=2))
    else:
        echo(screen(diagnosis))
    raise typer.Exit(ExitCode.OK if diagnosis.ok else ExitCode.NO_VERDICT)


def next_steps(d: Diagnosis) -> list[str]:
    """The fixes of the problems found and, when even they leave fewer than two model
    families within reach (nothing installed, or one family only), the ways to add one:
    a screen that says "not ready" always says what to do next."""
    from ..discovery.doctor import MIN_FAMILIES

    steps = list(d.fixes)
    reachable = {
        r.family
        for r in d.rows
        if (r.found or r.kind == "endpoint") and r.family_confidence == "confirmed"
    }
    if len(reachable) >= MIN_FAMILIES:
        return steps
    missing = [
        r.name
        for r in d.rows
        if r.kind == "cli"
        and not r.found
        and r.family_confidence == "confirmed"
        and r.family not in reachable
    ]
    which = "an AI CLI of another model family" if reachable else "one of the AI CLIs"
    if missing:
        steps.append(f"install {which} a council seats ({', '.join(missing)}) and log in to it")
    steps += [
        'or point the council at an OpenAI-compatible endpoint: rune council "<question>" '
        "--endpoint ollama (a preset, a base URL, or a name under [endpoints] in council.toml)",
        "or see a council work with nothing installed: rune council demo",
    ]
    return steps


def _row(row: Row) -> list[str]:
    from ..core.safetext import one_line

    found = ("found" if row.found else "not found") if row.kind == "cli" else "endpoint"
    family = f"{row.family} ({row.family_confidence})"
    auth = row.auth or "-"
    lines = [f"  {row.name:<10} {found:<10} {row.version or '-':<10} {auth:<11} {family}"]
    if row.evidence and (row.found or row.kind == "endpoint"):
        lines.append(f"      {one_line(row.evidence, 300)}")
    if row.problem:
        lines.append(f"      problem: {one_line(row.problem, 300)}")
    if row.fix:
        lines.append(f"      fix: {row.fix}")
    return lines


def screen(d: Diagnosis) -> str:
    """The diagnosis as text; everything in it that a CLI or file supplied is made plain."""
    from ..core.safetext import plain

    when = "cached today" if d.from_cache else "probed now"
    out = [f"rune council doctor ({when}, {d.detected_at})", ""]
    out.append(f"  {'runtime':<10} {'found':<10} {'version':<10} {'auth':<11} family")
    for row in d.rows:
        out += _row(row)
    out.append("")
    if d.config_files:
        out.append("config:")
        for c in d.config_files:
            out.append(f"  {c.path} ({c.scope}): {c.trust}")
            if c.problem:
                out += [f"      problem: {c.problem}", f"      fix: {c.fix}"]
    else:
        out.append("config: no council.toml (defaults)")
    out.append(f"consent for external CLIs and endpoints: {d.consent}")
    if d.consent_fix:
        out.append(f"      fix: {d.consent_fix}")
    out += [f"note: {' '.join(n.split())}" for n in d.notes]
    out.append("")
    families = ", ".join(d.ready_families) or "none"
    if d.ok:
        out.append(f"ready: {len(d.ready_families)} confirmed families ({families})")
    else:
        out.append(
            f"not ready: {len(d.ready_families)} confirmed family ready ({families}); "
            "a council needs two"
        )
    steps = next_steps(d)
    if steps:
        out.append("next:")
        out += [f"  {step}" for step in steps]
    return "\n".join(plain(line) for line in out)
