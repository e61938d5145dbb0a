"""Webhooks: subscriptions, a durable outbox, and a sender that signs and retries.

An event is first written to the outbox (one row per subscription wanting it, keyed by what
it is about, so a second writer of the same event adds nothing); a background sender on every
worker claims due rows, posts them signed as the Standard Webhooks specification says
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``; the ``standardwebhooks``
library signs), and settles each row with its attempt in the delivery log. A failed attempt
is retried with exponential backoff; a process killed meanwhile leaves the row pending for
any worker to send. The message id stays the same across retries and replays, so a receiver
can drop what it already handled.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import secrets
import time
import weakref
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from standardwebhooks import Webhook

from ..exceptions import DefinitionError
from ..records import ExecutionRecord, new_id, now_ms
from ..store import serviceops as ops
from ..store.serviceops import OutboxRecord, WebhookRecord, run_op
from .ssrf import check_url

if TYPE_CHECKING:
    from ..engine.runtime import Runtime

__all__ = [
    "EVENT_TYPES",
    "WebhookSender",
    "create_a2a_config",
    "create_webhook",
    "enqueue",
    "enqueue_push",
    "new_secret",
    "sign",
]

log = logging.getLogger("standardagents.webhooks")

#: the events a subscription may name (``*``: every one)
EVENT_TYPES = ("execution.done", "execution.failed", "approval.requested", "schedule.failed")
#: outcomes of a turn that count as failed
FAILED_OUTCOMES = ("error", "model_error", "output_invalid", "guardrail", "interrupted")
#: attempts before an event is given up (``STANDARDAGENTS_WEBHOOKS_MAX_ATTEMPTS``)
DEFAULT_MAX_ATTEMPTS = 8
#: seconds before the first retry, doubling each time (``STANDARDAGENTS_WEBHOOKS_BACKOFF``)
DEFAULT_BACKOFF = 1.0
MAX_BACKOFF = 600.0
#: seconds a delivery may take
TIMEOUT = 10.0
#: each runtime's running sender, woken when an event is written here
_SENDERS: weakref.WeakKeyDictionary[Any, WebhookSender] = weakref.WeakKeyDictionary()


def new_secret() -> str:
    """A fresh ``whsec_`` signing secret (24 random bytes, base64)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def _check_secret(secret: str) -> str:
    if not isinstance(secret, str) or not secret.startswith("whsec_"):
        raise DefinitionError("field 'secret' must be a Standard Webhooks secret: 'whsec_' and base64")
    try:
        Webhook(secret)
    except Exception:
        raise DefinitionError("field 'secret' is not 'whsec_' followed by base64 bytes") from None
    return secret


def _check_events(events: Any) -> list[str]:
    if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
        raise DefinitionError(f"field 'events' must be a non-empty list of event names: {', '.join(EVENT_TYPES)} or '*'")
    unknown = [e for e in events if e != "*" and e not in EVENT_TYPES]
    if unknown:
        raise DefinitionError(f"field 'events': unknown event {unknown[0]!r}; known: {', '.join(EVENT_TYPES)} or '*'")
    return list(dict.fromkeys(events))


def sign(secret: str, message_id: str, timestamp: int, body: str) -> dict[str, str]:
    """The three Standard Webhooks headers of one delivery."""
    signature = Webhook(secret).sign(message_id, datetime.fromtimestamp(timestamp, tz=UTC), body)
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature,
            "content-type": "application/json"}


async def create_webhook(rt: Runtime, url: str, events: Any, *, secret: str | None = None,
                         thread_id: str | None = None, user_id: str | None = None, name: str | None = None,
                         source: str = "api", execution_id: str | None = None) -> WebhookRecord:
    """Subscribe ``url`` to ``events`` (checked: shape, events, secret, and no internal
    address unless allowed); the record carries the signing secret. With ``execution_id``
    the subscription is that execution's only: it always gets the execution's
    ``execution.done``, its last event, and is removed once that was delivered."""
    await check_url(url)
    checked = _check_events(events)
    if execution_id is not None and "*" not in checked and "execution.done" not in checked:
        checked.append("execution.done")
    record = WebhookRecord(id=new_id("wh_"), name=name, url=url, events=checked,
                           secret=_check_secret(secret) if secret is not None else new_secret(),
                           thread_id=thread_id, user_id=user_id, source=source, created_at=now_ms(),
                           execution_id=execution_id)
    if name is not None:
        await run_op(rt.store, ops.upsert_defined_webhook, record)
    else:
        await run_op(rt.store, ops.insert_webhook, record)
    return record


async def enqueue(rt: Runtime, event_type: str, key: str, data: dict[str, Any], thread_id: str | None,
                  execution_id: str | None = None) -> int:
    """Write ``event_type`` about ``key`` (of ``thread_id`` and ``execution_id``) to the
    outbox of every subscription wanting it."""
    if not await run_op(rt.store, ops.any_webhook_wanting, event_type, thread_id, execution_id, write=False):
        # the common case (nothing subscribed) costs a read, not a write transaction; a
        # subscription made after this read is made after the event, as it would be after
        # the write
        return 0
    payload = {"type": event_type, "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "data": data}
    added = await run_op(rt.store, ops.enqueue_event, event_type, f"{event_type}:{key}", payload, thread_id,
                         lambda: new_id("msg_"), now_ms(), execution_id)
    _wake(rt, added)
    return added


def _wake(rt: Runtime, added: int) -> None:
    sender = _SENDERS.get(rt)
    if added and sender is not None:
        sender.wake()


async def create_a2a_config(rt: Runtime, task_id: str, user_id: str | None, config: dict[str, Any]) -> WebhookRecord:
    """Store an A2A push-notification config (``config``: its JSON form, with ``id`` and
    ``url``) for task ``task_id``, replacing the caller's config of the same id. Its URL is
    checked like a webhook's; its notifications go through the same outbox and sender."""
    url = config.get("url")
    if not isinstance(url, str) or not url:
        raise DefinitionError("a push-notification config needs a 'url'")
    await check_url(url)
    record = WebhookRecord(id=new_id("wh_"), name=None, url=url, events=[ops.A2A_EVENT], secret=new_secret(),
                           thread_id=None, user_id=user_id, source="a2a", created_at=now_ms(),
                           execution_id=task_id, kind="a2a", config=dict(config))
    await run_op(rt.store, ops.put_a2a_config, record)
    return record


async def enqueue_push(rt: Runtime, task_id: str, body: dict[str, Any]) -> int:
    """Write one A2A push notification (``body``: the task's ``StreamResponse`` as JSON) to
    the outbox of every push-notification config of ``task_id``; each is sent once."""
    if not await run_op(rt.store, ops.any_webhook_wanting, ops.A2A_EVENT, None, task_id, write=False):
        return 0
    added = await run_op(rt.store, ops.enqueue_event, ops.A2A_EVENT, f"{ops.A2A_EVENT}:{task_id}:{new_id('n_')}",
                         body, None, lambda: new_id("msg_"), now_ms(), task_id)
    _wake(rt, added)
    return added


async def on_turn_end(rt: Runtime, record: ExecutionRecord, data: dict[str, Any]) -> None:
    """The turn-end hook: ``execution.done`` for every ended turn, ``execution.failed`` too
    for one that failed."""
    outcome = data.get("outcome") or record.stop_reason or record.status
    body = {"executionId": record.id, "threadId": record.thread_id, "outcome": outcome,
            "stopReason": data.get("stopReason"), "error": data.get("error")}
    # ``execution.failed`` first: ``execution.done`` is the last event of a subscription made
    # for this execution alone, which is removed once it was delivered
    if outcome in FAILED_OUTCOMES or record.status == "failed":
        await enqueue(rt, "execution.failed", record.id, body, record.thread_id, record.id)
    await enqueue(rt, "execution.done", record.id, body, record.thread_id, record.id)


def _a2a_headers(config: dict[str, Any]) -> dict[str, str]:
    """What the A2A spec sends with a push notification: the config's ``token`` as
    ``X-A2A-Notification-Token``, and its ``authentication`` as ``Authorization``."""
    headers: dict[str, str] = {}
    if config.get("token"):
        headers["X-A2A-Notification-Token"] = str(config["token"])
    auth = config.get("authentication") or {}
    if isinstance(auth, dict) and auth.get("scheme") and auth.get("credentials"):
        headers["Authorization"] = f"{auth['scheme']} {auth['credentials']}"
    return headers


def _backoff(attempts: int) -> float:
    base = float(os.environ.get("STANDARDAGENTS_WEBHOOKS_BACKOFF") or DEFAULT_BACKOFF)
    return min(MAX_BACKOFF, base * (2 ** max(0, attempts - 1)))


class WebhookSender:
    """The background sender of one worker: claims due outbox rows and delivers them."""

    def __init__(self, rt: Runtime, *, batch: int = 32, poll: float = 0.5) -> None:
        self.rt = rt
        self.batch = batch
        self.poll = poll
        self.worker = f"{rt.owner}:{os.getpid()}"
        self.max_attempts = int(os.environ.get("STANDARDAGENTS_WEBHOOKS_MAX_ATTEMPTS") or DEFAULT_MAX_ATTEMPTS)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client: Any = None
        self._hooks: dict[str, WebhookRecord] = {}

    def start(self) -> None:
        import httpx2

        self._client = httpx2.AsyncClient(timeout=TIMEOUT, follow_redirects=False)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="webhook-sender")
        _SENDERS[self.rt] = self

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        if _SENDERS.get(self.rt) is self:
            del _SENDERS[self.rt]
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _run(self) -> None:
        while True:
            try:
                sent = await self.send_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("webhook sender: the outbox could not be read", exc_info=True)
                sent = 0
            if sent >= self.batch:
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll)

    async def send_due(self) -> int:
        """Deliver the rows due now (one batch); returns how many were attempted."""
        now = now_ms()
        rows = await run_op(self.rt.store, ops.claim_deliveries, now, self.worker, self.batch,
                            int((TIMEOUT + 5) * 1000))
        if rows:
            results = await asyncio.gather(*(self._deliver(row) for row in rows))
            await run_op(self.rt.store, ops.record_attempts, self.worker, list(results), now_ms())
        return len(rows)

    async def _hook(self, webhook_id: str) -> WebhookRecord | None:
        hook = self._hooks.get(webhook_id)
        if hook is None:
            hook = await run_op(self.rt.store, ops.get_webhook, webhook_id, write=False)
            if hook is not None:
                self._hooks[webhook_id] = hook
        return hook

    async def _deliver(self, row: OutboxRecord) -> tuple[OutboxRecord, int | None, str | None, int, bool, int | None]:
        """Send one row; what its attempt was (status, error, duration, delivered, when to retry)."""
        hook = await self._hook(row.webhook_id)
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        if hook is None:
            error = "the subscription was deleted"
        else:
            body = json.dumps(row.payload, separators=(",", ":"), ensure_ascii=False)
            try:
                await check_url(hook.url)
                headers = sign(hook.secret, row.id, int(time.time()), body)
                if hook.kind == "a2a":
                    headers.update(_a2a_headers(hook.config or {}))
                response = await self._client.post(hook.url, content=body.encode(), headers=headers)
                status = response.status_code
                if not 200 <= status < 300:
                    error = f"HTTP {status}"
            except DefinitionError as exc:
                error = str(exc)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:500]
        delivered = error is None
        final = hook is None or row.attempts >= self.max_attempts
        retry_at = None if delivered or final else now_ms() + int(_backoff(row.attempts) * 1000)
        if not delivered:
            log.info("webhook %s: delivery %s attempt %d failed (%s)%s", row.webhook_id, row.id, row.attempts, error,
                     "" if retry_at is None else f"; retrying in {(retry_at - now_ms()) / 1000:.1f} s")
        return row, status, error, int((time.perf_counter() - started) * 1000), delivered, retry_at

