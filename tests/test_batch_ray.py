"""Batches as Ray tasks on a small local cluster (2 CPUs): same rows as a local batch, run
files streamed back to the driver, per-runtime caps as Ray resources."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from rune_council.batch import Batch, read_rows, run_batch
from rune_council.runs import load
from rune_council.runtimes.limits import Limits
from rune_council.verify import verify
from tests.helpers import run_rune
from tests.test_batch import options, questions, voices, write_items
from tests.test_batch_cli import env, fakes, items, rune

pytestmark = pytest.mark.timeout(600)

CAPPED = "anthropic-cli"
RAY_FLAGS = ("--ray", "-c", "3", "--json")


def test_cli_ray_batch_runs_the_clis_on_workers_and_a_local_rerun_keeps_it(
    tmp_path: Path,
) -> None:
    # First in the file: the command starts (and stops) its own local cluster before the
    # module's cluster below exists.
    fakes(tmp_path)
    path = items(tmp_path, 3)
    out = run_rune(tmp_path, env(tmp_path), "council", "batch", str(path), *RAY_FLAGS, timeout=300)
    assert out.returncode == 0, out.stderr
    printed = [json.loads(line) for line in out.stdout.splitlines()]
    assert sorted(r["id"] for r in printed) == ["b0", "b1", "b2"]
    for row in printed:
        assert row["status"] == "complete" and row["stamp"] == "MULTI_FAMILY"
        result = load(Path(row["run_file"]))
        assert {v.runtime for v in result.voices} == {"claude", "codex", "gemini"}
        assert result.run_file == row["run_file"]
    again = rune(tmp_path, str(path), "--json")
    assert again.returncode == 0, again.stderr
    assert all(json.loads(line)["resumed"] for line in again.stdout.splitlines())


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(
        num_cpus=2,
        resources={f"rune:{CAPPED}": 1.0},
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    try:
        yield
    finally:
        ray.shutdown()


def comparable(rows: list[Any]) -> dict[str | None, tuple[Any, ...]]:
    return {
        r.id if r.id is not None else f"line {r.line}": (
            r.line,
            r.status,
            r.stamp,
            r.consensus,
            r.needs_decision,
            r.voices_valid,
            r.error,
        )
        for r in rows
    }


def test_ray_rows_match_the_local_batch_item_for_item(tmp_path: Path, cluster: None) -> None:
    rows = [*questions(6), "{broken", {"id": "t1", "question": "Inline?", "artifact_text": "x"}]
    for side in ("local", "ray"):
        (tmp_path / side).mkdir()
        write_items(tmp_path / side / "items.jsonl", rows)
    asyncio.run(
        run_batch(tmp_path / "local" / "items.jsonl", options(tmp_path / "local", voices()))
    )
    ray_opts = dataclasses.replace(options(tmp_path / "ray", voices()), ray=True, concurrency=3)
    tally = asyncio.run(run_batch(tmp_path / "ray" / "items.jsonl", ray_opts))
    local = read_rows(tmp_path / "local" / "results.jsonl")
    remote = read_rows(tmp_path / "ray" / "results.jsonl")
    assert comparable(remote) == comparable(local)
    assert tally.by_status["complete"] == 7 and tally.by_status["invalid"] == 1
    for row in remote:
        if row.status != "complete":
            continue
        path = Path(row.run_file or "")
        assert path.parent == tmp_path / "ray" / ".rune" / "council"  # written by the driver
        result = load(path)
        assert result.run_file == str(path) and verify(result).reproduced
        if row.id == "q0":
            # The artifact was read by the driver and shipped with the task.
            assert (result.artifact_text or "").startswith("1. Drain the old nodes.")


def test_a_capped_runtime_is_a_ray_resource_councils_wait_for(
    tmp_path: Path, cluster: None
) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(4))
    base = options(tmp_path, voices(delay_s=0.3))
    limits = Limits({CAPPED: 1})
    batch = Batch(items, dataclasses.replace(base, limits=limits, ray=True, concurrency=4))
    asyncio.run(batch.run())
    spans = []
    for row in read_rows(tmp_path / "results.jsonl"):
        doc = json.loads(Path(row.run_file or "").read_text())
        spans.append((doc["started_at"], doc["finished_at"]))
    spans.sort()
    # One unit of rune:anthropic-cli on the cluster: the councils ran one after another.
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans


def test_a_rerun_on_ray_keeps_what_finished(tmp_path: Path, cluster: None) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(3))
    opts = dataclasses.replace(options(tmp_path, voices()), ray=True)
    asyncio.run(run_batch(items, opts))
    tally = asyncio.run(run_batch(items, opts))
    assert tally.resumed == 3 and tally.all_complete


def test_a_chain_item_on_ray_sends_back_every_step(tmp_path: Path, cluster: None) -> None:
    line = {"id": "ch", "question": "Should it ship?", "chain": "red-team-first"}
    items = write_items(tmp_path / "items.jsonl", [line])
    opts = dataclasses.replace(options(tmp_path, voices()), ray=True)
    asyncio.run(run_batch(items, opts))
    [row] = read_rows(tmp_path / "results.jsonl")
    assert row.status == "complete", row
    council = tmp_path / ".rune" / "council"
    first, last = load(council / "run-ch.red-team.json"), load(council / "run-ch.json")
    assert first.request.chain is not None and first.request.chain.step == 1
    assert last.request.chain is not None and last.request.chain.step == 2
    assert first.run_file == str(council / "run-ch.red-team.json")
    tally = asyncio.run(run_batch(items, opts))
    assert tally.resumed == 1
