"""A2A push notifications, delivered the way webhooks are.

The A2A SDK's request handler asks a :class:`PushNotificationConfigStore` to keep a task's
push-notification configs (``tasks/pushNotificationConfig/*``, and the config in a
``message/send`` configuration) and a :class:`PushNotificationSender` to send each task update.
Here a config is a webhook subscription of kind ``a2a`` for the task (the execution of the same
id) in the store, and a task update is an outbox row: sent by the webhook sender of any worker,
retried with backoff until the receiver answers 2xx, refused for internal addresses unless
``STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE=1``, signed as Standard Webhooks say, and carrying the
config's ``token`` as ``X-A2A-Notification-Token`` (and its ``authentication`` as
``Authorization``) as the A2A spec says. The body is the update as a ``StreamResponse``, what
the SDK's own sender posts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.server.tasks.push_notification_config_store import (
    PushNotificationConfigStore,
    normalize_push_notification_config,
)
from a2a.server.tasks.push_notification_sender import PushNotificationEvent, PushNotificationSender
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict, ParseDict

from ...exceptions import DefinitionError
from ...service.ssrf import check_url
from ...service.webhooks import create_a2a_config, enqueue_push
from ...store import serviceops as ops
from ...store.serviceops import WebhookRecord, run_op

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext

    from ...engine.runtime import Runtime

__all__ = ["OutboxPushSender", "StorePushConfigStore", "push_url_allowed"]


def _owner(context: ServerCallContext | None) -> str | None:
    user = getattr(context, "user", None)
    name = getattr(user, "user_name", None) if user is not None and user.is_authenticated else None
    return str(name) if name else None


def _config(record: WebhookRecord) -> TaskPushNotificationConfig:
    config = TaskPushNotificationConfig()
    ParseDict(record.config or {}, config, ignore_unknown_fields=True)
    return config


async def push_url_allowed(url: str) -> bool:
    """The SDK's push-URL check: the webhooks' (no internal address unless allowed)."""
    try:
        await check_url(url)
    except DefinitionError:
        return False
    return True


class StorePushConfigStore(PushNotificationConfigStore):
    """A task's push-notification configs as webhook subscriptions of kind ``a2a``; a caller
    sees and changes only its own."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    async def set_info(self, task_id: str, notification_config: TaskPushNotificationConfig,
                       context: ServerCallContext) -> TaskPushNotificationConfig:
        config = normalize_push_notification_config(task_id, notification_config)
        await create_a2a_config(self.rt, task_id, _owner(context), MessageToDict(config))
        return config

    async def get_info(self, task_id: str, context: ServerCallContext) -> list[TaskPushNotificationConfig]:
        owner = _owner(context)
        if owner is None:
            return []
        return [_config(r) for r in await run_op(self.rt.store, ops.a2a_configs, task_id, owner, write=False)]

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return [_config(r) for r in await run_op(self.rt.store, ops.a2a_configs, task_id, None, write=False)]

    async def delete_info(self, task_id: str, context: ServerCallContext, config_id: str | None = None) -> None:
        owner = _owner(context)
        if owner is not None:
            await run_op(self.rt.store, ops.delete_a2a_configs, task_id, owner, config_id)


class OutboxPushSender(PushNotificationSender):
    """Writes each task update to the webhook outbox, once per config of the task."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        body: dict[str, Any] = MessageToDict(to_stream_response(event))
        await enqueue_push(self.rt, task_id, body)
