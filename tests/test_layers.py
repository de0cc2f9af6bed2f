"""Imports only point down: the layers of DESIGN.md, read from the source with ``ast``.

Every import counts, including those inside functions and under ``TYPE_CHECKING``: a lazy
import is still a dependency. To add a module, put its dotted name (relative to
``rune_council``) in ``LAYERS`` below; a module the map does not place fails the test.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "rune_council"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# Bottom to top. A module belongs to the entry with the longest matching prefix, so
# ``runtimes.base`` (the environment rules) is core while the rest of ``runtimes`` is the edge.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core",
        (
            # rune_council/core/: the contract, errors, text, paths, shapes, answer parsing,
            # prompts, schemas, bounded JSON/TOML, safe text, redaction, user regexes, the
            # Runtime protocol and model families: what every other layer builds on.
            "core",
            "runtimes.base",  # the environment rules every runtime shares
            # an eval's statistics, pure: its report and the stats over the run history
            # (analytics) compute the same figures with the same functions
            "evaluation.stats",
        ),
    ),
    (
        # Ordered too: each part may import only the parts listed before it, so the edge's
        # fifteen-odd parts cannot grow a tangle that the layer rule alone would let through.
        "I/O edge",
        (
            "files",
            "safefile",  # reading files someone else may have planted
            "trust_store",  # the user's record of trusted project files
            "templates",  # the shipped council setups, read as data
            "config",
            "consent",
            "recorder",
            "runlock",  # one writer per run id
            "runtimes",
            "run_index",  # the cache of what was read from each run file (list, stats)
            "runs",
            "analytics",  # statistics over the run files (rune council stats)
            "watch",
            "endpoints",
            "discovery",
            "hosts",  # `rune council install`: files and config entries in agent hosts
            "review.diff",  # a change read through git itself, or a unified diff, as data
            "evaluation.humaneval",  # seeded-flaw items, each checked by running its tests
        ),
    ),
    ("stages", ("stages", "evaluation")),  # evaluation: an eval's scoring and statistics, pure
    ("deliberation", ("deliberation",)),
    (
        "council",
        (
            "council",
            "council.intake",  # the one typed ask every door parses into
            "council.eval_items",  # an eval's items as reviews, and its run files as records
            "verify",  # re-runs the council's own judging on a run file
            "render",  # the text form of a result, shared by every door
            "demo",  # the simulated voices of ``rune council demo``
            "review",  # a change as one located artifact; its findings, formats and CI gate
        ),
    ),
    ("doors", ("cli", "mcp_server", "serve", "batch", "testing", "review.action")),
    # ``rune_council/__init__.py`` (names loaded on first use) and the pytest entry point that
    # hands callers the testing kit's fixture.
    ("public face", ("", "pytest_plugin")),
)

# Layers that may import only these (besides themselves), not everything below them.
ONLY: dict[str, frozenset[str]] = {
    # Stages are pure: contract models in, contract models out; no runtime, file or council.
    "stages": frozenset({"core"}),
}

# The door packages stand side by side: none imports another, except that the command line
# is how a user starts the others (``rune council serve``).
DOORS = "doors"
LAUNCHER = "cli"

# (importer, imported) -> why it is allowed for now. Keep this empty; an entry that no
# longer matches an import fails the test so the list only shrinks.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}

RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}

# Layers whose parts are ordered as listed: a part may import only the parts before it.
ORDERED = frozenset({"I/O edge"})
ORDER = {unit: i for layer, units in LAYERS if layer in ORDERED for i, unit in enumerate(units)}


@dataclass(frozen=True)
class Place:
    unit: str  # the map entry that matched, e.g. "runtimes" or "runtimes.base"
    layer: str


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        path = self.importer.replace(".", "/")
        return f"{PACKAGE}/{path}.py:{self.line} imports {PACKAGE}.{self.imported}"


def place(module: str) -> Place | None:
    """The layer of a module given relative to the package ("" is the package itself)."""
    best: tuple[str, str] | None = None
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            # "" is the package's own __init__ only, not a prefix of everything.
            matches = module == prefix or (prefix != "" and module.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > len(best[0])):
                best = (prefix, layer)
    return Place(*best) if best is not None else None


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name relative to it."""
    found: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


LAZY_MAP = "_HOME"  # the name every lazy loader in the package keeps its map under


def _is_import_module(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id == "import_module"


def _resolved(name: str, package: str) -> str | None:
    """A literal module name as a dotted name relative to the package, or None when it is
    outside it."""
    if name.startswith("."):
        level = len(name) - len(name.lstrip("."))
        parts = package.split(".") if package else []
        base = parts[: len(parts) - (level - 1)] if level > 1 else parts
        return ".".join([*base, *filter(None, [name[level:]])])
    if name == PACKAGE or name.startswith(PACKAGE + "."):
        return name[len(PACKAGE) + 1 :]
    return None


def imports_of(module: str, source: str, is_package: bool, known: set[str]) -> Iterator[Import]:
    """Every import of a package module in ``source``, wherever it sits in the file."""
    here = module.split(".") if module else []
    if not is_package:
        here = here[:-1]
    package = ".".join(here)
    for node in ast.walk(ast.parse(source)):
        # ``importlib.import_module("...")`` with a literal name, and a package's lazy loader
        # (``_HOME = {"Name": "module"}``, resolved by ``import_module`` on first use): an
        # import by another route is still a dependency.
        if isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                target = _resolved(first.value, package)
                if target is not None:
                    yield Import(module, target, node.lineno)
        lazy_map = (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Dict)
            and any(isinstance(t, ast.Name) and t.id == LAZY_MAP for t in node.targets)
        )
        if lazy_map and isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for value in node.value.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    dotted = ".".join(filter(None, [package, value.value]))
                    yield Import(module, dotted, value.lineno)
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    yield Import(module, alias.name[len(PACKAGE) + 1 :], node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                target = node.module[len(PACKAGE) + 1 :]
            else:
                continue
            for alias in node.names:
                # ``from . import cli`` imports the submodule, not the package.
                sub = f"{target}.{alias.name}" if target else alias.name
                yield Import(module, sub if sub in known else target, node.lineno)


def problem(imp: Import) -> str | None:
    """Why an import breaks the layering, or None when it points down (or stays inside)."""
    src, dst = place(imp.importer), place(imp.imported)
    if src is None or dst is None:
        return None  # reported by the test that every module is placed
    if src.unit == dst.unit:
        return None
    if src.layer == dst.layer:
        if src.layer == DOORS and src.unit != LAUNCHER:
            return f"{imp}: the doors stand side by side ({src.unit} must not use {dst.unit})"
        if src.layer in ORDERED and ORDER[dst.unit] > ORDER[src.unit]:
            return (
                f"{imp}: points up inside the {src.layer} ({src.unit} comes before "
                f"{dst.unit} in its order)"
            )
        return None  # peers in one layer; cycles between them are checked separately
    allowed = ONLY.get(src.layer)
    if allowed is not None and dst.layer not in allowed:
        only = ", ".join(sorted(allowed))
        return f"{imp}: {src.layer} may import only {only}, not {dst.layer} ({dst.unit})"
    if RANK[dst.layer] > RANK[src.layer]:
        return f"{imp}: points up from {src.layer} ({src.unit}) to {dst.layer} ({dst.unit})"
    return None


def all_imports() -> list[Import]:
    found = modules()
    known = set(found)
    out: list[Import] = []
    for module, path in found.items():
        source = path.read_text(encoding="utf-8")
        out += imports_of(module, source, path.name == "__init__.py", known)
    return out


def unit_cycles(imports: list[Import]) -> list[list[str]]:
    """Cycles between different units of one layer (each unit's own modules may interlock)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        src, dst = place(imp.importer), place(imp.imported)
        if src and dst and src.unit != dst.unit and src.layer == dst.layer:
            graph.setdefault(src.unit, set()).add(dst.unit)
    cycles: list[list[str]] = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start and min(trail) == start:
                    cycles.append([*trail, start])
                elif nxt not in trail:
                    stack.append((nxt, [*trail, nxt]))
    return cycles


def test_every_module_has_a_place_in_the_layers() -> None:
    unplaced = [m or PACKAGE for m in modules() if place(m) is None]
    assert not unplaced, (
        f"modules with no layer: {', '.join(unplaced)} — add each to LAYERS in "
        "tests/test_layers.py (see DESIGN.md 'Layers')"
    )


def test_imports_only_point_down() -> None:
    imports = all_imports()
    broken = []
    for imp in imports:
        why = problem(imp)
        if why is not None and (imp.importer, imp.imported) not in KNOWN_EXCEPTIONS:
            broken.append(why)
    assert not broken, "imports against the layers:\n" + "\n".join(sorted(set(broken)))


def test_no_two_parts_of_one_layer_need_each_other() -> None:
    cycles = unit_cycles(all_imports())
    assert not cycles, "import cycles inside a layer:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_known_exceptions_still_exist() -> None:
    actual = {(i.importer, i.imported) for i in all_imports() if problem(i)}
    stale = sorted(set(KNOWN_EXCEPTIONS) - actual)
    assert not stale, f"fixed, so remove from KNOWN_EXCEPTIONS: {stale}"


# --------------------------------------------------------------------------- the checker itself


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        # A stage reaching the run-file recorder, even lazily inside a function.
        (
            "stages.gate",
            "def f():\n    from ..recorder import RunRecorder\n",
            "rune_council/stages/gate.py:2 imports rune_council.recorder: stages may import "
            "only core, not I/O edge (recorder)",
        ),
        # The edge reaching up into the council, under TYPE_CHECKING.
        (
            "runtimes.http",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from rune_council.council import CouncilOptions\n",
            "rune_council/runtimes/http.py:3 imports rune_council.council: points up from "
            "I/O edge (runtimes) to council (council)",
        ),
        # One part of the I/O edge reaching a part listed after it.
        (
            "runtimes.cli",
            "from ..hosts import installer\n",
            "rune_council/runtimes/cli.py:1 imports rune_council.hosts.installer: points up inside "
            "the I/O edge (runtimes comes before hosts in its order)",
        ),
        # An import by name through importlib is still an import.
        (
            "stages.gate",
            "import importlib\nmod = importlib.import_module('rune_council.recorder')\n",
            "rune_council/stages/gate.py:2 imports rune_council.recorder: stages may import "
            "only core, not I/O edge (recorder)",
        ),
        # One door using another.
        (
            "mcp_server.server",
            "from ..cli import app\n",
            "rune_council/mcp_server/server.py:1 imports rune_council.cli.app: the doors stand "
            "side by side (mcp_server must not use cli)",
        ),
    ],
)
def test_the_checker_names_the_offending_import(module: str, source: str, expected: str) -> None:
    [imp] = list(imports_of(module, source, is_package=False, known=set(modules())))
    assert problem(imp) == expected


def test_the_checker_allows_what_points_down() -> None:
    source = "from ..contract import Voice\nfrom .allocate import allocate\n"
    found = list(imports_of("stages.dispatch", source, is_package=False, known=set(modules())))
    assert [i.imported for i in found] == ["contract", "stages.allocate"]
    assert [problem(i) for i in found] == [None, None]


def test_a_module_missing_from_the_map_has_no_layer() -> None:
    assert place("brand_new") is None and place("stages.brand_new") == Place("stages", "stages")
    assert place("") == Place("", "public face")


def test_the_checker_finds_a_cycle_between_peers() -> None:
    fake = [
        Import("runtimes.cli", "discovery.detect", 1),
        Import("discovery.detect", "runtimes", 2),
    ]
    assert unit_cycles(fake) == [["discovery", "runtimes", "discovery"]]


def test_a_lazy_loader_counts_as_imports() -> None:
    source = '_HOME = {"RunRecorder": "recorder"}\n'
    [imp] = list(imports_of("stages", source, is_package=True, known=set(modules())))
    assert imp.imported == "stages.recorder"
    source = 'from importlib import import_module\nm = import_module(".gate", __name__)\n'
    [imp] = list(imports_of("stages", source, is_package=True, known=set(modules())))
    assert imp.imported == "stages.gate"


def test_public_names_and_the_lazy_loaders_agree() -> None:
    import importlib

    for name, path in modules().items():
        source = path.read_text(encoding="utf-8")
        if f"{LAZY_MAP} = {{" not in source:
            continue
        mod = importlib.import_module(f"{PACKAGE}.{name}" if name else PACKAGE)
        lazy = set(getattr(mod, LAZY_MAP))
        public = set(mod.__all__)
        assert lazy <= public, f"{name or PACKAGE}: loaded lazily but not public: {lazy - public}"
        for public_name in sorted(public):
            assert getattr(mod, public_name) is not None, f"{name}.{public_name} does not load"
