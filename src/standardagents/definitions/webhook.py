"""Webhook definitions: a project's subscription of a URL to the runtime's events."""

from __future__ import annotations

from pydantic import Field

from ._base import Definition, build, check_snake_case

__all__ = ["WebhookDefinition", "define_webhook"]


class WebhookDefinition(Definition):
    """Send ``events`` (``execution.done``, ``execution.failed``, ``approval.requested``,
    ``schedule.failed`` or ``*``) to ``url``, signed with ``secret`` (a ``whsec_`` secret; read
    it from the environment rather than writing it in the file)."""

    name: str
    url: str
    events: list[str] = Field(min_length=1)
    secret: str


def define_webhook(name: str, *, url: str, events: list[str], secret: str) -> WebhookDefinition:
    """Define a webhook subscription (a file in the project's ``agents/webhooks/``)."""
    problems: list[tuple[str, str]] = []
    if isinstance(name, str) and (bad := check_snake_case(name)):
        problems.append(("name", bad))
    return build(WebhookDefinition, {"name": name, "url": url, "events": events, "secret": secret}, problems)
