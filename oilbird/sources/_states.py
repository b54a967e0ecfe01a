"""The stored state behind a lexical match: which of the pool's occurrences of the context is
*this* one (issue 25's identifiability, used by :class:`~oilbird.sources.suffix.SuffixSource`
with ``state_temp``).

The store's suffix index says where the context's suffix recurs in the pool stream; the faiss
index holds the state of every record. For a match ending at stream position p (the token that
plays the root) the comparable state is that of the record at p - 1: the query state is the
context's token before the root (``DraftContext.query_state``); the store hands those states
back (:meth:`oilbird.store.Store.states_before`). Knows nothing about sources or trees.
"""
from __future__ import annotations

import numpy as np


def occurrence_weights(sims: list[float | None], temp: float) -> list[float]:
    """Multipliers of the occurrences' evidence: ``exp((sim - best) / temp)`` for those with a
    state (the most similar keeps its weight, the others fade by how much less similar they
    are), 1 for those without one (the current request's own text).

    >>> [round(w, 3) for w in occurrence_weights([0.9, 0.8, None], 0.05)]
    [1.0, 0.135, 1.0]
    """
    known = [s for s in sims if s is not None]
    if not known:
        return [1.0] * len(sims)
    best = max(known)
    return [1.0 if s is None else float(np.exp((s - best) / temp)) for s in sims]
