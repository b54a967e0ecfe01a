"""Helpers shared by the two exact-match sources (prompt lookup and suffix)."""
from __future__ import annotations

from ..store import SuffixIndex


def confidence(agreeing: int, length: int) -> float:
    """GOOSE's match confidence for a lexical chain.

    >= 2 earlier occurrences agreeing on the next token -> 1.0; a chain of >= 8 tokens ->
    0.7..0.9 growing with length; otherwise 0.6 * len / 8.
    """
    if agreeing >= 2:
        return 1.0
    if length >= 8:
        return 0.7 + 0.2 * min(1.0, (length - 8) / 12)
    return 0.6 * length / 8


class RequestIndex:
    """A :class:`SuffixIndex` over the current request (prompt + generated), kept in sync."""

    def __init__(self, gram: int):
        self.gram = gram
        self.index = SuffixIndex(gram=gram)

    def reset(self, tokens: list[int]) -> None:
        """Index a new request's prompt. A prompt that begins with everything indexed so far
        (the next turn of the same conversation: the last prompt, its answer, new messages)
        indexes only what is new; the index is the same as one built afresh."""
        old = self.index.tokens
        if 0 < len(old) <= len(tokens) and [int(t) for t in tokens[:len(old)]] == old:
            self.index.extend(tokens[len(old):])
            return
        self.index = SuffixIndex(gram=self.gram)
        self.index.extend(tokens)

    def sync(self, tokens: list[int]) -> None:
        """Index whatever of ``tokens`` is new (tokens only ever grow within a request)."""
        n = len(self.index)
        if len(tokens) > n:
            self.index.extend(tokens[n:])
