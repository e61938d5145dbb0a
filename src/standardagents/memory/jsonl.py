"""Export and import memory as JSON Lines: one item per line, in the shape the REST API answers
(``namespace``, ``key``, ``value``, ``created_at``, ``updated_at``, ``expires_at``,
``written_by``), so a dump can be read, diffed, filtered with ``jq`` and loaded elsewhere.

An import checks every line before it writes any, so a malformed file writes nothing; vectors
are not exported (the importing store embeds with its own embedder).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import IO, Any

from ._errors import MemoryInputError
from ._namespace import check_key, check_namespace
from .store import MemoryStore

__all__ = ["export_jsonl", "import_jsonl"]

_PAGE = 500


async def export_jsonl(memory: MemoryStore, out: IO[str], prefix: Sequence[str] = ()) -> int:
    """Write every live item under ``prefix`` to ``out``; how many."""
    count = 0
    offset = 0
    while True:
        page = await memory.search(prefix, limit=_PAGE, offset=offset)
        for item in page:
            out.write(json.dumps(item.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
        count += len(page)
        if len(page) < _PAGE:
            return count
        offset += _PAGE


def _ttl_minutes(expires_at: Any) -> float | None:
    if not expires_at:
        return None
    when = datetime.datetime.fromisoformat(str(expires_at).replace("Z", "+00:00"))
    left = (when - datetime.datetime.now(datetime.UTC)).total_seconds() / 60
    return left if left > 0 else -1.0


async def import_jsonl(memory: MemoryStore, lines: IO[str]) -> int:
    """Put every item of a JSONL export (replacing items with the same namespace and key);
    an item whose time to live has passed is skipped. How many were put."""
    parsed: list[tuple[tuple[str, ...], str, dict[str, Any], float | None]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("a line must be a JSON object")
            namespace = check_namespace(row.get("namespace"))
            key = check_key(row.get("key"))
            value = row.get("value")
            if not isinstance(value, dict):
                raise ValueError("'value' must be a JSON object")
            ttl = _ttl_minutes(row.get("expires_at"))
        except (ValueError, MemoryInputError) as exc:
            raise MemoryInputError(f"line {number}: {exc}") from None
        parsed.append((namespace, key, value, ttl))
    count = 0
    for namespace, key, value, ttl in parsed:
        if ttl is not None and ttl < 0:
            continue
        await memory.put(namespace, key, value, ttl=ttl)
        count += 1
    return count
