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
    return m["role"], m["content"], m.get("tool_calls", ()), m.get("name")


def fold_overlaps(convs: list) -> tuple[list, list[dict]]:
    """``convs``: :class:`~oilbird.data.conversations.Conversation` objects (normalised messages).
    Returns (the conversations whose messages are not the start of another's, in order; one ``{"id",
    "into", "source"}`` per conversation left out, ``into`` naming the kept one that holds it).
    Linear in the messages: every proper prefix is hashed once, and a hash match is checked
    message by message."""
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
    kept, folded = [], []
    for i, c in enumerate(convs):
        n = len(keys[i])
        held = [j for j in holders.get(full[i], ()) if keys[j][:n] == keys[i]]
        # the longest that holds it (the first of equal ones): one that is kept
        into = min(held, key=lambda j: (-len(keys[j]), j)) if held else None
        if into is None:
            kept.append(c)
        else:
            folded.append({"id": c.id, "into": convs[into].id, "source": c.source})
    return kept, folded
