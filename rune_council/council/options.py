"""Every option of a council in one typed value.

``convene``, ``aconvene``, the chain and every door (CLI, servers) build one
``CouncilOptions`` and pass it down, so an option means the same thing wherever it is given.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..core.contract import CouncilResult, RunEvent
from ..core.records import record

if TYPE_CHECKING:
    from ..config import CouncilConfig
    from ..core.runtime import Runtime
    from ..endpoints import EndpointSetup
    from ..runtimes.limits import Limits
    from ..runtimes.subagent import SubagentFn

OnEvent = Callable[[CouncilResult, RunEvent], None]


@record(frozen=True)
class CouncilOptions:
    """How to convene a council; the defaults detect everything and ask nobody.

    Voices:
      ``runtimes`` replaces detection and everything ``council.toml`` would seat (its
      endpoints and ``[subagent]``) with exactly these voices (custom runtimes, tests);
      ``extra_runtimes`` adds voices to the detected ones (or to ``runtimes``).
      ``endpoints`` adds HTTP endpoint models; None means the endpoints ``council.toml``
      names, unless ``runtimes`` is given.

    Who takes slots no voice could serve (first that applies wins, see
    ``rune_council.council.seating``): ``subagent`` (a runtime or a callable) or
    ``subagent_command`` (a command line answering on stdout); a subagent model in
    ``endpoints``; ``[subagent] command`` in ``council.toml``; ``[subagent] endpoint``
    there. ``subagent_family`` names the model family behind it (default: the
    ``[subagent] family`` of ``council.toml`` for a command, else unknown);
    ``subagent_family_confirmed`` says the caller knows it for sure.

    ``orchestrator`` consolidates and writes the verdict when the request asks for vote or
    rank stages (default: the runtime the request's ``deliberation.orchestrator`` names).

    ``allow_external`` grants (True) or refuses (False) consent to send the question to
    detected external CLIs and endpoints; None defers to ``RUNE_COUNCIL_ALLOW_EXTERNAL``,
    ``council.toml`` or an earlier yes, and without any of them nothing external is used.

    ``rune_dir`` is where ``.rune`` files go (default ``$RUNE_COUNCIL_DIR`` or ``./.rune``);
    ``refresh`` probes the CLIs again instead of reusing today's detection; ``env`` is the
    environment voices inherit from (default ``os.environ``, filtered per runtime);
    ``on_event(result, event)`` is called at every transition, after it is written;
    ``overwrite`` lets a run reuse the id of an earlier run; ``config`` is the parsed
    ``council.toml`` (None reads it once at the start of the run).

    ``template`` names a council setup (``rune council templates`` lists them): it fills
    what the request leaves open, and the run file records its name and version.

    ``limits`` bounds the calls in flight per runtime across every council given the same
    ``Limits`` (a batch shares one) and carries the endpoints' shared 429 backoff; None
    leaves a lone council unbounded.

    ``notes`` are what the door wants the run file to say from its first write (what a
    review left out of an over-long diff, say), before the council's own notes.
    """

    runtimes: Sequence[Runtime] | None = None
    extra_runtimes: Sequence[Runtime] = ()
    endpoints: EndpointSetup | None = None
    subagent: SubagentFn | Runtime | None = None
    subagent_command: str | None = None
    subagent_family: str | None = None
    subagent_family_confirmed: bool = False
    orchestrator: SubagentFn | Runtime | None = None
    allow_external: bool | None = None
    rune_dir: str | os.PathLike[str] | None = None
    refresh: bool = False
    env: Mapping[str, str] | None = None
    on_event: OnEvent | None = None
    overwrite: bool = False
    config: CouncilConfig | None = None
    template: str | None = None
    limits: Limits | None = None
    notes: Sequence[str] = ()
