"""Which connections the gateway keeps: at most `limit` at once, and each only while it is
sending a request in time or waiting for its answer.

The gateway runs inside the trainer, so a connection is one of the trainer's file
descriptors: 1,100 keyless connections holding half-sent requests took the 1,024 a process
has, and checkpoint writes and subprocesses then failed. aiohttp bounds a request's size but
not how long its head and body may take, so each connection here gets `request_s` from its
start, or from the end of its last answer, to have its next request read whole (`mark_read`,
called once the body is in); past it, or past the cap, it is closed. An idle keep-alive
connection is closed the same way, which a client's pool reopens as it needs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from toolgym.log import get_logger

log = get_logger(__name__)


class Admission:
    """The gateway's connections, bounded in number and in how long a request may take."""

    def __init__(self, limit: int = 512, request_s: float = 30.0) -> None:
        self.limit, self.request_s = limit, request_s
        self.live: dict[Any, _Admitted] = {}
        """By transport: each open connection."""
        self.refused = 0

    def factory(self, make: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for `loop.create_server` around aiohttp's own."""
        return lambda: _Admitted(self, make())

    def mark_read(self, transport: Any) -> None:
        """The connection's request is read: no deadline while it is answered."""
        admitted = self.live.get(transport)
        if admitted is not None:
            admitted.answering += 1
            admitted.disarm()

    def mark_answered(self, transport: Any) -> None:
        """The connection's answer is sent: its next request has `request_s` again."""
        admitted = self.live.get(transport)
        if admitted is not None:
            admitted.answering = max(0, admitted.answering - 1)
            if not admitted.answering:
                admitted.arm()


class _Admitted(asyncio.Protocol):
    """aiohttp's protocol for one connection, behind the admission's rules."""

    def __init__(self, admission: Admission, inner: Any) -> None:
        self.admission, self.inner = admission, inner
        self.transport: Any = None
        self.timer: asyncio.TimerHandle | None = None
        self.answering = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if len(self.admission.live) >= self.admission.limit:
            self.admission.refused += 1
            if self.admission.refused % 1000 == 1:
                log.warning("the gateway is at its %d connections: refusing more",
                            self.admission.limit)  # fmt: skip
            transport.abort()
            self.inner = None
            return
        self.admission.live[transport] = self
        self.inner.connection_made(transport)
        self.arm()

    def arm(self) -> None:
        self.disarm()
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.admission.request_s, self._too_slow)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _too_slow(self) -> None:
        if self.transport is not None and not self.answering:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        self.admission.live.pop(self.transport, None)
        if self.inner is not None:
            self.inner.connection_lost(exc)
