"""One intake for every door: what an ask means, checked against what `rune council` does.

The council runs as a user runs it: the CLI and the intake each in a real process, with
fake AI CLIs (tests/fakes) answering, and their run files compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from rune_council.core.contract import PerspectiveRequest
from rune_council.council.intake import (
    FLAGS,
    REQUEST_PATHS,
    Ask,
    AskDefaults,
    AskError,
    Door,
    ask_from_arguments,
    ask_schema,
    parse_ask,
    prepare,
)
from tests.fakes.bin import install_fake, path_with
from tests.helpers import ASK, ASK_FLAGS, PLAN, QUESTION, ROLLBACK, UNDO, answer, claim


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_CONFIG_DIR": str(tmp / "user-config"),
        **extra,
    }


def project(tmp: Path) -> Path:
    """A project with a plan, three fake CLIs of three families, and a secret beside it."""
    work = tmp / "work"
    work.mkdir()
    (work / "plan.md").write_text(PLAN, encoding="utf-8")
    (tmp / "secret.txt").write_text("TOP SECRET", encoding="utf-8")
    (work / "link.md").symlink_to(tmp / "secret.txt")
    install_fake(work / "bin", "claude", answer=answer(QUESTION, "NO", [ROLLBACK]))
    install_fake(work / "bin", "codex", answer=answer(QUESTION, "NO", [UNDO]))
    install_fake(work / "bin", "gemini", answer=answer(QUESTION, "YES", [claim("Fine as is")]))
    return work


def door(work: Path, **changes: Any) -> Door:
    settings: dict[str, Any] = {
        "rune_dir": work / ".rune",
        "artifact_root": work,
        "env": env_for(work),
    }
    return Door(**{**settings, **changes})


def run(work: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=work,
        env=env_for(work, **extra),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def rune(work: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return run(work, "-m", "rune_council.cli", "council", *args, **extra)


# The intake as a door of its own: an ask as JSON in, the council it stands for run.
INTAKE_DOOR = """
import json, sys
from rune_council.council.intake import Door, parse_ask, prepare
print(prepare(parse_ask(json.loads(sys.argv[1])), Door()).convene().id)
"""


def ask(**keys: Any) -> Ask:
    """An ask as a door hands one in: decoded keys, shorthands and all."""
    return parse_ask(keys)


def recorded(work: Path, run_id: str) -> dict[str, Any]:
    path = work / ".rune" / "council" / f"run-{run_id}.json"
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def without_id(request: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k != "id"}


def council_as_seen(doc: dict[str, Any]) -> dict[str, Any]:
    """What a user reads off a run file, without what differs between any two runs (the
    id, times, process ids, durations)."""
    return {
        "request": without_id(doc["request"]),
        "status": doc["status"],
        "voices_requested": doc["voices_requested"],
        "voices": [
            (v["id"], v["runtime"], v["model_family"], v["slot_role"], v["status"])
            for v in doc["voices"]
        ],
        "decorrelation": doc["decorrelation"],
        "consent": doc["runtime_report"]["consent"],
        "notes": doc["notes"],
        "consensus": [c["claim"] for c in doc["agreement"]["consensus_claims"]],
    }


# --------------------------------------------------------------------------- doors agree


def test_the_intake_builds_the_council_the_cli_builds_for_the_same_ask(tmp_path: Path) -> None:
    work = project(tmp_path)
    # Both probe the CLIs (--refresh), so neither reads the other's detection.
    flags = [*ASK_FLAGS, "--yes", "--refresh"]
    keys = {**ASK, "yes": True, "refresh": True}
    by_cli = rune(work, *flags, "--id", "by-cli", "--json")
    assert by_cli.returncode in (0, 1), by_cli.stderr
    by_intake = run(work, "-c", INTAKE_DOOR, json.dumps({**keys, "id": "by-intake"}))
    assert by_intake.returncode == 0, by_intake.stderr
    cli_run, intake_run = recorded(work, "by-cli"), recorded(work, "by-intake")

    # The request the CLI recorded is the one prepare builds, field for field.
    prepared = prepare(parse_ask({**keys, "id": "by-cli"}), door(work))
    assert prepared.request.model_dump(mode="json") == cli_run["request"]
    assert prepared.options.template is None  # applied once, in the intake
    # And the council that runs from it is the same one: voices, consent, verdict.
    assert council_as_seen(intake_run) == council_as_seen(cli_run)
    assert cli_run["request"]["template"]["name"] == "security-review"
    assert cli_run["request"]["n"] == 4 and cli_run["request"]["mode"] == "critique"


def test_a_chain_asked_through_the_intake_runs_the_steps_the_cli_runs(tmp_path: Path) -> None:
    work = project(tmp_path)
    by_cli = rune(
        work,
        QUESTION,
        "--chain",
        "red-team-first",
        "--n",
        "2",
        "--id",
        "chain-cli",
        "--yes",
        "--refresh",
        "--json",
    )
    assert by_cli.returncode in (0, 1), by_cli.stderr
    keys = {"question": QUESTION, "chain": "red-team-first", "n": 2, "yes": True, "refresh": True}
    by_intake = run(work, "-c", INTAKE_DOOR, json.dumps({**keys, "id": "chain-intake"}))
    assert by_intake.returncode == 0, by_intake.stderr
    for step in ("{}.red-team", "{}"):
        cli_doc, intake_doc = (
            json.loads(json.dumps(recorded(work, step.format(run_id))).replace(run_id, "ID"))
            for run_id in ("chain-cli", "chain-intake")
        )
        # Each step's request (its template, its place in the chain, what the red team
        # found) and its council are the same, the ids aside.
        assert council_as_seen(intake_doc) == council_as_seen(cli_doc), step
    assert recorded(work, "chain-intake")["request"]["chain"]["step"] == 2


def test_n_above_the_cap_is_noted_in_the_words_the_cli_uses(tmp_path: Path) -> None:
    work = project(tmp_path)
    out = rune(
        work, QUESTION, "--n", "9", "--id", "nine", "--json", RUNE_COUNCIL_ALLOW_EXTERNAL="1"
    )
    assert out.returncode == 0, out.stderr
    cli_notes = [note for note in recorded(work, "nine")["notes"] if note.startswith("n=")]
    assert cli_notes == ["n=9 requested; capped at 5 voices"]

    prepared = prepare(ask(question=QUESTION, n=9), door(work))
    assert list(prepared.notes) == cli_notes
    assert prepared.request.n == 9  # the run file keeps what was asked, as the CLI's does
    assert prepare(ask(question=QUESTION, n=5), door(work)).notes == ()


def test_a_hosts_arguments_reach_the_council_the_same_keys_ask_for(tmp_path: Path) -> None:
    work = project(tmp_path)
    line = (
        "--template security-review --n 4 --artifact plan.md --rounds 2 "
        '--on-divergence halt --summon any@2 --prefer google --id h1 "Is $(rm -rf ~) `id` safe?"'
    )
    keys = {
        "question": "Is $(rm -rf ~) `id` safe?",
        "template": "security-review",
        "n": 4,
        "artifact": "plan.md",
        "multi_round": {"max_rounds": 2, "on_divergence": "halt"},
        "summon": ["any@2"],
        "prefer": ["google"],
        "id": "h1",
    }
    host = prepare(ask_from_arguments(line), door(work, trusted_caller=False))
    assert host.request == prepare(parse_ask(keys), door(work, trusted_caller=False)).request
    # The words are data: the shell's $(...) and backticks are part of the question.
    assert host.request.question == "Is $(rm -rf ~) `id` safe?"
    with pytest.raises(
        AskError, match=r"unknown option '--templte' \(closest valid option: --template\)"
    ):
        ask_from_arguments('--templte security-review "q"')
    with pytest.raises(AskError, match=r"^--rounds: Input should be less than or equal to 10"):
        ask_from_arguments('--rounds 11 "q"')


def test_every_council_flag_of_the_cli_is_spelled_as_the_intake_spells_it() -> None:
    import typer

    import rune_council.cli  # noqa: F401  (registers the commands)
    from rune_council.cli.app import council_app

    run_command = typer.main.get_command(council_app).commands["run"]  # type: ignore[attr-defined]
    door_only = {"--rune-dir", "--json", "-y"}
    flags = {opt for param in run_command.params for opt in param.opts if opt.startswith("-")}
    assert flags - door_only <= set(FLAGS.values())


# --------------------------------------------------------------------------- templates


def test_a_template_is_applied_once_and_the_callers_own_keys_win(tmp_path: Path) -> None:
    work = project(tmp_path)
    given = ask(question=QUESTION, template="security-review", n=5, artifact="plan.md")
    req = prepare(given, door(work)).request
    assert req.template is not None and req.template.name == "security-review"
    assert req.n == 5  # the caller's, over the template's 3
    assert req.mode == "review" and req.evidence.require_anchor  # the template's
    assert req.deliberation is not None and req.deliberation.method == "vote"
    assert req.preamble is not None and req.preamble.count("security review") == 1
    assert (req.slots[0].persona or "").startswith("an application-security")

    # A batch's flags (the door's defaults) beat the template; the line's own keys beat both.
    batch = door(work, defaults=AskDefaults(n=4, mode="critique"))
    line = prepare(ask(question=QUESTION, template="security-review", artifact="plan.md"), batch)
    assert (line.request.n, line.request.mode) == (4, "critique")
    own = ask(question=QUESTION, template="security-review", artifact="plan.md", n=2)
    assert prepare(own, batch).request.n == 2


def test_template_mistakes_name_the_key_and_stop_before_anything_runs(tmp_path: Path) -> None:
    work = project(tmp_path)
    with pytest.raises(
        AskError,
        match=r"template: no template named 'securty-review' "
        r"\(closest: security-review\)",
    ):
        prepare(ask(question=QUESTION, template="securty-review"), door(work))
    with pytest.raises(AskError) as missing:
        prepare(ask(question=QUESTION, template="security-review"), door(work))
    assert missing.value.problems[0].key == "artifact"
    with pytest.raises(AskError, match="chain: a chain's steps are templates already"):
        prepare(ask(question=QUESTION, template="red-team", chain="red-team-first"), door(work))
    assert not (work / ".rune" / "council").exists()


# --------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("body", "key", "closest"),
    [
        ({"question": QUESTION, "questoin": "typo"}, "questoin", "question"),
        ({"question": QUESTION, "multi_rounds": {"max_rounds": 2}}, "multi_rounds", "multi_round"),
        (
            {"question": QUESTION, "multi_round": {"max_round": 2}},
            "multi_round.max_round",
            "max_rounds",
        ),
        ({"question": QUESTION, "artifact": {"nmae": "p", "text": "x"}}, "artifact.nmae", "name"),
        ({"question": QUESTION, "summon": [{"whom": "any"}]}, "summon.0.whom", "who"),
        ({"request": {"question": QUESTION, "budgett": {}}}, "request.budgett", "budget"),
    ],
)
def test_an_unknown_key_names_the_closest_valid_one(
    body: dict[str, Any], key: str, closest: str
) -> None:
    with pytest.raises(AskError) as caught:
        parse_ask(body)
    [problem] = caught.value.problems
    assert problem.key == key
    assert problem.message.endswith(f"(closest valid key: {closest!r})")
    # A door spells the key its own way; the words after it are the same everywhere.
    with pytest.raises(AskError, match=r"^--questoin: unknown key 'questoin'"):
        parse_ask({"question": QUESTION, "questoin": 1}, spell=lambda k: "--" + k)


def test_the_documented_flat_body_is_an_ask_and_the_nested_form_still_is(tmp_path: Path) -> None:
    work = project(tmp_path)
    flat = {
        "question": "Should we adopt a microservices architecture?",
        "multi_round": {"max_rounds": 2},
    }
    schema = ask_schema(trusted_caller=False)
    jsonschema.validate(flat, schema)
    req = prepare(parse_ask(flat), door(work, trusted_caller=False)).request
    assert req.deliberation is not None and req.deliberation.rounds.max_rounds == 2

    nested = {"request": {"question": QUESTION, "n": 4}, "mode": "critique"}
    jsonschema.validate(nested, schema)
    req = prepare(parse_ask(nested), door(work, trusted_caller=False)).request
    assert (req.question, req.n, req.mode) == (QUESTION, 4, "critique")
    with pytest.raises(AskError, match=r"request: give question .* or request, not both"):
        parse_ask({"question": QUESTION, "request": {"question": QUESTION}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"question": QUESTION, "multi_round": {"max_rounds": 11}}, schema)


RULES = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "minLength",
    "maxLength",
    "maxItems",
    "pattern",
    "enum",
)


def rules(node: dict[str, Any]) -> dict[str, Any]:
    """A field's constraints in a JSON Schema, wherever an Optional puts them."""
    return {k: part[k] for part in [node, *node.get("anyOf", [])] for k in RULES if k in part}


def test_the_bounds_of_every_key_are_the_contracts_own() -> None:
    contract = PerspectiveRequest.model_json_schema()
    ours = ask_schema()

    def model(node: dict[str, Any]) -> dict[str, Any]:
        refs = [part["$ref"] for part in [node, *node.get("anyOf", [])] if "$ref" in part]
        found: dict[str, Any] = contract["$defs"][refs[0].rsplit("/", 1)[-1]] if refs else node
        return found

    def in_contract(path: tuple[str, ...]) -> dict[str, Any]:
        node = contract
        for part in path:
            node = model(node)["properties"][part]
        return node

    checked = [key for key in REQUEST_PATHS if key not in ("id", "artifact", "multi_round")]
    for key in checked:
        assert rules(ours["properties"][key]) == rules(in_contract(REQUEST_PATHS[key])), key
    assert rules(ours["properties"]["timeout"]) == {"exclusiveMinimum": 0, "maximum": 3600}
    rounds = contract["$defs"]["RoundsOptions"]["properties"]
    multi = ours["$defs"]["MultiRound"]["properties"]
    assert multi.keys() == rounds.keys()
    for name, spec in rounds.items():
        assert rules(multi[name]) == rules(spec), name


# --------------------------------------------------------------------------- artifacts


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("../secret.txt", "is outside"),
        ("{tmp}/secret.txt", "is outside"),
        ("/etc/passwd", "is outside"),
        ("link.md", "is outside"),  # a symlink that leads out of the project
        ("missing.md", "no such file"),
        ("fifo", "not a regular file"),
        ("plan\x00.md", "NUL"),
    ],
)
def test_an_artifact_path_must_lead_to_a_file_inside_the_project(
    tmp_path: Path, given: str, why: str
) -> None:
    work = project(tmp_path)
    os.mkfifo(work / "fifo")
    name = given.format(tmp=tmp_path)
    with pytest.raises(AskError) as caught:
        prepare(ask(question=QUESTION, artifact=name), door(work))
    [problem] = caught.value.problems
    assert problem.key == "artifact.path" and why in problem.message
    # The nested form is held to the same rule, and said at its own key.
    nested = {"request": {"question": QUESTION, "artifact": {"path": name}}}
    with pytest.raises(AskError) as inner:
        prepare(parse_ask(nested), door(work))
    assert inner.value.problems[0].key == "request.artifact.path"
    assert why in inner.value.problems[0].message


def test_an_artifact_inside_is_read_from_the_file_that_was_checked(tmp_path: Path) -> None:
    work = project(tmp_path)
    (work / "docs").mkdir()
    (work / "docs" / "plan.md").write_text(PLAN, encoding="utf-8")
    req = prepare(ask(question=QUESTION, artifact="docs/../docs/plan.md"), door(work)).request
    assert req.artifact is not None
    assert (req.artifact.name, req.artifact.path) == ("plan.md", str(work / "docs" / "plan.md"))
    # A door that takes no paths still takes the text.
    text_only = door(work, artifact_root=None, name="this server")
    with pytest.raises(AskError, match="this server takes an artifact as text only"):
        prepare(ask(question=QUESTION, artifact="plan.md"), text_only)
    inline = parse_ask({"question": QUESTION, "artifact": {"name": "p.md", "text": PLAN}})
    assert prepare(inline, text_only).request.artifact.text == PLAN  # type: ignore[union-attr]


# --------------------------------------------------------------------------- who may ask what


def test_a_caller_who_is_not_the_operator_cannot_grant_consent_or_run_programs(
    tmp_path: Path,
) -> None:
    work = project(tmp_path)
    remote = door(work, trusted_caller=False, name="this server")
    for key, value in [
        ("yes", True),
        ("subagent_cmd", "sh -c 'cat ~/.ssh/id_rsa'"),
        ("orchestrator_cmd", "sh"),
        ("key_env", "AWS_SECRET_ACCESS_KEY"),
        ("subagent_endpoint", "http://127.0.0.1:9/v1"),
    ]:
        with pytest.raises(AskError) as caught:
            prepare(parse_ask({"question": QUESTION, key: value}), remote)
        assert caught.value.problems[0].key == key
        assert "only the operator of this server sets this" in str(caught.value)
    with pytest.raises(AskError, match=r"endpoints\.0: no endpoint named 'http://127.0.0.1:9/v1'"):
        prepare(ask(question=QUESTION, endpoints=["http://127.0.0.1:9/v1"]), remote)
    forged = {
        "request": {
            "question": QUESTION,
            "template": {
                "name": "security-review",
                "version": "1",
                "source": "builtin",
                "digest": "sha256:0",
            },
        }
    }
    with pytest.raises(AskError, match=r"request\.template: recorded by the council"):
        prepare(parse_ask(forged), remote)
    # The operator's own settings for the door still apply to every council it runs.
    operated = door(work, trusted_caller=False, defaults=AskDefaults(subagent_cmd="host-agent"))
    assert prepare(ask(question=QUESTION), operated).options.subagent_command == "host-agent"
    assert (
        ask_schema(trusted_caller=False)["properties"]
        .keys()
        .isdisjoint({"yes", "subagent_cmd", "orchestrator_cmd", "key_env"})
    )


def test_consent_is_decided_by_one_rule(tmp_path: Path) -> None:
    work = project(tmp_path)
    asked = prepare(ask(question=QUESTION, yes=True), door(work))
    assert asked.options.allow_external is True and not asked.consent_undecided
    declined = door(work, defaults=AskDefaults(yes=False))  # the user said no at a prompt
    assert prepare(ask(question=QUESTION), declined).options.allow_external is False
    nobody = prepare(ask(question=QUESTION), door(work))
    assert nobody.options.allow_external is None and nobody.consent_undecided
    standing = door(work, env=env_for(work, RUNE_COUNCIL_ALLOW_EXTERNAL="1"))
    said = prepare(ask(question=QUESTION), standing)
    assert said.options.allow_external is None and not said.consent_undecided
    assert nobody.with_consent(True).options.allow_external is True


def test_conflicting_or_bad_keys_are_one_clear_line_each(tmp_path: Path) -> None:
    work = project(tmp_path)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"question": "   "}, "question: question is blank"),
        ({"question": QUESTION, "id": "../escape"}, "id: run id '../escape' is not a safe file"),
        ({"question": QUESTION, "mode": "generate"}, "mode: NOT_IMPLEMENTED"),
        ({"question": QUESTION, "deliberation": "poll"}, "deliberation: must be one of rank,"),
        (
            {"question": QUESTION, "summon": ["claude@3"], "multi_round": {"max_rounds": 2}},
            "summon: summon 'claude' joins in round 3",
        ),
        (
            {"question": QUESTION, "subagent_cmd": "a", "subagent_endpoint": "nim"},
            "subagent_endpoint: give subagent_cmd or subagent_endpoint, not both",
        ),
        ({"question": QUESTION, "timeout": 0}, "timeout: Input should be greater than 0"),
    ]
    for body, message in cases:
        with pytest.raises(AskError) as caught:
            prepare(parse_ask(body), door(work))
        assert str(caught.value).startswith(message), (body, str(caught.value))
        assert "\n" not in str(caught.value)
