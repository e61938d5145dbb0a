"""Preparing a document to leave this host, without the secrets of its bundled servers."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["SECRET_SERVER_KEYS", "export_spec"]

SECRET_SERVER_KEYS = ("env", "headers")
"""The bundled-server keys where credentials live; nothing else in the format can hold one."""


def export_spec(spec: Mapping[str, Any], *, secrets: bool = False) -> dict[str, Any]:
    """A copy of ``spec`` whose bundled servers have lost ``env`` and ``headers``.

    Only values are removed, so the result is still a valid document that parses without
    errors and resolves to the same agent; ``secrets=True`` keeps everything.
    """
    exported = copy.deepcopy(dict(spec))
    bundle = exported.get("bundle")
    if secrets or not isinstance(bundle, Mapping):
        return exported
    servers = bundle.get("mcpServers")
    if not isinstance(servers, list | tuple):
        return exported
    exported["bundle"] = {
        **bundle,
        "mcpServers": [
            {key: value for key, value in server.items() if key not in SECRET_SERVER_KEYS}
            if isinstance(server, Mapping)
            else server
            for server in servers
        ],
    }
    return exported
