"""Services above the engine, driven from the store: schedules (recurring turns), webhooks
(signed deliveries through an outbox), quotas per user and a provider rate limit shared by
every worker. Each uses the runtime's public surface; the engine never imports them.

:func:`start_services` starts the background parts a server runs (the scheduler and the
webhook sender) and installs the turn-end, admission and model-call hooks.
"""

from __future__ import annotations

from .running import Services, start_services

__all__ = ["Services", "start_services"]
