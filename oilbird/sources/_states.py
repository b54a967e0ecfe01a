"""The stored state behind a lexical match: which of the pool's occurrences of the context is
*this* one (issue 25's identifiability, used by :class:`~oilbird.sources.suffix.SuffixSource`
with ``state_temp``).

The store's suffix index says where the context's suffix recurs in the pool stream; the faiss
index holds the state of every record. For a match ending at stream position p (the token that
plays the root) the comparable state is that of the record at p - 1: the query state is the
context's token before the root (``DraftContext.query_state``). Reads the store's request table
and row map (:class:`~oilbird.store.Store`); knows nothing about sources or trees.
"""
from __future__ import annotations

import bisect

import numpy as np

from ..store import Store


def states_before(store: Store, stream_positions) -> list[np.ndarray | None]:
    """For each match end position of ``store.suffix``, the stored (decoded, unit) state of the
    record just before it; None where there is none (a request's first token, a record stored
    without a state) or the index cannot hand states back (IVF and trained PQ codes)."""
    out: list[np.ndarray | None] = [None] * len(stream_positions)
    if store._is_ivf() or not len(stream_positions):
        return out
    rows = store._row_rec.a[:store.index.ntotal]
    qs, lo = store._q_stream, store._q_live
    for k, s in enumerate(stream_positions):
        q = bisect.bisect_right(qs, s - 1, lo=lo) - 1
        if q < lo or not qs[q] <= s - 1 < qs[q] + store._q_n[q]:
            continue
        local = store._q_first[q] + (s - 1 - qs[q]) - store._rbase
        j = int(np.searchsorted(rows, np.int32(local)))
        if store._row_live <= j < len(rows) and rows[j] == local:
            out[k] = store.index.reconstruct(j)
    return out


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
