"""``GET /metrics``: the Prometheus exposition, behind the API's authentication unless
``STANDARDAGENTS_METRICS=public``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..observability import metrics
from .auth import authenticate
from .errors import ApiError

__all__ = ["metrics_endpoint"]


async def metrics_endpoint(request: Request) -> Response:
    meter = metrics.active()
    if meter is None:
        raise ApiError(404, "metrics are off on this server (STANDARDAGENTS_METRICS=off)")
    if metrics.setting() != "public":
        await authenticate(request)
    await meter.refresh_from_store(request.app.state.server.runtime.store)
    body, content_type = meter.exposition()
    return Response(body, media_type=content_type)
