"""Builders for voice answers used across the tests.

The answer and claim builders are the testing kit's (``rune_council.testing``), the same
ones a caller's tests use; what is left here is specific to this project's tests.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rune_council.testing import ScriptedRuntime, answer_for, claim
from tests.fakes.bin import path_with

__all__ = [
    "ASK",
    "ASK_FLAGS",
    "CHAIR_TEXT",
    "MERGE",
    "OFFLINE",
    "PLAN",
    "QUESTION",
    "REGISTER",
    "ROLLBACK",
    "SHARDS",
    "UNDO",
    "answer",
    "bare_machine_env",
    "claim",
    "ctrl_c_once_running",
    "gated_voice",
    "member",
    "orchestrator_merging",
    "request",
    "run_rune",
    "scripted",
    "three",
    "user_env",
]

# The tests' historical name for the kit's builder: answer(question, stance, claims, fenced).
answer = answer_for

PLAN = """\
# Plan: shard the orders table
1. Split orders by customer_id into 8 shards.
2. Route reads through a new lookup service.
3. Migrate in one weekend with the site offline.
4. Keep the reporting jobs on the old single table.
5. No rollback step is defined.
"""


def gated_voice(
    voice_id: str,
    family: str,
    text: str,
    *,
    role: str = "standard",
    confirmed: bool = True,
    fallback: bool = False,
    question: str = "Should we shard the orders table?",
    runtime: str | None = None,
) -> Any:
    """A voice as it leaves GATE, built by running the real gate on ``text``."""
    from rune_council.core.contract import PerspectiveRequest, RawOutput, Voice
    from rune_council.stages.gate import gate

    voice = Voice(
        id=voice_id,
        slot_role=role,  # type: ignore[arg-type]
        source="subagent" if fallback else "external-cli",
        runtime=runtime or f"{family}-cli",
        model_family=family,
        family_confidence="confirmed" if confirmed else "unknown",
        is_fallback=fallback,
        status="complete",
        raw=RawOutput(text=text),
    )
    dropped = gate(voice, PerspectiveRequest(id="t", question=question))
    assert dropped is None, dropped
    return voice


# Claims about PLAN shared by the council tests: two families' wording of the missing
# rollback (same evidence, different words) and one unrelated claim.
QUESTION = "Should we shard the orders table?"
ROLLBACK = claim(
    "The plan has no rollback step",
    severity="MUST",
    ref="plan.md:6",
    quote="No rollback step is defined.",
)
UNDO = {**ROLLBACK, "text": "Nothing says how to undo the migration if it fails"}
SHARDS = claim(
    "Eight shards leaves headroom",
    ref="plan.md:2",
    quote="Split orders by customer_id into 8 shards.",
)


# One ask that sets most of what a caller may set (a template, mode, n, an artifact, rounds
# and their policy, preferred families, a timeout and a deadline): in the keys every door's
# parser produces (a JSON body, tool arguments, a batch line), and as the command line
# spells it, written out by hand so that the spelling itself is what is checked.
ASK: dict[str, Any] = {
    "question": QUESTION,
    "template": "security-review",
    "mode": "critique",
    "n": 4,
    "artifact": "plan.md",
    "multi_round": {"max_rounds": 2, "on_divergence": "halt"},
    "prefer": ["google"],
    "timeout": 60,
    "deadline": 90,
}
ASK_FLAGS = [
    QUESTION,
    *("--template", "security-review"),
    *("--mode", "critique"),
    *("--n", "4"),
    *("--artifact", "plan.md"),
    *("--rounds", "2"),
    *("--on-divergence", "halt"),
    *("--prefer", "google"),
    *("--timeout", "60"),
    *("--deadline", "90"),
]


def council_result_schema() -> dict[str, Any]:
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "contracts" / "council-result.schema.json"
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return schema


def bare_machine_env(tmp: Path) -> dict[str, str]:
    """A fresh machine in ``tmp``: an empty ``tmp/bin`` and the system's tools on PATH (no
    AI CLI), ``tmp`` as HOME, no login shell read, nothing standing for consent; only the
    code under test is found where the test runner found it (PYTHONPATH)."""
    (tmp / "bin").mkdir(exist_ok=True)
    env = {
        "PATH": f"{tmp / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def user_env(tmp: Path, *, consent: bool = True) -> dict[str, str]:
    """A user's environment in ``tmp`` and nothing of the test runner's: the fake CLIs in
    ``tmp/bin`` before the system's tools on PATH, ``tmp`` as HOME and, unless ``consent``
    is False, consent to the external CLIs given as a non-interactive caller gives it."""
    env = {"PATH": path_with(tmp / "bin"), "HOME": str(tmp), "LANG": "C.UTF-8"}
    if consent:
        env["RUNE_COUNCIL_ALLOW_EXTERNAL"] = "1"
    return env


def run_rune(
    cwd: Path, env: Mapping[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``rune ARGS`` as a real process in ``cwd`` with exactly ``env``: its text output
    captured, nothing on its stdin, and ``timeout`` seconds at the most."""
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def ctrl_c_once_running(
    cwd: Path, env: Mapping[str, str], args: Sequence[str], pids: Path, voices: int
) -> tuple[int, str, str]:
    """``rune ARGS`` started as from a terminal and sent Ctrl-C (SIGINT) once ``voices`` fake
    voices have written their pid to ``pids``: its exit code, stdout and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", *args],
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell that runs the suite in the background ignores SIGINT, and the child would
        # inherit that; a user's terminal never does.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 90
    started: list[str] = []
    while time.monotonic() < deadline and len(started) < voices:
        time.sleep(0.05)
        started = pids.read_text().split() if pids.exists() else []
    if len(started) < voices:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"{len(started)} of {voices} voices started: {started}")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=90)
    return proc.returncode, out, err


# --------------------------------------------------------------------------- deliberating councils
# Scripted members that read the prompt they are given and answer as a model would (the JSON
# answer to the question, VOTE lines to a ballot, a RANK line over the letters shown), and
# what an orchestrator and a red team reply: shared by the deliberation tests and those of
# the run file's writer.

OFFLINE = claim(
    "Taking the site offline for a weekend is a business risk",
    severity="SHOULD",
    ref="plan.md:4",
    quote="Migrate in one weekend with the site offline.",
)


def _letters(prompt: str) -> dict[str, str]:
    return dict(
        re.findall(
            r"^Answer ([A-Z]):\n(.*?)(?=\n\nAnswer [A-Z]:|\n\nRank the )", prompt, re.M | re.S
        )
    )


def scripted(
    stance: str,
    claims: list[dict[str, Any]],
    *,
    likes: str = "rollback",
    votes_yes_on: Callable[[str], bool] | None = None,
    turns: bool = False,
    seen: list[str] | None = None,
    fail_on: str | None = None,
) -> Callable[[str], str]:
    """A member: answers the question, votes on items, ranks answers mentioning ``likes`` first.

    ``turns``: after its first ranking it ranks the other way round (a member changing its mind).
    """
    ranked: list[str] = []

    def preference(text: str) -> int:
        text = text.lower()
        return 0 if likes in text else 1 if "undo" in text else 2

    def fn(prompt: str) -> str:
        if seen is not None:
            seen.append(prompt)
        if fail_on is not None and fail_on in prompt:
            raise RuntimeError("this member is down")
        if "Items:" in prompt and "VOTE -> " in prompt:
            items = re.findall(r"^(\d+)\. (.*)$", prompt.split("Items:")[1], re.M)
            approve = votes_yes_on or (lambda text: likes in text.lower())
            return "\n".join(f"VOTE -> {n} {'yes' if approve(text) else 'no'}" for n, text in items)
        if "\nRANK " in prompt and "Answer " in prompt:
            shown = _letters(prompt)
            order = sorted(shown, key=lambda k: (preference(shown[k]), k))
            if turns and ranked:
                order.reverse()
            ranked.append(prompt)
            return f"RANK {'>'.join(order)} conf=0.8"
        return answer(QUESTION, stance, claims)

    return fn


def member(fn: Callable[[str], str], name: str, family: str) -> ScriptedRuntime:
    return ScriptedRuntime(fn, name=name, family=family, source="subagent")


def three(**kw: Any) -> list[ScriptedRuntime]:
    return [
        member(
            scripted("NO, not before a rollback exists", [ROLLBACK], **kw), "claude", "anthropic"
        ),
        member(scripted("NO", [UNDO, OFFLINE], **kw), "codex", "openai"),
        member(scripted("YES, with care", [SHARDS], **kw), "gemini", "google"),
    ]


def request(run_id: str, n: int = 3, **deliberation: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "question": QUESTION,
        "n": n,
        "artifact": {"name": "plan.md", "text": PLAN},
        "deliberation": deliberation,
    }


def orchestrator_merging(text: str) -> Callable[[str], str]:
    def fn(prompt: str) -> str:
        if "You are the orchestrator" in prompt:
            return text
        return "The council found the plan unsafe without a rollback step.\nSYNTH open=[]"

    return fn


MERGE = """PROPOSE p1 "The plan needs a rollback step before it runs" ev=v1.c1,v2.c1
PROPOSE p2 "Shard now" ev=v3.stance
PROPOSE p3 "Do not shard yet" ev=v1.stance,v2.stance
PROPOSE p4 "A weekend offline is a business risk" ev=v2.c2
PROPOSE p5 "Eight shards leave headroom" ev=v3.c1
"""


CHAIR_TEXT = """The council ranks the rollback concern first: do not shard before a rollback exists.

[UNCERTAIN] Whether eight shards leave enough headroom is unclear: one member thought so,
the others did not address it.

SYNTH open=[]
"""


REGISTER = json.dumps(
    {
        "risks": [
            {
                "category": "reliability",
                "description": "No rollback if the migration fails half way",
                "severity": "critical",
                "likelihood": "medium",
                "identified_by": ["p1", "p2"],
                "mitigation": "Write and rehearse a rollback step",
            },
            {
                "category": "cost",
                "description": "A weekend offline loses sales",
                "severity": "high",
                "likelihood": "high",
                "identified_by": ["p2"],
                "mitigation": "Migrate per customer range",
            },
        ],
        "summary": "1 critical, 1 high: no way back from a failed migration",
    }
)


def running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie only waits to be reaped, so it counts as gone."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
