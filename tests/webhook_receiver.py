"""A webhook receiver for tests: a real HTTP server on 127.0.0.1 that answers the first
``failures`` attempts of each message with 500 (or every attempt while ``refusing``), then 200,
and keeps every request it got."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["Delivery", "Receiver", "fast_retries"]


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes
    status: int


@dataclass
class Receiver:
    failures: int = 0
    refusing: bool = False
    got: list[Delivery] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Condition = field(init=False)
    server: Any = None

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver.lock:
                    seen = sum(1 for d in receiver.got if d.headers.get("webhook-id") == headers.get("webhook-id"))
                    status = 500 if receiver.refusing or seen < receiver.failures else 200
                    receiver.got.append(Delivery(headers, body, status))
                    receiver.changed.notify_all()
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def succeeded(self) -> list[Delivery]:
        with self.lock:
            return [d for d in self.got if d.status == 200]

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> bool:
        """Wait (bounded) until ``predicate(deliveries)`` holds."""
        with self.changed:
            return self.changed.wait_for(lambda: predicate(list(self.got)), timeout)


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deliveries to 127.0.0.1 allowed, retried after 50 ms instead of seconds."""
    monkeypatch.setenv("STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE", "1")
    monkeypatch.setenv("STANDARDAGENTS_WEBHOOKS_BACKOFF", "0.05")
