"""The faiss index over the store's hidden states: one empty inner-product index per state
representation (fp16, int8, product quantization), flat or IVF, and what can be read back
out of one. Knows nothing of requests, tokens or suffixes (:mod:`oilbird.store` does).
"""
from __future__ import annotations

import faiss
import numpy as np

STATE_DTYPES = ("fp16", "int8", "pq")


def default_pq_m(dim: int) -> int:
    """The largest divisor of ``dim`` that is <= dim / 8 (72 sub-quantizers at d = 576)."""
    target = max(1, dim // 8)
    return max(m for m in range(1, target + 1) if dim % m == 0)


INT8_RANGE = np.array([-1.0, 2.0], dtype=np.float32)   # (vmin, vdiff): the grid on [-1, 1]


def new_state_index(dim: int, kind: str, pq_m: int = 0, pq_nbits: int = 8,
                     index_type: str = "flat", nlist: int = 256, nprobe: int = 16):
    """An empty faiss inner-product index for one state representation.

    ``flat`` scans every code (exact up to the codes); ``ivf`` scans the ``nprobe`` of
    ``nlist`` clusters nearest to the query (needs training; codes are not residuals, so an
    int8 code is the same on either index)."""
    SQ = faiss.ScalarQuantizer
    IP = faiss.METRIC_INNER_PRODUCT
    if kind not in STATE_DTYPES:
        raise ValueError(f"state_dtype must be one of {STATE_DTYPES}, not {kind!r}")
    if index_type == "flat":
        if kind == "fp16":
            return faiss.IndexScalarQuantizer(dim, SQ.QT_fp16, IP)
        if kind == "int8":
            ix = faiss.IndexScalarQuantizer(dim, SQ.QT_8bit_uniform, IP)
            # a fixed grid on [-1, 1]: a unit vector's components never leave it: no training
            faiss.copy_array_to_vector(INT8_RANGE, ix.sq.trained)
            ix.is_trained = True
            return ix
        # PQ codes in a one-list IVF: the same exhaustive ADC scan as IndexPQ (same results,
        # as fast), but it takes a search-time id selector, so eviction can stay lazy
        # (IndexPQ would need an O(N) remove_ids at every eviction), for 8 B of id per code
        return new_state_index(dim, kind, pq_m, pq_nbits, "ivf", 1, 1)
    if index_type == "ivf":
        quantizer = faiss.IndexFlatIP(dim)
        if kind == "pq":
            ix = faiss.IndexIVFPQ(quantizer, dim, nlist, pq_m, pq_nbits, IP)
            ix.by_residual = False
            ix.pq.cp.niter = 12
        else:
            qt = SQ.QT_fp16 if kind == "fp16" else SQ.QT_8bit_uniform
            ix = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, qt, IP, False)
        ix.cp.niter = 12
        ix.nprobe = nprobe
        return ix
    raise ValueError(f"index_type must be 'flat' or 'ivf', not {index_type!r}")


def index_kind(ix) -> str:
    """Which representation a (deserialised) faiss index holds: fp16 / int8 / pq, ivf-...
    (a one-list IVF scans everything: it is the flat kind)."""
    pre = "ivf-" if isinstance(ix, faiss.IndexIVF) and ix.nlist > 1 else ""
    if isinstance(ix, (faiss.IndexPQ, faiss.IndexIVFPQ)):
        return pre + "pq"
    if isinstance(ix, (faiss.IndexScalarQuantizer, faiss.IndexIVFScalarQuantizer)):
        qt = ix.sq.qtype
        if qt == faiss.ScalarQuantizer.QT_fp16:
            return pre + "fp16"
        if qt == faiss.ScalarQuantizer.QT_8bit_uniform:
            return pre + "int8"
    return type(ix).__name__


def ivf_rows(ix) -> tuple[np.ndarray, np.ndarray]:
    """(ids, decoded vectors) of everything in an IVF index, list by list."""
    il = ix.invlists
    ids, codes = [np.zeros(0, np.int64)], [np.zeros((0, il.code_size), np.uint8)]
    for lst in range(ix.nlist):
        n = il.list_size(lst)
        if n:
            ids.append(faiss.rev_swig_ptr(il.get_ids(lst), n).copy())
            codes.append(faiss.rev_swig_ptr(il.get_codes(lst), n * il.code_size).copy()
                         .reshape(n, il.code_size))
    c = np.concatenate(codes)
    dec = ix.pq.decode(c) if isinstance(ix, faiss.IndexIVFPQ) else ix.sq.decode(c)
    return np.concatenate(ids), dec.reshape(len(c), ix.d)
