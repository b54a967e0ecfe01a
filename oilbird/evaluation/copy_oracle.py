"""The copy oracle: how high a perfect verbatim-copy drafter's tau could go on given outputs
(``copy_oracle_tau`` in diagnosis.json, by tree budget; docs/results.md "How high could a copy
drafter's tau go on these outputs?"). Pure: token lists in, numbers out.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..suffix_index import SEP


def longest_prefix_in(arr: np.ndarray, future: Sequence[int]) -> int:
    """Length of the longest prefix of ``future`` that occurs contiguously in ``arr`` (a token
    stream; the ``SEP`` between documents matches no token, so no match crosses one)."""
    if not len(future) or not arr.size:
        return 0
    pos = np.flatnonzero(arr == future[0])
    k = 0
    while pos.size:
        k += 1
        if k >= len(future):
            break
        nxt = pos + k
        nxt = nxt[nxt < arr.size]
        pos = nxt[arr[nxt] == future[k]] - k
    return k


def copy_oracle_tau(pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
                    max_chains: Sequence[int] = (11, 23, 63)) -> dict[int, float | None]:
    """tau of a perfect copy drafter, for each cap on its chain length (tree budget - 1).

    ``pairs`` are ``(prompt, output)`` in serving order. At each cycle, at output position t,
    the drafter proposes the longest prefix of the true continuation ``output[t:]`` (at most
    ``max_chain`` tokens) that occurs verbatim in what a copy source can hold at that moment:
    the current prompt and the request's own output so far (one document), and the outputs of
    the earlier requests (each its own document; the store keeps generated tokens only). The
    verifier accepts all of it and adds its bonus token, so a cycle commits that length + 1.
    The prefill forward emits ``output[0]``. tau = tokens / forwards, pooled over requests.

    Every source here that copies verbatim from that pool (prompt lookup, suffix, semantic
    chains, and the published SuffixDecoding) proposes chains from the root that occur in it,
    so none can beat this on these outputs at that chain length. Two sources are not bounded
    by it, because what they propose is the model's own past predictions rather than text:
    the token-adjacency branches (top-k successors, up to 6 deep below any node) and the
    rejected-branch pool (argmax at earlier rejected nodes). ``goose`` and ``oilbird`` use
    them, so their tau may in principle exceed this.
    Toy check: one request, prompt [1, 2, 3, 4], output [2, 3, 4, 9]: prefill emits 2; at t=1
    the pool holds [3, 4] after 2 but nothing after 4, so one cycle drafts [3, 4] and its bonus
    commits 9: 4 tokens in 2 forwards, tau 2.0.
    """
    caps = sorted(set(int(c) for c in max_chains))
    earlier = np.zeros(0, dtype=np.int64)        # earlier outputs, SEP after each
    tokens = 0
    forwards = {c: 0 for c in caps}
    for prompt, output in pairs:
        output = [int(x) for x in output]
        if not output:
            continue
        context = np.asarray(list(prompt) + output, dtype=np.int64)
        base = len(prompt)
        # reach[t]: the longest true continuation at t that the pool holds then (no cap); it
        # depends on t only, so every cap below walks its own cycles over the same values
        reach = [0] + [max(longest_prefix_in(earlier, output[t:]),
                           longest_prefix_in(context[:base + t], output[t:]))
                       for t in range(1, len(output))]
        for cap in caps:
            t, f = 1, 1                           # the prefill forward emits output[0]
            while t < len(output):
                t += min(reach[t], cap) + 1
                f += 1
            forwards[cap] += f
        tokens += len(output)
        earlier = np.concatenate([earlier, np.asarray(output + [SEP], dtype=np.int64)])
    return {c: (tokens / forwards[c] if forwards[c] else None) for c in caps}
