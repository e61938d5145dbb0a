"""Separating fenced reasoning (``<think>...</think>``) from a reply's text.

Many open models write their reasoning inline between tags. The splitter works on a stream
cut at arbitrary points, so a tag split across chunks is still recognised, and it emits
text as soon as it cannot be the start of a tag, so streaming stays live.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..exceptions import DefinitionError

__all__ = [
    "ALL_FENCES",
    "DEFAULT_FENCES",
    "THINK_FENCE",
    "Fence",
    "FenceSplitter",
    "Piece",
    "strip_thinking",
]

Fence = tuple[str, str]
Piece = tuple[Literal["text", "reasoning"], str]

THINK_FENCE: Fence = ("<think>", "</think>")
DEFAULT_FENCES: tuple[Fence, ...] = (THINK_FENCE,)
ALL_FENCES: tuple[Fence, ...] = (
    THINK_FENCE,
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
    ("◁think▷", "◁/think▷"),
)


class FenceSplitter:
    """Feed a streamed reply in chunks; get ``("text", ...)`` and ``("reasoning", ...)`` pieces.

    Joining every piece of one kind gives the same result however the stream was chunked.
    Only a suffix that could begin a tag is held back; :meth:`flush` releases it at the end
    (an unclosed fence's content counts as reasoning). ``start_inside`` is for templates that
    open the fence in the prompt, so the reply starts inside the reasoning.
    """

    __slots__ = ("_buffer", "_closer", "_fences", "_heads", "_longest_open", "_openers")

    def __init__(self, fences: Sequence[Fence] = DEFAULT_FENCES, *, start_inside: bool = False):
        if not fences or any(not o or not c for o, c in fences):
            raise DefinitionError("every fence needs a non-empty opening and closing tag")
        self._fences = tuple(fences)
        self._openers = tuple(o for o, _ in self._fences)
        self._longest_open = max(len(o) for o in self._openers)
        self._heads = frozenset(o[0] for o in self._openers)
        self._buffer = ""
        self._closer: str | None = self._fences[0][1] if start_inside else None

    @property
    def inside(self) -> bool:
        """True while the stream is inside a fence."""
        return self._closer is not None

    def feed(self, chunk: str) -> list[Piece]:
        """Split one chunk; returns the pieces that are certain so far (possibly none)."""
        if not chunk:
            return []
        if not self._buffer:  # fast path: nothing held and no tag can start in this chunk
            if self._closer is None:
                if not any(h in chunk for h in self._heads):
                    return [("text", chunk)]
            elif self._closer[0] not in chunk:
                return [("reasoning", chunk)]
        buf = self._buffer + chunk
        out: list[Piece] = []
        pos = 0
        while True:
            if self._closer is not None:
                idx = buf.find(self._closer, pos)
                if idx < 0:
                    keep = _partial_suffix(buf, pos, (self._closer,))
                    _emit(out, "reasoning", buf[pos:keep])
                    self._buffer = buf[keep:]
                    return out
                _emit(out, "reasoning", buf[pos:idx])
                pos = idx + len(self._closer)
                self._closer = None
            else:
                match = self._find_opener(buf, pos)
                if match is None:
                    keep = _partial_suffix(buf, pos, self._openers)
                    _emit(out, "text", buf[pos:keep])
                    self._buffer = buf[keep:]
                    return out
                idx, fence = match
                _emit(out, "text", buf[pos:idx])
                pos = idx + len(fence[0])
                self._closer = fence[1]

    def flush(self) -> list[Piece]:
        """Release whatever was held back; call once at the end of the stream."""
        out: list[Piece] = []
        _emit(out, "reasoning" if self._closer is not None else "text", self._buffer)
        self._buffer = ""
        return out

    def _find_opener(self, buf: str, pos: int) -> tuple[int, Fence] | None:
        """The earliest complete opening tag that no earlier partial tag could still pre-empt."""
        best: tuple[int, Fence] | None = None
        for fence in self._fences:
            idx = buf.find(fence[0], pos)
            if idx >= 0 and (
                best is None
                or idx < best[0]
                or (idx == best[0] and len(fence[0]) > len(best[1][0]))
            ):
                best = (idx, fence)
        if best is None:
            return None
        # A longer tag starting at or before the match may still complete with the next chunk.
        start = max(pos, len(buf) - self._longest_open + 1)
        for q in range(start, best[0] + 1):
            tail = buf[q:]
            for opener, _ in self._fences:
                if len(opener) > len(tail) and opener.startswith(tail):
                    return None
        return best


def _partial_suffix(buf: str, pos: int, tags: Sequence[str]) -> int:
    """Where the longest suffix of ``buf[pos:]`` that is a proper prefix of a tag begins."""
    n = len(buf)
    longest = max(len(t) for t in tags) - 1
    for start in range(max(pos, n - longest), n):
        ch = buf[start]
        for tag in tags:
            if tag[0] == ch and tag.startswith(buf[start:]):
                return start
    return n


def _emit(out: list[Piece], kind: Literal["text", "reasoning"], text: str) -> None:
    if not text:
        return
    if out and out[-1][0] == kind:
        out[-1] = (kind, out[-1][1] + text)
    else:
        out.append((kind, text))


def strip_thinking(text: str, fences: Sequence[Fence] = ALL_FENCES) -> tuple[str, str]:
    """``(text, reasoning)`` of a whole reply, each stripped of surrounding whitespace.

    A closing tag with no opening one (the template opened it in the prompt) makes everything
    before it reasoning.
    """
    if not text:
        return "", ""
    start_inside = False
    for opener, closer in fences:
        close_at = text.find(closer)
        if close_at >= 0 and opener not in text[:close_at]:
            start_inside = True
            fences = [(opener, closer), *[f for f in fences if f != (opener, closer)]]
            break
    splitter = FenceSplitter(fences, start_inside=start_inside)
    pieces = splitter.feed(text) + splitter.flush()
    plain = "".join(p for kind, p in pieces if kind == "text")
    reasoning = "\n\n".join(p.strip() for kind, p in pieces if kind == "reasoning" and p.strip())
    return plain.strip(), reasoning
