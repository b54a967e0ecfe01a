"""Recordings that hold one conversation several times, folded into one.

A gateway that logs every API call writes one line per call, each holding the whole history so
far: the conversation's first turns then stand on many lines. Replayed as they are, each turn
would be replayed again on every later line, drafted the second time from the store that already
holds its first replay, and tau would count the copy. So a conversation whose messages are the
start of another's is left out: the longer one replays every turn of it once. Two conversations
with equal messages are both kept: that is a request served twice (a deterministic agent run
again), which a server's store sees twice too.
"""
from __future__ import annotations


def _key(m: dict) -> tuple:
    return m["role"], m["content"], m.get("tool_calls", ()), m.get("name"), m.get("answers")


def fold_overlaps(convs: list) -> tuple[list, list[dict]]:
    """``convs``: :class:`~oilbird.data.conversations.Conversation` objects (normalised messages).
    Returns (the conversations whose messages are not the start of another's, each where the
    first line it holds stood, so a per-call log's sessions keep the order they began in; one
    ``{"id", "into", "source"}`` per conversation left out, ``into`` naming the kept one that
    holds it). Every proper prefix is hashed once; a conversation's holders are tried longest
    first, and the first that holds it message by message (a hash can collide) is the one."""
    keys = [[_key(m) for m in c.messages] for c in convs]
    full: list[int] = []
    holders: dict[int, list[int]] = {}      # a proper prefix's hash -> the conversations it starts
    for j, ks in enumerate(keys):
        h = 0
        for n, k in enumerate(ks):
            h = hash((h, k))
            if n < len(ks) - 1:
                holders.setdefault(h, []).append(j)
        full.append(h)
    into: dict[int, int] = {}
    for i in range(len(convs)):
        n = len(keys[i])
        # the longest that holds it (the first of equal ones) is never held itself: one that is kept
        for j in sorted(holders.get(full[i], ()), key=lambda j: (-len(keys[j]), j)):
            if keys[j][:n] == keys[i]:
                into[i] = j
                break
    first: dict[int, int] = {}               # a kept conversation -> the first line it holds
    for i in range(len(convs)):
        first.setdefault(into.get(i, i), i)
    kept = [convs[j] for j in sorted(first, key=first.get)]
    folded = [{"id": convs[i].id, "into": convs[j].id, "source": convs[i].source} for i, j in sorted(into.items())]
    return kept, folded
