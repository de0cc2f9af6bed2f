"""Each command loads only what it uses: the start-up cost every `rune` process pays.

Real `rune` processes (fake AI CLIs from tests/fakes, a loopback OpenAI-compatible server)
report the modules they had loaded when they exited. The lists below are what each command
may load; a change that makes a command load more fails here, and the list is where it is
decided whether the command needs it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.bin import install_fake, path_with
from tests.helpers import QUESTION, ROLLBACK, answer, claim
from tests.http_server import OpenAIServer, answering

# Loaded by tools beside us (httpx's own command line, a terminal renderer, the regex engine
# for user patterns, the process-tree library and libc bindings for CLI voices) but never
# needed by a council of HTTP voices answering as JSON.
NOT_NEEDED = ("rich", "pygments", "click", "regex", "psutil", "ctypes", "configparser")
HTTP_STACK = ("httpx", "httpcore", "anyio", "h11", "h2", "certifi", "sniffio")

# Third-party packages each command may load (the standard library is not listed).
ALLOWED_PACKAGES = {
    # typer parses the command line; pydantic reads the run files.
    "list": {
        "typer",
        "pydantic",
        "pydantic_core",
        "annotated_types",
        "annotated_doc",
        "typing_extensions",
        "typing_inspection",
        "shellingham",
    },
    # ... and psutil watches the voices' processes, rapidfuzz matches claims across voices.
    "cli council": {
        "typer",
        "pydantic",
        "pydantic_core",
        "annotated_types",
        "annotated_doc",
        "typing_extensions",
        "typing_inspection",
        "shellingham",
        "psutil",
        "rapidfuzz",
        "cython_runtime",
    },
}
ALLOWED_PACKAGES["http council"] = (ALLOWED_PACKAGES["cli council"] - {"psutil"}) | {
    "httpx",
    "httpcore",
    "anyio",
    "h11",
    "idna",
    "certifi",
    "sniffio",
}

# `rune council list` answered by its index: the directory scan, the index and the rows.
LIST_MODULES = {
    "rune_council",
    "rune_council.cli",
    "rune_council.cli.app",
    "rune_council.cli.lifetime",
    "rune_council.cli.runs_cmds",
    "rune_council.core",
    "rune_council.core.errors",
    "rune_council.core.paths",
    "rune_council.core.records",
    "rune_council.core.safejson",
    "rune_council.core.safetext",
    "rune_council.core.shapes",
    "rune_council.files",
    "rune_council.run_index",
    "rune_council.runs",
    "rune_council.safefile",
}
# What a single pass never needs: the deliberation methods (vote, rank, red team and their
# tally), the other commands' modules, and the live view on a pipe.
NOT_IN_A_SINGLE_PASS = (
    "rune_council.deliberation.registry",
    "rune_council.deliberation.method",
    "rune_council.deliberation.redteam",
    "rune_council.deliberation.tally",
    "rune_council.cli.batch_cmd",
    "rune_council.cli.eval_cmd",
    "rune_council.cli.review_cmd",
    "rune_council.cli.runs_cmds",
    "rune_council.cli.consent_cmd",
    "rune_council.batch",
    "rune_council.evaluation",
    "rune_council.review",
    "rune_council.serve",
    "rune_council.mcp_server",
    "rune_council.analytics",
    "tomllib",  # no config file anywhere: nothing to parse
)

# What a single pass of voices answering as JSON has no use for: the text form of a result,
# a subagent command's runtime, and (its detection read from today's cache) the adapter of
# any CLI it did not find.
NOT_FOR_JSON = ("rune_council.render", "rune_council.deliberation.render")
BUILTIN_CLIS = (
    "claude",
    "codex",
    "gemini",
    "qwen",
    "opencode",
    "aider",
    "cline",
    "amp",
    "agy",
    "grok",
)

# What starts and reads a CLI voice (and a user-defined one), probes for one or asks a login
# shell where CLIs are: a council that seats no CLI needs none of it.
CLI_MACHINERY = (
    "rune_council.runtimes.cli",
    "rune_council.runtimes.cli_adapter",
    "rune_council.runtimes.parsers",
    "rune_council.runtimes.process",
    "rune_council.runtimes.login_path",
    "rune_council.core.userregex",
    "rune_council.discovery.installed_version",
)

# Runs the command line as `rune` does and, at exit (the CLI's exit handlers still run),
# writes the names of the loaded modules where RUNE_TEST_MODULES says, and those of the
# pydantic models built by then (their schema generated) beside it.
PROBE = """
import atexit, json, os, sys
def _built():
    from pydantic import BaseModel
    seen, todo = set(), [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return sorted(
        f"{m.__module__}.{m.__qualname__}"
        for m in seen
        if m.__module__.startswith("rune_council") and m.__dict__.get("__pydantic_complete__")
    )
def _dump():
    import gc
    with open(os.environ["RUNE_TEST_MODULES"], "w") as out:
        json.dump(sorted(sys.modules), out)
    with open(os.environ["RUNE_TEST_MODULES"] + ".gc", "w") as out:
        json.dump({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}, out)
    if "pydantic" in sys.modules:
        with open(os.environ["RUNE_TEST_MODULES"] + ".built", "w") as out:
            json.dump(_built(), out)
atexit.register(_dump)
sys.argv = ["rune", *sys.argv[1:]]
from rune_council.cli import main
main()
"""


def rune_loading(
    tmp: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``rune ARGS`` in a real process: (the process, the modules it had loaded)."""
    dump = tmp / f"modules-{time.monotonic_ns()}.json"
    base = {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        "RUNE_TEST_MODULES": str(dump),
        # A checkout run from its own directory is the one measured, not an installed copy.
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    return out, set(json.loads(dump.read_text()))


def _last_dump(tmp: Path, kind: str) -> Any:
    """What the last ``rune_loading`` process under ``tmp`` wrote of ``kind`` at its exit."""
    last = max(tmp.glob(f"modules-*.json.{kind}"), key=lambda p: int(p.stem.split("-")[1][:-5]))
    return json.loads(last.read_text())


def collector(tmp: Path) -> dict[str, Any]:
    """Whether the last ``rune_loading`` process under ``tmp`` ended with its garbage
    collector running, and how many objects it had frozen out of collections."""
    found: dict[str, Any] = _last_dump(tmp, "gc")
    return found


def models_built(tmp: Path) -> set[str]:
    """The models the last ``rune_loading`` process under ``tmp`` had built."""
    return set(_last_dump(tmp, "built"))


def packages(modules: set[str]) -> set[str]:
    """The third-party top-level packages among ``modules``."""
    tops = {m.split(".")[0] for m in modules}
    std = set(sys.stdlib_module_names)
    return {t for t in tops if t not in std and not t.startswith("_")} - {"rune_council"}


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` loaded, as a module or as the package of one."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


# --------------------------------------------------------------------------- councils


def test_a_council_of_cli_voices_loads_no_http_client(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "claude", answer=answer(QUESTION, "NO", [ROLLBACK]))
    install_fake(tmp_path / "bin", "codex", answer=answer(QUESTION, "NO", [ROLLBACK]))
    install_fake(tmp_path / "bin", "gemini", answer=answer(QUESTION, "YES", [claim("Fine")]))
    out, modules = rune_loading(tmp_path, "council", "--json", "--n", "3", QUESTION)
    assert json.loads(out.stdout)["voices_valid"] == 3

    assert loaded(modules, HTTP_STACK) == []
    assert "rune_council.runtimes.http" not in modules
    assert "rune_council.endpoints.assembly" not in modules
    assert loaded(modules, ("rich", "pygments", "regex")) == []
    assert loaded(modules, NOT_IN_A_SINGLE_PASS) == []
    assert packages(modules) <= ALLOWED_PACKAGES["cli council"], (
        packages(modules) - ALLOWED_PACKAGES["cli council"]
    )


def test_commands_collect_garbage_but_never_walk_what_their_imports_made(
    tmp_path: Path,
) -> None:
    # What a command's imports make lives as long as the process: kept out of every
    # collection (frozen), while what the command makes next is still collected, so a
    # long-running command does not grow.
    install_fake(tmp_path / "bin", "claude", answer=answer(QUESTION, "NO", [ROLLBACK]))
    install_fake(tmp_path / "bin", "gemini", answer=answer(QUESTION, "NO", [ROLLBACK]))
    for args in (("council", "--json", "--n", "2", QUESTION), ("council", "list")):
        rune_loading(tmp_path, *args)
        state = collector(tmp_path)
        assert state["enabled"], args
        assert state["frozen"] > 10_000, (args, state)


def test_a_council_reusing_its_detection_loads_only_the_adapters_of_the_clis_it_found(
    tmp_path: Path,
) -> None:
    seated = ("claude", "gemini")
    for name in seated:
        install_fake(tmp_path / "bin", name, answer=answer(QUESTION, "NO", [ROLLBACK]))
    ask = ("council", "--json", "--n", "2", QUESTION)
    _, probing = rune_loading(tmp_path, *ask)
    # Detection probes every CLI it knows, so the first council loads every adapter ...
    every = tuple(f"rune_council.runtimes.clis.{n}" for n in BUILTIN_CLIS)
    assert loaded(probing, every) == list(every)

    out, modules = rune_loading(tmp_path, *ask)
    assert json.loads(out.stdout)["voices_valid"] == 2
    # ... and the next, reading today's cache, only those of the CLIs it seats.
    assert loaded(modules, every) == [f"rune_council.runtimes.clis.{n}" for n in seated]
    assert loaded(modules, NOT_FOR_JSON) == []


@pytest.fixture
def endpoint() -> Iterator[OpenAIServer]:
    models = ["meta/llama-3.3-70b-instruct", "mistralai/mistral-large-2-instruct"]
    text = answer(QUESTION, "NO", [ROLLBACK])
    with OpenAIServer(models=models, behaviours={m: answering(text) for m in models}) as srv:
        yield srv


def test_a_council_of_endpoint_voices_loads_the_http_stack_and_no_more(
    tmp_path: Path, endpoint: OpenAIServer
) -> None:
    ask = ("council", "--json", "--n", "2", "--endpoint", endpoint.base_url, QUESTION)
    # The first council on a machine looks for installed CLIs (a login shell's PATH, in a
    # process it watches); the next ones read what it found.
    rune_loading(tmp_path, *ask)
    out, modules = rune_loading(tmp_path, *ask)
    assert json.loads(out.stdout)["voices_valid"] == 2

    assert "httpx" in modules and "rune_council.runtimes.http" in modules
    assert [m for m in NOT_NEEDED if m in modules] == []
    assert loaded(modules, NOT_IN_A_SINGLE_PASS) == []
    assert packages(modules) <= ALLOWED_PACKAGES["http council"], (
        packages(modules) - ALLOWED_PACKAGES["http council"]
    )
    # Detection came from today's cache and found no CLI: no CLI's adapter is loaded, nor
    # the text form of the result (--json), nor a subagent command's runtime (none given).
    assert loaded(modules, tuple(f"rune_council.runtimes.clis.{n}" for n in BUILTIN_CLIS)) == []
    assert loaded(modules, (*NOT_FOR_JSON, "rune_council.runtimes.subagent")) == []
    # Nor what runs or defines a CLI: no process is started, no login shell asked.
    assert loaded(modules, CLI_MACHINERY) == []


def test_a_single_pass_builds_only_the_models_it_validates_or_writes(
    tmp_path: Path, endpoint: OpenAIServer
) -> None:
    ask = ("council", "--json", "--n", "2", "--endpoint", endpoint.base_url, QUESTION)
    rune_loading(tmp_path, *ask)
    out, _ = rune_loading(tmp_path, *ask)
    assert json.loads(out.stdout)["voices_valid"] == 2
    built = models_built(tmp_path)

    # What comes in is validated: the ask, the request, the detection cache and the voices'
    # answers are built.
    contract = "rune_council.core.contract."
    for needed in ("PerspectiveRequest", "RuntimesFile", "VoiceAnswer"):
        assert contract + needed in built
    assert "rune_council.council.intake.Ask" in built
    # The result is written without building its schema (``made_json``), and what the council
    # made from validated values (an attempt, a detected endpoint, a gated claim, a dissent
    # entry) is taken as it is.
    for own in ("CouncilResult", "Attempt", "DetectedRuntime", "Claim", "DissentEntry"):
        assert contract + own not in built
    # Not what no part of it uses: a door's defaults (there are none), a council.toml's model
    # (there is none), the deliberation's results (a single pass has none) ...
    assert "rune_council.council.intake.AskDefaults" not in built
    assert "rune_council.config.CouncilFile" not in built
    # ... the formats an endpoint refused before (none was: there is no such file) ...
    assert "rune_council.endpoints.formats.FormatsFile" not in built
    for unused in ("Deliberation", "VoteResult", "RankResult", "Synthesis", "RiskRegister"):
        assert contract + unused not in built
    # ... nor what the council fills from its own values (the settings it merged, a voice's
    # slot, its events, the prompt count, the agreement): those are not checked again.
    assert "rune_council.config.CouncilConfig" not in built
    for own in ("Voice", "RunEvent", "Orchestrator", "PromptCost", "Agreement", "Checks"):
        assert contract + own not in built


def test_the_http_voice_module_does_not_load_httpx_command_line_tool() -> None:
    probe = "import json, sys, rune_council.runtimes.http\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    modules = set(json.loads(out.stdout))
    assert "httpx" in modules
    assert [m for m in NOT_NEEDED if m in modules] == []


# --------------------------------------------------------------------------- list


def _history(rune: Path, runs: int) -> None:
    """Run files dated like earlier runs' (an index never trusts a file changed just now)."""
    example = Path(__file__).resolve().parents[1] / ".rune-example" / "council"
    template = json.loads((example / "run-orders-shard-critique.json").read_text())
    council = rune / "council"
    council.mkdir(parents=True)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    hour_ago = time.time() - 3600
    for i in range(runs):
        began = start + dt.timedelta(minutes=i)
        doc = {**template, "id": f"r{i:03d}", "started_at": began.isoformat()}
        doc["finished_at"] = (began + dt.timedelta(seconds=5)).isoformat()
        path = council / f"run-r{i:03d}.json"
        path.write_text(json.dumps(doc))
        os.utime(path, (hour_ago, hour_ago))


def test_list_answered_by_its_index_loads_only_the_index_reader(tmp_path: Path) -> None:
    rune = tmp_path / ".rune"
    _history(rune, 5)
    where = ("--rune-dir", str(rune))
    rune_loading(tmp_path, "council", "list", *where)  # builds the index

    out, modules = rune_loading(tmp_path, "council", "list", "--json", *where)
    assert [r["id"] for r in json.loads(out.stdout)] == [f"r{i:03d}" for i in range(4, -1, -1)]
    # No contract model is built, no council, stage, runtime or other command is loaded.
    ours = {m for m in modules if m == "rune_council" or m.startswith("rune_council.")}
    assert ours <= LIST_MODULES, sorted(ours - LIST_MODULES)
    assert "rune_council.core.contract" not in modules
    assert loaded(modules, HTTP_STACK) == []
    assert packages(modules) <= ALLOWED_PACKAGES["list"], (
        packages(modules) - ALLOWED_PACKAGES["list"]
    )


def test_list_reads_a_changed_file_for_what_the_index_cannot_know(tmp_path: Path) -> None:
    rune = tmp_path / ".rune"
    _history(rune, 3)
    where = ("--rune-dir", str(rune))
    rune_loading(tmp_path, "council", "list", *where)
    changed = rune / "council" / "run-r001.json"
    doc = json.loads(changed.read_text())
    changed.write_text(json.dumps({**doc, "question": "asked again, differently"}))
    hour_ago = time.time() - 3600
    os.utime(changed, (hour_ago, hour_ago))

    out, modules = rune_loading(tmp_path, "council", "list", "--json", *where)
    rows = {r["id"]: r["question"] for r in json.loads(out.stdout)}
    assert rows["r001"] == "asked again, differently"
    # The changed file is read and validated as a run file; the rest still comes from the
    # index, so the council itself is still not loaded.
    assert "rune_council.core.contract" in modules
    assert loaded(modules, ("rune_council.council", "rune_council.stages", *HTTP_STACK)) == []


# --------------------------------------------------------------------------- the map


def test_every_command_module_is_in_the_map_the_command_line_loads_from() -> None:
    """A command declared in a module the map does not name would never be loaded."""
    import typer

    from rune_council.cli.app import COMMAND_MODULES, council_app

    declared = {
        info.name or typer.main.get_command_name(info.callback.__name__): (
            info.callback.__module__.rsplit(".", 1)[-1]
        )
        for info in council_app.registered_commands
        if info.callback is not None
    }
    # door_command declares mcp and serve from handover.py, on behalf of their modules.
    declared = {
        name: COMMAND_MODULES.get(name, module) if module == "handover" else module
        for name, module in declared.items()
    }
    assert declared == COMMAND_MODULES
    cli_dir = Path(__file__).resolve().parents[1] / "rune_council" / "cli"
    declaring = {
        p.stem
        for p in cli_dir.glob("*.py")
        if "@council_app.command" in p.read_text() or "door_command(\n" in p.read_text()
    }
    assert declaring - {"handover"} <= set(COMMAND_MODULES.values())
