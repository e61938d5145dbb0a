"""``/api/evals/...``: the stored experiments and the scores stored with executions, for the
web app's evals view; capturing a turn as a case from the inspector.

Runs are the project's, so listing them and capturing into the project's files is for
admins (``dev`` serves a local admin); an execution's scores are readable by whoever may read
its thread."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..evals.capture import capture_turn, write_case
from ..evals.storage import get_run, list_runs, scores_of
from ..exceptions import NotFoundError, StandardAgentsError
from ..store.checks import check_text
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse, read_json
from .state import server_of

__all__ = ["eval_routes"]


async def _admin(request: Request) -> None:
    caller = await authenticate(request)
    if not caller.is_admin:
        raise ApiError(403, "only an admin may read or write the project's evals")


def _int(request: Request, name: str, default: int, most: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) > most:
        raise ApiError(400, f"{name} must be a whole number from 0 to {most} (got {raw!r})")
    return int(raw)


async def runs(request: Request) -> Response:
    """``GET /api/evals/runs``: stored experiments, newest first (``limit``, ``offset``)."""
    await _admin(request)
    store = server_of(request).runtime.store
    found = await list_runs(store, limit=_int(request, "limit", 50, 500), offset=_int(request, "offset", 0, 10**9))
    return JSONResponse({"runs": found})


async def run(request: Request) -> Response:
    """``GET /api/evals/runs/{id}``: one experiment with each case's result."""
    await _admin(request)
    run_id = request.path_params["run_id"]
    check_text("run id", run_id)
    found = await get_run(server_of(request).runtime.store, run_id)
    if found is None:
        raise ApiError(404, f"unknown eval run {run_id!r}")
    return JSONResponse(found)


async def execution_scores(request: Request) -> Response:
    """``GET /api/evals/executions/{id}/scores``: the scores stored with an execution."""
    caller = await authenticate(request)
    execution_id = request.path_params["execution_id"]
    check_text("execution id", execution_id)
    store = server_of(request).runtime.store
    record = await store.get_execution(execution_id)
    if record is None:
        raise ApiError(404, f"unknown execution {execution_id!r}")
    await require_thread(request, record.thread_id, caller)
    return JSONResponse({"executionId": execution_id, "scores": await scores_of(store, execution_id)})


async def capture(request: Request) -> Response:
    """``POST /api/evals/capture`` ``{threadId, executionId?, dataset?}``: add the turn as a
    case to ``evals/<dataset>.yaml`` of the project (``captured`` by default)."""
    await _admin(request)
    body = await read_json(request)
    thread_id, execution_id, dataset = body.get("threadId"), body.get("executionId"), body.get("dataset") or "captured"
    if not isinstance(thread_id, str) or not thread_id:
        raise ApiError(422, "threadId: the thread whose turn to capture is required")
    if execution_id is not None and not isinstance(execution_id, str):
        raise ApiError(422, "executionId: must be a string")
    if not isinstance(dataset, str) or not dataset.replace("_", "").replace("-", "").isalnum():
        raise ApiError(422, f"dataset: {dataset!r} is not a plain file name (letters, digits, - and _)")
    rt = server_of(request).runtime
    root = rt.registry.root
    if root is None:
        raise ApiError(409, "this server runs no project folder to write the dataset into")
    try:
        case = await capture_turn(rt.store, thread_id, execution_id)
        path = Path(root) / "evals" / f"{dataset}.yaml"
        write_case(path, case)
    except StandardAgentsError as exc:
        raise ApiError(404 if isinstance(exc, NotFoundError) else 422, str(exc)) from None
    return JSONResponse({"case": case["name"], "file": f"evals/{dataset}.yaml",
                         "modelReplies": len(case["replay"]["model"]), "toolCalls": len(case["replay"]["tools"])},
                        status_code=201)


def eval_routes(prefix: str) -> list[BaseRoute]:
    p = f"{prefix}/evals"
    return [
        Route(f"{p}/runs", runs, methods=["GET"]),
        Route(f"{p}/runs/{{run_id}}", run, methods=["GET"]),
        Route(f"{p}/executions/{{execution_id}}/scores", execution_scores, methods=["GET"]),
        Route(f"{p}/capture", capture, methods=["POST"]),
    ]
