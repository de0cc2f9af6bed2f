"""Help that teaches a newcomer: the council's options where they look first, errors in the
command line's own words with only values that work, suggestions that are real near-misses,
hints that never repeat what was already tried, a next step when nothing is installed, a
README first example that runs as pasted, and every command's help laid out alike."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers import bare_machine_env, run_rune

ROOT = Path(__file__).resolve().parents[1]
Q = "Should we shard the orders table?"


def env_of(tmp: Path) -> dict[str, str]:
    # No AI CLI on PATH, nothing configured: a newcomer's fresh machine.
    return {**bare_machine_env(tmp), "COLUMNS": "100"}


def rune(tmp: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_rune(cwd or tmp, env_of(tmp), *args)


def test_council_help_shows_the_options_of_a_question(tmp_path: Path) -> None:
    shown = rune(tmp_path, "council", "--help")
    assert shown.returncode == 0, shown.stderr
    for option in ("--mode", "--n", "--artifact", "--yes", "--endpoint", "--deliberate"):
        assert re.search(rf"^\s+(-\w, )?{option} ", shown.stdout, re.M), option
    # The first lines say how a question is asked, and the subcommands are still listed.
    first = shown.stdout.splitlines()[0]
    assert re.fullmatch(r'Usage: .*council "<question>" \[OPTIONS\]', first), first
    assert "detect" in shown.stdout and "doctor" in shown.stdout


@pytest.mark.parametrize(
    ("flag", "value", "valid", "never"),
    [
        ("--mode", "bogus", "critique, review, judge", "generate"),
        ("--deliberate", "bogus", "rank, red_team, vote", None),
        ("--council-type", "bogus", "standard, red_team", None),
        ("--on-divergence", "bogus", "warn, halt, continue", None),
    ],
)
def test_a_bad_value_names_the_flag_and_only_the_values_that_work(
    tmp_path: Path, flag: str, value: str, valid: str, never: str | None
) -> None:
    out = rune(tmp_path, "council", Q, flag, value)
    assert out.returncode == 2
    line = out.stderr.strip()
    assert line == f"rune council: {flag}: must be one of {valid} (got {value!r})", line
    assert "PerspectiveRequest" not in line and "Input should be" not in line
    if never is not None:
        assert never not in line
    if flag == "--mode":
        # Every value offered is accepted: the council runs (no voice here, so exit 1).
        for offered in valid.split(", "):
            ran = rune(tmp_path, "council", Q, flag, offered, "--id", f"m-{offered}")
            assert ran.returncode == 1, (offered, ran.stderr)


@pytest.mark.parametrize(
    ("typed", "offered"),
    [("--bogus", None), ("--deep", None), ("--mdoe", "--mode"), ("--round", "--rounds")],
)
def test_an_unknown_option_is_offered_only_a_close_match(
    tmp_path: Path, typed: str, offered: str | None
) -> None:
    out = rune(tmp_path, "council", Q, typed)
    assert out.returncode == 2
    last = out.stderr.strip().splitlines()[-1]
    assert f"No such option: {typed}" in last
    if offered is None:
        assert "Possible options" not in last and "Did you mean" not in last, last
    else:
        assert last.endswith(f"(Possible options: {offered})"), last


def test_the_no_voice_hint_suggests_only_what_was_not_given(tmp_path: Path) -> None:
    bare = rune(tmp_path, "council", Q, "--id", "h1")
    assert bare.returncode == 1
    assert "--yes" in bare.stderr and "--endpoint" in bare.stderr

    tried = rune(tmp_path, "council", Q, "--id", "h2", "--yes")
    assert tried.returncode == 1
    hint = [line for line in tried.stderr.splitlines() if "no voice" in line]
    assert hint, tried.stderr
    assert "--yes" not in hint[0] and "--subagent-cmd" in hint[0], hint[0]


def test_doctor_with_nothing_installed_says_what_to_do_next(tmp_path: Path) -> None:
    out = rune(tmp_path, "council", "doctor")
    assert out.returncode == 1
    steps = out.stdout.split("\nnext:\n", 1)
    assert len(steps) == 2, out.stdout
    assert "install one of the AI CLIs" in steps[1] and "claude" in steps[1]
    assert "--endpoint" in steps[1]
    assert "rune council demo" in steps[1]


def _readme_first_example() -> list[str]:
    text = (ROOT / "README.md").read_text()
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if line.startswith("rune council ") and "--artifact" in line:
                return shlex.split(line)
    raise AssertionError("the README shows no council with an artifact")


def test_the_readme_first_example_runs_as_pasted(tmp_path: Path) -> None:
    words = _readme_first_example()
    named = words[words.index("--artifact") + 1]
    assert (ROOT / named).is_file(), f"the README names {named}, which the repository lacks"
    # From a checkout, as pasted: the artifact is read and the council runs (no voice here,
    # so no verdict: exit 1, never the exit 2 of a file that is not there).
    out = rune(tmp_path, *words[1:], "--rune-dir", str(tmp_path / ".rune"), cwd=ROOT)
    assert out.returncode == 1, out.stderr
    assert "cannot read artifact" not in out.stderr


@pytest.mark.parametrize("door", ["serve", "mcp"])
def test_serve_and_mcp_help_look_like_every_other_command(tmp_path: Path, door: str) -> None:
    shown = rune(tmp_path, "council", door, "--help")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    first = text.splitlines()[0]
    assert re.fullmatch(rf"Usage: .*council {door} \[OPTIONS\]", first), first
    assert "\nOptions:\n" in text and "options:" not in text
    assert re.search(r"^  --help\s+Show this message and exit\.$", text, re.M), text
    assert re.search(r"^  --rune-dir <path>\s+Where \.rune files go", text, re.M), text
    assert re.search(r"^  -y, --yes\s+Allow councils", text, re.M), text
