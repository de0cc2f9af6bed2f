"""`POST /v1/councils` takes the ask every door takes, against a real `rune council serve` on a
loopback port with fake CLIs as its voices: the documented flat body, the nested request,
their conflict, unknown keys, the voice cap's note, chains and the streams of their steps."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema

from rune_council.council.intake import Door, parse_ask, prepare
from tests.helpers import QUESTION
from tests.web.serving import Server, install_voices, serving, sse

# The platform's documented body, as its seed writes it.
DOCUMENTED = {
    "question": "Should we adopt a microservices architecture?",
    "multi_round": {"max_rounds": 2},
}


def problem_of(reply: httpx.Response) -> tuple[str, list[str]]:
    assert reply.status_code == 422, reply.text
    body = reply.json()
    return body["error"], [f["field"] for f in body["fields"]]


def openapi_body(server: Server) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body schema the OpenAPI document gives (its references resolvable) and the
    examples beside it."""
    spec = server.client.get("/openapi.json").json()
    body = spec["paths"]["/v1/councils"]["post"]["requestBody"]["content"]["application/json"]
    return {**body["schema"], "components": spec["components"]}, body["examples"]


def test_the_documented_flat_body_runs_and_the_nested_form_still_does(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        schema, examples = openapi_body(server)
        assert {"flat", "nested"} <= set(examples)
        door = Door(
            name="this server",
            rune_dir=tmp_path / ".rune",
            artifact_root=None,
            trusted_caller=False,
            env={"PATH": os.defpath, "HOME": str(tmp_path)},
        )
        for example in examples.values():
            jsonschema.validate(example["value"], schema)
            prepare(parse_ask(example["value"]), door)  # and the server would run it
        jsonschema.validate({**DOCUMENTED, "id": "flat"}, schema)
        reply = server.post({**DOCUMENTED, "id": "flat"})
        assert reply.status_code == 202, reply.text
        assert reply.headers["location"] == "/v1/councils/flat"
        doc = server.wait_status("flat", {"complete", "no_verdict", "failed"})
        assert doc["question"] == DOCUMENTED["question"]
        assert doc["request"]["deliberation"]["rounds"]["max_rounds"] == 2

        nested = {"request": {"id": "nested", "question": QUESTION, "n": 3}, "mode": "critique"}
        jsonschema.validate(nested, schema)
        assert server.post(nested).status_code == 202
        doc = server.wait_status("nested", {"complete", "no_verdict", "failed"})
        assert (doc["request"]["n"], doc["request"]["mode"]) == (3, "critique")


def test_a_question_and_a_request_both_is_a_422_naming_the_conflict(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        error, fields = problem_of(
            server.post({"question": QUESTION, "request": {"question": QUESTION}})
        )
        assert error.startswith("request: give question") and "not both" in error
        assert fields == ["request"]
        assert not server.council_dir.exists()


def test_bad_keys_are_422s_at_the_key_naming_the_closest_valid_one(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        cases = [
            ({**DOCUMENTED, "multi_rounds": {"max_rounds": 2}}, "multi_rounds", "multi_round"),
            (
                {"question": QUESTION, "multi_round": {"max_round": 2}},
                "multi_round.max_round",
                None,
            ),
            (
                {"request": {"question": QUESTION, "artifact": {"nmae": "p", "text": "x"}}},
                "request.artifact.nmae",
                "name",
            ),
        ]
        for body, field, closest in cases:
            error, fields = problem_of(server.post(body))
            assert fields == [field] and error.startswith(f"{field}: unknown key"), error
            if closest is not None:
                assert error.endswith(f"(closest valid key: {closest!r})"), error
        error, fields = problem_of(server.post({"question": QUESTION, "yes": True}))
        assert fields == ["yes"] and "only the operator of this server" in error


def test_a_missing_artifact_is_named_at_artifact_even_in_the_nested_form(tmp_path: Path) -> None:
    with serving(tmp_path, "--yes") as server:
        bare = {"request": {"id": "bare", "question": QUESTION}, "template": "security-review"}
        error, fields = problem_of(server.post(bare))
        assert fields == ["artifact"] and error.startswith("artifact: template 'security-review'")
        both = {
            "request": {"question": QUESTION, "artifact": {"name": "p", "path": "p", "text": "x"}}
        }
        error, fields = problem_of(server.post(both))
        assert fields == ["request.artifact"] and "exactly one of 'text' or 'path'" in error


def test_n_above_the_cap_is_noted_in_the_reply_as_in_the_run_file(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin")
    with serving(tmp_path, "--yes") as server:
        reply = server.post({"question": QUESTION, "n": 9, "id": "nine"})
        assert reply.status_code == 202, reply.text
        # The CLI's words (stages.capacity), before the run and in the run file.
        assert reply.json()["notes"] == ["n=9 requested; capped at 5 voices"]
        doc = server.wait_status("nine", {"complete", "failed"})
        assert "n=9 requested; capped at 5 voices" in doc["notes"]
        assert doc["request"]["n"] == 9 and len(doc["voices"]) <= 5


def wait_chain(server: Server, chain_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    view: dict[str, Any] = {}
    while time.monotonic() < deadline:
        view = server.client.get(f"/v1/chains/{chain_id}").json()
        if all(r["status"] not in ("queued", "running") for r in view["runs"]):
            return view
        time.sleep(0.1)
    raise AssertionError(f"chain {chain_id} did not end: {view}")


def test_a_chain_is_one_post_whose_location_lists_its_runs_and_streams_each(
    tmp_path: Path,
) -> None:
    install_voices(tmp_path / "bin", sleeps=(0.4, 0.6, 0.8))
    with serving(tmp_path, "--yes") as server:
        reply = server.post({"question": QUESTION, "chain": "red-team-first", "id": "ch"})
        assert reply.status_code == 202, reply.text
        accepted = reply.json()
        assert reply.headers["location"] == "/v1/chains/ch" == accepted["location"]
        assert (accepted["id"], accepted["chain"]) == ("ch", "red-team-first")
        assert [(r["template"], r["id"]) for r in accepted["runs"]] == [
            ("red-team", "ch.red-team"),
            ("standard", "ch"),
        ]
        # The last step has no run file while the red team runs: its stream waits for it.
        assert server.client.get("/v1/chains/ch").json()["runs"][1]["status"] == "queued"
        last = sse(server.client, "ch", timeout=120)
        assert last[0][0] == "status" and last[0][2] == {"status": "queued", "id": "ch"}
        assert last[-1][0] == "end" and last[-1][2]["status"] == "complete"
        seqs = [int(f[1]) for f in last if f[0] == "transition"]
        assert seqs == [e["seq"] for e in server.run_file("ch")["events"]]
        first = sse(server.client, "ch.red-team")
        assert first[-1][0] == "end" and first[-1][2]["status"] == "complete"

        view = wait_chain(server, "ch")
        assert [(r["id"], r["status"]) for r in view["runs"]] == [
            ("ch.red-team", "complete"),
            ("ch", "complete"),
        ]
        assert view["runs"][1]["events"] == "/v1/councils/ch/events"
        final = server.run_file("ch")
        assert final["request"]["chain"]["step"] == 2
        assert final["request"]["deliberation"]["chained_from"] == "ch.red-team"
        # Any one id of the chain is taken now.
        again = server.post({"question": QUESTION, "id": "ch.red-team"})
        assert again.status_code == 409


def test_a_chain_cancelled_in_its_first_step_ends_the_later_streams(tmp_path: Path) -> None:
    install_voices(tmp_path / "bin", sleeps=(60, 60, 60))
    with serving(tmp_path, "--yes") as server:
        assert (
            server.post({"question": QUESTION, "chain": "red-team-first", "id": "cut"}).status_code
            == 202
        )
        with server.client.stream("GET", "/v1/councils/cut/events", timeout=60) as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: status"
            cancel = server.client.post("/v1/councils/cut.red-team/cancel")
            assert cancel.status_code == 200 and cancel.json()["status"] == "cancelled"
            rest = "\n".join(lines)
        assert "event: end" in rest and '"status":"not-run"' in rest
        view = server.client.get("/v1/chains/cut").json()
        assert [(r["id"], r["status"]) for r in view["runs"]] == [
            ("cut.red-team", "cancelled"),
            ("cut", "not-run"),
        ]
        assert server.client.get("/v1/councils/cut/events").status_code == 404
