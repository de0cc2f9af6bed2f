"""One family classifier for CLIs, wrapper backends and endpoint model ids."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from rune_council.core.families import KNOWN_FAMILIES, classify_model
from rune_council.runtimes.clis import BUILTIN

CATALOGUE = Path(__file__).parent / "fixtures" / "model_families.csv"
ROWS = list(csv.DictReader(CATALOGUE.open(encoding="utf-8")))


def test_the_catalogue_holds_enough_real_ids_from_each_source() -> None:
    assert len({r["model_id"] for r in ROWS}) >= 60
    by_source = {r["catalogue"] for r in ROWS}
    assert by_source == {"nim", "openrouter", "ollama"}
    assert all(r["why"].strip() for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["model_id"] for r in ROWS])
def test_real_catalogue_ids(row: dict[str, str]) -> None:
    reading = classify_model(row["model_id"], named_by=row["named_by"])  # type: ignore[arg-type]
    assert reading.family == row["family"], reading.why
    assert reading.confidence == ("unknown" if row["family"] == "unknown" else "confirmed")
    assert reading.why


@pytest.mark.parametrize(
    ("model", "family"),
    [
        # The three ids the two former classifiers disagreed on.
        ("nvidia/devstral-small-2505", "mistral"),
        ("nvidia/mathstral-7b", "mistral"),
        ("openrouter/grok-3", "xai"),
    ],
)
def test_endpoint_ids_and_client_configs_agree(model: str, family: str) -> None:
    assert classify_model(model, named_by="endpoint").family == family
    assert classify_model(model, named_by="client").family == family


def test_the_host_never_decides_the_family() -> None:
    # One Mistral model under three hosts' names is one family.
    ids = [
        "mistralai/mistral-7b-instruct-v0.3",
        "nvidia_nim/mistralai/mistral-7b-instruct-v0.3",
        "openrouter/mistralai/mistral-7b-instruct",
    ]
    assert {classify_model(i, named_by="client").family for i in ids} == {"mistral"}
    assert classify_model(ids[0]).family == "mistral"


def test_every_built_in_cli_speaks_for_a_family_the_classifier_knows() -> None:
    # A CLI voice and an endpoint voice of one maker must collide in the family count.
    for adapter in BUILTIN.values():
        if adapter.family_confidence == "confirmed":
            assert adapter.model_family in KNOWN_FAMILIES, adapter.name
