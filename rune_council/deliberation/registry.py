"""The deliberation methods by name: what ``deliberation.method`` may say.

A request names a method; the runner, the verdict metadata and ``verify`` find it here and
nowhere else. A built-in method is one module under ``methods/`` and one line below; a
caller adds its own at run time with :func:`register`.
"""

from __future__ import annotations

from ..core.contract import DeliberationOptions
from ..core.errors import RequestError
from .method import Method
from .methods import rank, red_team, vote

METHODS: dict[str, Method] = {
    vote.METHOD.name: vote.METHOD,
    rank.METHOD.name: rank.METHOD,
    red_team.METHOD.name: red_team.METHOD,
}


def register(method: Method, *, replace: bool = False) -> None:
    """Make ``method`` available as ``deliberation.method = method.name``."""
    if method.name in METHODS and not replace and METHODS[method.name] is not method:
        raise ValueError(f"a deliberation method named {method.name!r} is already registered")
    METHODS[method.name] = method


def unregister(name: str) -> None:
    METHODS.pop(name, None)


def lookup(name: str) -> Method:
    found = METHODS.get(name)
    if found is None:
        known = ", ".join(sorted(METHODS))
        raise RequestError(
            f"malformed PerspectiveRequest: deliberation.method: no method named {name!r} "
            f"(registered: {known})"
        )
    return found


def method_name(options: DeliberationOptions | None) -> str | None:
    """The method the options name or imply (None: the single pass); the run file records it."""
    if options is None:
        return None
    if options.method is not None:
        return options.method
    # Red team ranks attacks; rounds need a consensus score, and ranking gives one.
    if options.council_type == "red_team" or options.rounds.max_rounds > 1:
        return rank.METHOD.name
    return None


def method_for(options: DeliberationOptions | None) -> Method | None:
    """The registered method that runs the options' deliberation."""
    name = method_name(options)
    if name is None or options is None:
        return None
    if options.council_type == "red_team" and name == rank.METHOD.name:
        # A red team's ranking ends in a risk register, not a verdict.
        return red_team.METHOD
    return lookup(name)
