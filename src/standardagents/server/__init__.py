"""The HTTP server: REST API, live streams, project endpoints with access levels, auth,
an OpenAI-compatible door and the web chat."""

from __future__ import annotations

from .app import create_app, factory_from_env, run_server
from .auth import LOCAL_USER_ID, ThreadEndpointAuth, caller_dict, can_access_thread
from .endpoints import ControllerContext, to_response
from .errors import ApiError
from .streams import THREAD_STREAM_REASONING_PARAM
from .users import UserClient, UserHub, UserState

__all__ = [
    "LOCAL_USER_ID",
    "THREAD_STREAM_REASONING_PARAM",
    "ApiError",
    "ControllerContext",
    "ThreadEndpointAuth",
    "UserClient",
    "UserHub",
    "UserState",
    "caller_dict",
    "can_access_thread",
    "create_app",
    "factory_from_env",
    "run_server",
    "to_response",
]
