"""A TCP proxy on 127.0.0.1 that a test can cut and restore: a network partition between a
server and its database (or any upstream), made for real, with no change to either side.

    proxy = CuttableProxy(("127.0.0.1", 5432))
    await proxy.start()          # point the server at 127.0.0.1:proxy.port
    proxy.drop()                 # every connection reset, new ones refused
    proxy.restore()              # connections accepted again
    await proxy.aclose()
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["CuttableProxy"]


class CuttableProxy:
    """Forwards each connection to ``upstream`` until :meth:`drop`, which aborts every open
    connection and refuses new ones until :meth:`restore`. Runs on the caller's event loop."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        #: whether connections are refused now
        self.cut = False
        #: the port it listens on, once started
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}

    def drop(self) -> None:
        """Reset every open connection and refuse new ones."""
        self.cut = True
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def restore(self) -> None:
        """Accept connections again."""
        self.cut = False

    async def aclose(self) -> None:
        self.drop()
        if self._server is not None:
            self._server.close()
