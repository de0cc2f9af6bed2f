"""Run the app under uvicorn, with a stop that cancels councils before connections drain.

uvicorn's graceful shutdown waits for open responses to finish, and an event stream only
finishes when its council does. So the first SIGTERM (or Ctrl-C) cancels every council this
server holds, right away: each run file ends ``cancelled`` with its finished voices, which
ends the streams, which lets uvicorn close.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import FrameType

import uvicorn

from .app import ServerState, create_app
from .settings import ServeSettings

# After the councils are cancelled, how long open connections get before they are cut.
DRAIN_S = 30


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self._state = state
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Future[None] | None = None

    # uvicorn types ``sockets`` as a list of ``socket.socket``; we only pass it through, and
    # naming the stdlib type here would pull ``socket`` into every import of this module.
    async def serve(self, sockets: list[object] | None = None) -> None:  # type: ignore[override]
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)  # type: ignore[arg-type]

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is not None and self._closing is None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._begin_close)
        super().handle_exit(sig, frame)

    def _begin_close(self) -> None:
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._state.close())


def serve(settings: ServeSettings, *, log_level: str = "warning") -> None:
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        timeout_graceful_shutdown=DRAIN_S,
        server_header=False,
        proxy_headers=False,
        lifespan="on",
    )
    _Server(config, app.state.server).run()
