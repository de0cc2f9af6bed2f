"""Runtimes as plug-ins: one module per built-in CLI, and CLIs added by installed packages.

The plug-in tests install a real distribution: a ``*.dist-info`` directory with an
``entry_points.txt`` on ``sys.path`` (or on ``PYTHONPATH`` for a fresh ``rune`` process),
which ``importlib.metadata`` finds exactly as it finds a pip-installed package.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rune_council import RuntimeConfigError
from rune_council.runtimes import clis
from rune_council.runtimes.plugins import GROUP, plugin_adapters
from rune_council.testing import ScriptedCouncil
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, ROLLBACK, UNDO, answer

Q = "Should we shard the orders table?"

ADAPTER_MODULE = """
from rune_council.runtimes.base import EnvPolicy
from rune_council.runtimes.cli_adapter import CliAdapter
from rune_council.runtimes.parsers import parse_plain_text

ADAPTER = CliAdapter(
    name={name!r},
    executable="mistral-chat",
    model_family="mistral",
    family_confidence="confirmed",
    args=("--headless",),
    env=EnvPolicy(prefixes=("MISTRAL_",)),
    parse=parse_plain_text,
)
"""


def install_distribution(site: Path, module: str, entry_points: str, code: str) -> None:
    """What pip leaves behind for a one-module package: the module and its dist-info."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{entry_points}\n", encoding="utf-8")


def mistral_chat(bin_dir: Path, reply: str) -> None:
    """A CLI nobody built in: answers on stdout what it is given on stdin, if called right."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "mistral-chat"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "if sys.argv[1:] == ['--version']: print('mistral-chat 2.4.0'); sys.exit(0)\n"
        "assert sys.argv[1:] == ['--headless'], sys.argv\n"
        "assert 'orders table' in sys.stdin.read()\n"
        f"print({reply!r})\n",
        encoding="utf-8",
    )
    script.chmod(0o755)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    return path


def test_every_built_in_cli_is_one_module_holding_flags_parser_and_family() -> None:
    modules = {m.ADAPTER.name: m for m in (getattr(clis, n) for n in clis.BUILTIN)}
    assert set(modules) == set(clis.BUILTIN)
    for name, module in modules.items():
        adapter = module.ADAPTER
        assert module.__name__ == f"rune_council.runtimes.clis.{name}"
        # The parser the adapter runs is defined in (or imported by) the CLI's own module.
        assert adapter.parse.__module__ in (module.__name__, "rune_council.runtimes.parsers")
        if adapter.backend is not None:
            assert adapter.backend.__module__ == module.__name__


def test_an_installed_package_adds_a_cli_that_joins_the_council(tmp_path: Path, site: Path) -> None:
    install_distribution(
        site,
        "council_mistral_a",
        "mistral = council_mistral_a:ADAPTER",
        ADAPTER_MODULE.format(name="mistral"),
    )
    mistral_chat(tmp_path / "bin", answer(Q, "NO", [UNDO]))
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    assert set(plugin_adapters()) == {"mistral"}
    env = {
        "PATH": path_with(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    result = ScriptedCouncil(tmp_path / ".rune").convene(
        {"id": "plug", "question": Q, "n": 2, "artifact": {"name": "plan.md", "text": PLAN}},
        runtimes=None,  # detect, as a caller without scripted voices would
        env=env,
    )
    detected = {d.runtime: d for d in result.runtime_report.detected}
    assert (detected["mistral"].status, detected["mistral"].version) == ("available", "2.4.0")
    voice = next(v for v in result.voices if v.runtime == "mistral")
    assert voice.status == "complete" and voice.model_family == "mistral"
    assert result.decorrelation == "MULTI_FAMILY"
    assert result.distinct_families == ["anthropic", "mistral"]


def test_a_fresh_rune_process_finds_the_plug_in_too(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_distribution(
        site,
        "council_mistral_b",
        "mistral = council_mistral_b:ADAPTER",
        ADAPTER_MODULE.format(name="mistral"),
    )
    mistral_chat(tmp_path / "bin", "unused")
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "detect", "--json"],
        cwd=tmp_path,
        env={
            "LANG": "C.UTF-8",
            "PATH": path_with(tmp_path / "bin"),
            "HOME": str(tmp_path),
            "RUNE_COUNCIL_LOGIN_SHELL": "0",
            "PYTHONPATH": str(site),
        },
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    by = {d["runtime"]: d for d in json.loads(out.stdout)["detected"]}
    assert by["mistral"]["status"] == "available"
    assert by["mistral"]["model_family"] == "mistral"


def test_a_factory_may_add_several_clis(site: Path) -> None:
    install_distribution(
        site,
        "council_pair",
        "pair = council_pair:adapters",
        ADAPTER_MODULE.format(name="one")
        + "\nfrom dataclasses import replace\n"
        + "def adapters():\n    return [ADAPTER, replace(ADAPTER, name='two')]\n",
    )
    assert sorted(plugin_adapters()) == ["one", "two"]


@pytest.mark.parametrize(
    ("module", "code", "message"),
    [
        ("council_broken", "raise ImportError('no module named mistralai')\n", "cannot be loaded"),
        ("council_wrong", "ADAPTER = 'mistral'\n", "not a CliAdapter"),
        ("council_claude", ADAPTER_MODULE.format(name="claude"), "built-in CLI"),
        ("council_badname", ADAPTER_MODULE.format(name="../evil"), "runtime name"),
    ],
)
def test_a_faulty_plug_in_is_one_clear_error_naming_it(
    site: Path, module: str, code: str, message: str
) -> None:
    install_distribution(site, module, f"x = {module}:ADAPTER", code)
    with pytest.raises(RuntimeConfigError) as caught:
        plugin_adapters()
    text = str(caught.value)
    assert message in text and module in text and "\n" not in text


def test_the_users_own_definition_wins_over_a_plug_in(tmp_path: Path, site: Path) -> None:
    from rune_council.config import load_config
    from rune_council.discovery.assembly import all_adapters

    install_distribution(
        site,
        "council_mistral_c",
        "mistral = council_mistral_c:ADAPTER",
        ADAPTER_MODULE.format(name="mistral"),
    )
    user = tmp_path / "xdg" / "rune-council"
    user.mkdir(parents=True)
    (user / "council.toml").write_text(
        '[runtimes.mistral]\ncommand = "my-mistral"\nfamily = "meta"\n', encoding="utf-8"
    )
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    adapters = all_adapters(load_config(tmp_path / ".rune", env))
    assert adapters["mistral"].executable == "my-mistral"
    assert adapters["claude"] is clis.BUILTIN["claude"]
