"""A store's committed records as plain parts (:class:`Snapshot`: what a store file holds,
:meth:`Store.snapshot <oilbird.store.Store.snapshot>`) and the checks one passes before a store
is built from it (:func:`check_snapshot`, :meth:`Store.from_snapshot
<oilbird.store.Store.from_snapshot>`), and what a store's bounds may be (:func:`check_bounds`),
so that a file can hold them. Knows nothing of files (:mod:`oilbird.store_files`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import faiss
import numpy as np

from .state_index import index_kind, ivf_rows
from .suffix_index import SEP


def check_dim(dim) -> int:
    """A store's state size: a whole number >= 1 (ValueError otherwise), as a plain int."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim (the model's hidden size) must be a whole number >= 1, not {str(dim)[:40]!r}")
    return int(dim)


def check_bounds(**bounds) -> None:
    """A Store's bounds: None (no bound), or a finite number >= 0 (``max_age_s``, seconds) or a
    whole number from 0 to 2**63 - 1 (the counts ``max_records``, ``max_bytes``,
    ``max_requests``), so that a store file can always hold them and load them back."""
    for k, v in bounds.items():
        if v is None:
            continue
        count = k != "max_age_s"
        kinds = (int, np.integer) if count else (int, float, np.integer, np.floating)
        if isinstance(v, bool) or not isinstance(v, kinds) or not (0 <= v < 2 ** 63 and math.isfinite(v)):
            raise ValueError(f"{k} must be {'a whole number' if count else 'a finite number of seconds'} "
                             f">= 0 (None: no bound), not {v!r}")


# what a store's ``state_key`` holds (oilbird.model.LoadedModel.state_key): the fields that must
# agree for two models' states to be comparable, and the name, which only messages show
KEY_FIELDS = {"model_type": str, "num_hidden_layers": int, "state_layer": int}


def default_state_layer(num_layers: int) -> int:
    """The hidden-state layer the semantic key reads unless told otherwise: round(0.85 L), the
    paper's (docs/results.md, "Which layer's state is the key"); the model loader and the vLLM
    proposer both ask here, so their stores hold the same layer's states."""
    return round(0.85 * num_layers)


def check_state_key(key) -> dict | None:
    """A store's ``state_key``: None (not labelled) or a dict of ``model`` (a name) and
    :data:`KEY_FIELDS`, returned as a plain copy; ValueError otherwise (a hand-edited header)."""
    if key is None:
        return None
    want = dict(KEY_FIELDS, model=str)
    if not isinstance(key, dict) or set(key) != set(want) or any(
            isinstance(key[k], bool) or not isinstance(key[k], t) for k, t in want.items()):
        raise ValueError(f"state_key must be None or a model's LoadedModel.state_key "
                         f"({', '.join(sorted(want))}), not {str(key)[:120]}")
    return {k: t(key[k]) for k, t in want.items()}


def key_mismatch(stored: dict | None, model: dict | None) -> str:
    """Why a store whose states carry ``stored`` cannot serve a model keyed ``model``; "" when
    it can (or when either is unknown: an unlabelled store is checked by its shape alone)."""
    if stored is None or model is None:
        return ""
    if all(stored[k] == model[k] for k in KEY_FIELDS):
        return ""

    def said(k):
        return f"{k['model']} ({k['model_type']}, {k['num_hidden_layers']} layers), key layer {k['state_layer']}"
    return (f"the store holds the states of {said(stored)}, and this model keys with those of {said(model)}: "
            f"a store serves the model and key layer that wrote it")


def plain_bound(k: str, v):
    """A checked bound as a plain Python number (numpy scalars too), as a store keeps it."""
    return None if v is None else float(v) if k == "max_age_s" else int(v)


@dataclass
class Snapshot:
    """A store's committed records as plain parts, what a store file holds: the constructor
    options (``config``), the counters (``state``), the tables (``arrays``: name -> 1-D numpy
    array), the ids of the live requests, and the faiss ``index`` of the states."""
    config: dict
    state: dict
    arrays: dict
    request_ids: list
    index: object


def check_snapshot(snap: Snapshot) -> None:
    """``snap`` checked end to end: the index against the options, the request table against
    the records, the token stream against the request table, the state rows against the
    records. Raises ValueError with the reason otherwise."""
    cfg, st, arr, q_id, index = snap.config, snap.state, snap.arrays, snap.request_ids, snap.index
    kind, dim = index_kind(index), int(cfg["dim"])
    if st["trained"]:
        want = ("ivf-" if cfg["index_type"] == "ivf" else "") + cfg["state_dtype"]
    else:
        want = "fp16" if cfg["state_dtype"] == "pq" else cfg["state_dtype"]
    if kind != want or index.d != dim or index.ntotal != st["ntotal"]:
        raise ValueError(f"state index is {kind} d={index.d} n={index.ntotal}, header says {want} "
                         f"d={dim} n={st['ntotal']}")
    first, nxt = int(st["first_record"]), int(st["next_record"])
    q_first, q_n, q_stream = arr["q_first"], arr["q_n"], arr["q_stream"]
    nq = len(q_id)
    if not (len(q_first) == len(q_n) == len(q_stream) == len(arr["q_time"]) == nq):
        raise ValueError("request table lengths disagree")
    if nq and (q_first[0] != first or np.any(q_first[1:] != q_first[:-1] + q_n[:-1])
               or q_first[-1] + q_n[-1] != nxt or np.any(q_n < 1)):
        raise ValueError("request table does not tile the records")
    if not nq and first != nxt:
        raise ValueError("records without requests")
    s0, s1 = int(st["stream_start"]), int(st["stream_end"])
    toks = arr["tokens"]
    if len(toks) != s1 - s0 or (nq and (q_stream[0] != s0 or np.any(
            q_stream[1:] != q_stream[:-1] + q_n[:-1] + 1))) or int(np.sum(q_n)) + nq != s1 - s0:
        raise ValueError("token stream does not match the request table")
    if nq and (np.any(toks[q_stream - s0 + q_n] != SEP)
               or np.count_nonzero(toks == SEP) != nq):
        raise ValueError("token stream separators are misplaced")
    if len(arr["positions"]) != nxt - first:
        raise ValueError("positions do not match the records")
    rows = arr["row_rec"]
    if len(rows) != index.ntotal or (len(rows) and (rows[0] < 0 or rows[-1] >= nxt - first
                                                     or np.any(np.diff(rows) <= 0))):
        raise ValueError("state rows do not map onto the records")
    row_base = int(st["row_base"])
    if isinstance(index, faiss.IndexIVF) and not np.array_equal(
            np.sort(ivf_rows(index)[0]), np.arange(row_base, row_base + len(rows))):
        raise ValueError("state index ids do not match the rows")
