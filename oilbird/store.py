"""The cross-request store: one record per committed generated token, with two keys.

Each record is (token id, request, position in that request's output, hidden state). The same
records are addressed two ways:

* lexically, by :class:`~oilbird.suffix_index.PoolSuffixIndex` over the token stream (longest
  suffix of the context that occurs in the pool, with the positions where it occurs);
* semantically, by a faiss inner-product index over the L2-normalised states (= cosine).

A :class:`Store` belongs to one tenant; there is no API that searches across stores. Records of
the request being decoded are buffered and only become searchable when it ends, so a request
never retrieves from itself through the store (its own text is covered by the per-request index
of the suffix and prompt-lookup sources).

A store can run for ever (issue 7):

* **bounded**: ``max_records``, ``max_bytes``, ``max_requests`` and ``max_age_s`` evict whole
  requests, oldest first. Record ids are global and never reused, so an evicted id stays
  invalid; eviction moves the live start of both indexes at once (no dangling positions) and
  the dead prefix is dropped physically once it exceeds ``compact_slack`` of the live part.
* **quantized**: ``state_dtype`` ``"fp16"`` (2 B/dim), ``"int8"`` (1 B/dim, a fixed uniform
  grid on [-1, 1], which an L2-normalised vector never leaves: no training, no clipping, cosine
  error ~0.3/127 per query) or ``"pq"`` (faiss product quantizer, ``pq_m`` bytes per state,
  trained once ``pq_train_size`` states are in; exact fp16 until then).

Knows nothing about files: :mod:`oilbird.store_files` saves and loads a store (through
:meth:`Store.snapshot` / :meth:`Store.from_snapshot`) and keeps one store per tenant
(``StoreRegistry``). Which options a user sets and which only tune is in ``docs/store.md``.
"""
from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass
from typing import Callable

import faiss
import numpy as np

from .errors import InputError
from .state_index import INT8_RANGE, STATE_DTYPES, default_pq_m, index_kind, ivf_rows, new_state_index
from .store_snapshot import Snapshot, check_bounds, check_dim, check_snapshot, check_state_key, plain_bound
from .suffix_index import SEP, Column, PoolSuffixIndex, SuffixIndex

__all__ = ["SEP", "STATE_DTYPES", "PoolSuffixIndex", "Record", "Snapshot", "Store", "StoreError", "SuffixIndex"]



class StoreError(InputError):
    """A store file that cannot be saved or loaded (:mod:`oilbird.store_files`): ``path`` and
    ``reason`` say which and why."""

    def __init__(self, path, reason: str):
        super().__init__(reason, path)

    def __reduce__(self):
        return (type(self), (self.path, self.reason))


@dataclass
class Record:
    """What the store knows about one committed generated token."""
    index: int
    token: int
    request_id: str
    position: int


class Store:
    """One tenant's pool of past generated tokens and their hidden states.

    States are L2-normalised and held once, as codes in the faiss index (``state_dtype``).
    Records are appended per request and committed at ``end_request``; record ids are global
    (``first_record`` .. ``next_record - 1`` are live) and never reused after eviction.

    Capacity and retention (all optional, enforced at every ``end_request`` and ``expire``):
    ``max_records`` live records, ``max_bytes`` live bytes (``record_nbytes`` per record),
    ``max_requests`` live requests, ``max_age_s`` seconds since a request ended (``clock``).
    Whole requests are evicted, oldest first, until every bound holds (a single request
    larger than the capacity is evicted too: the bounds are hard). Evicted data is invisible
    at once and physically dropped when the dead part exceeds ``compact_slack`` x live
    (0 = at every eviction).

    ``index_type="ivf"`` searches ``ivf_nprobe`` of ``ivf_nlist`` clusters instead of every
    state (approximate; for stores of 100k records and more). It and ``"pq"`` need training:
    until ``train_size`` states are in, the store searches them exactly (fp16 for pq, else its
    own dtype), then trains once and moves them over.

    ``state_key`` says whose states these are (:attr:`oilbird.model.LoadedModel.state_key`;
    :func:`oilbird.presets.make_decoder` labels the stores it makes and refuses a labelled store
    of another model or key layer); None leaves the store unlabelled.
    """

    def __init__(self, dim: int, tenant: str = "default", gram: int = 4, *,
                 state_dtype: str = "fp16", max_records: int | None = None,
                 max_bytes: int | None = None, max_requests: int | None = None,
                 max_age_s: float | None = None, compact_slack: float = 0.25,
                 pq_m: int | None = None, pq_nbits: int = 8, pq_train_size: int = 4096,
                 index_type: str = "flat", ivf_nlist: int = 256, ivf_nprobe: int = 16,
                 ivf_train_size: int | None = None, state_key: dict | None = None,
                 clock: Callable[[], float] = time.time):
        dim = check_dim(dim)
        if state_dtype not in STATE_DTYPES:
            raise ValueError(f"state_dtype must be one of {STATE_DTYPES}, not {state_dtype!r}")
        check_bounds(max_records=max_records, max_bytes=max_bytes, max_requests=max_requests,
                      max_age_s=max_age_s)
        self.dim = int(dim)
        self.state_key = check_state_key(state_key)     # whose states these are (LoadedModel.state_key)
        self.tenant = str(tenant)
        self.gram = int(gram)
        self.state_dtype = state_dtype
        self.max_records = plain_bound("max_records", max_records)
        self.max_bytes = plain_bound("max_bytes", max_bytes)
        self.max_requests = plain_bound("max_requests", max_requests)
        self.max_age_s = plain_bound("max_age_s", max_age_s)
        self.compact_slack = float(compact_slack)
        self.pq_m = int(pq_m or default_pq_m(self.dim)) if state_dtype == "pq" else 0
        if self.pq_m and self.dim % self.pq_m:
            raise ValueError(f"pq_m={self.pq_m} must divide dim={self.dim}")
        self.pq_nbits = int(pq_nbits)
        self.pq_train_size = max(int(pq_train_size), 1 << self.pq_nbits)
        if index_type not in ("flat", "ivf"):
            raise ValueError(f"index_type must be 'flat' or 'ivf', not {index_type!r}")
        self.index_type = index_type
        self.ivf_nlist = int(ivf_nlist)
        self.ivf_nprobe = int(ivf_nprobe)
        self.ivf_train_size = max(int(ivf_train_size or 39 * self.ivf_nlist), self.ivf_nlist)
        self.clock = clock
        self.suffix = PoolSuffixIndex(gram=gram)
        # records: global ids; arrays hold ids _rbase .. next_record-1 (a dead prefix may remain)
        self.first_record = 0
        self.next_record = 0
        self._rbase = 0
        self._posn = Column(np.int32)            # record -> position in its request's output
        # requests, oldest first; [_q_live:] are live
        self._q_id: list[str] = []
        self._q_first: list[int] = []             # first record id
        self._q_n: list[int] = []
        self._q_stream: list[int] = []            # stream position of its first token
        self._q_time: list[float] = []            # when it ended (clock)
        self._q_live = 0
        self._q_arrays: tuple = (None,)           # _live_requests' arrays and the state they were read at
        self.requests_seen = 0
        # states: rows of codes in faiss; row j holds record _rbase + _row_rec[j]; rows below
        # _row_live are dead. A flat index numbers its rows 0.., an IVF one _row_base + j.
        self.trained = state_dtype != "pq" and index_type == "flat"
        self.index = new_state_index(self.dim, "fp16" if state_dtype == "pq" else state_dtype,
                                      self.pq_m, self.pq_nbits)
        self._row_rec = Column(np.int32)
        self._row_live = 0
        self._row_base = 0
        self.evicted_records = 0
        self.upkeep_seconds = {"add": 0.0, "evict": 0.0, "compact": 0.0, "train": 0.0}
        # pending records of the request being decoded
        self._pending: list[tuple[int, str, int, np.ndarray | None]] = []

    def config(self) -> dict:
        """The constructor options (what a store file records and restores)."""
        return {"dim": self.dim, "tenant": self.tenant, "gram": self.gram,
                "state_dtype": self.state_dtype, "max_records": self.max_records,
                "max_bytes": self.max_bytes, "max_requests": self.max_requests,
                "max_age_s": self.max_age_s, "compact_slack": self.compact_slack,
                "pq_m": self.pq_m or None, "pq_nbits": self.pq_nbits,
                "pq_train_size": self.pq_train_size, "index_type": self.index_type,
                "ivf_nlist": self.ivf_nlist, "ivf_nprobe": self.ivf_nprobe,
                "ivf_train_size": self.ivf_train_size, "state_key": self.state_key}

    @property
    def train_size(self) -> int:
        """States needed before the target index is trained (0: nothing to train)."""
        n = self.pq_train_size if self.state_dtype == "pq" else 0
        return max(n, self.ivf_train_size if self.index_type == "ivf" else 0)

    def _is_ivf(self) -> bool:
        return isinstance(self.index, faiss.IndexIVF)

    def __len__(self) -> int:
        return self.next_record - self.first_record

    def __repr__(self) -> str:
        return (f"Store(tenant={self.tenant!r}, dim={self.dim}, state_dtype={self.state_dtype!r}, "
                f"records={len(self)}, requests={self.n_requests})")

    @property
    def n_requests(self) -> int:
        return len(self._q_id) - self._q_live

    def record_ids(self) -> range:
        """The live record ids."""
        return range(self.first_record, self.next_record)

    # -- sizes -----------------------------------------------------------------------------------
    @property
    def state_nbytes(self) -> int:
        """Bytes of one stored state (the code) in the current representation."""
        return int(self.index.code_size)

    @property
    def record_nbytes(self) -> int:
        """Live bytes per record in the target representation: state code, row map (4),
        position (4), token (4) and ``gram`` n-gram entries (12 each). ``max_bytes`` uses it.
        (A PQ store reaches this once trained; before, it holds fp16 states.)"""
        code = {"fp16": 2 * self.dim, "int8": self.dim,
                "pq": (self.pq_m * self.pq_nbits + 7) // 8}[self.state_dtype]
        # IVF lists (and flat PQ, kept in one IVF list) store an id per code
        ids = 8 if self.index_type == "ivf" or self.state_dtype == "pq" else 0
        return int(code + ids + 4 + 4 + 4 + 12 * self.gram)

    def nbytes(self) -> int:
        """Bytes held now: codes (incl. dead rows not yet compacted), codebooks, arrays as
        allocated, the suffix index and the pending request. (faiss' own vector may reserve
        up to 2x its size; the store bench measures process memory for that.)"""
        b = self.index.ntotal * self.state_nbytes
        if isinstance(self.index, faiss.IndexIVFPQ):
            b += self.index.pq.centroids.size() * 4
        if self._is_ivf():
            b += self.index.ntotal * 8 + self.index.nlist * self.dim * 4
        b += self._row_rec.nbytes + self._posn.nbytes + self.suffix.nbytes()
        b += sum(len(r) + 48 for r in self._q_id) + 40 * len(self._q_id)
        b += sum(16 + (self.dim * 4 if p[3] is not None else 0) for p in self._pending)
        return int(b)

    # -- writing -----------------------------------------------------------------------------
    def add(self, request_id: str, position: int, token: int, state: np.ndarray | None) -> None:
        """Queue one committed token of the current request (state may be None). Records of
        another request are refused until this one ends, so none are lost in a mix."""
        if self._pending and self._pending[-1][1] != str(request_id):
            raise ValueError(f"request {str(request_id)!r} adds records while {self._pending[-1][1]!r} is "
                             f"still queued: end that request first (Store.end_request(), or finish or close "
                             f"the decoder's cycles() of it)")
        if state is not None:
            s = np.asarray(state, dtype=np.float32).reshape(-1)
            if s.shape[0] != self.dim:
                raise ValueError(f"state has {s.shape[0]} dims, the store {self.dim}")
            norm = float(np.linalg.norm(s))
            state = s / norm if norm > 0 and math.isfinite(norm) else None
        self._pending.append((int(token), str(request_id), int(position), state))

    def end_request(self) -> None:
        """Make the queued records of the finished request searchable; apply the bounds."""
        t0 = time.perf_counter()
        if self._pending:
            pend = sorted(self._pending, key=lambda r: r[2])
            start = self.next_record
            n = len(pend)
            with_state = [k for k, p in enumerate(pend) if p[3] is not None]
            r0 = self._row_base + self._row_rec.n if self._is_ivf() else self.index.ntotal   # new rows' ids
            if with_state:      # the steps that can fail (memory, faiss) first: if one raises, the
                vecs = np.stack([pend[k][3] for k in with_state]).astype(np.float32)   # store is as it was
                if self._is_ivf():
                    self.index.add_with_ids(vecs, np.arange(r0, r0 + len(vecs), dtype=np.int64))
                else:
                    self.index.add(vecs)
            try:
                stream = self.suffix.add_document([p[0] for p in pend])
            except BaseException:   # the token index failed: its states come out again, the request stays queued
                if with_state:
                    self.index.remove_ids(faiss.IDSelectorRange(r0, r0 + len(vecs)))
                raise
            self._pending = []
            self._posn.extend([p[2] for p in pend])
            if with_state:
                self._row_rec.extend(np.asarray(with_state, dtype=np.int64) + (start - self._rbase))
            self.next_record += n
            self._q_id.append(pend[0][1])
            self._q_first.append(start)
            self._q_n.append(n)
            self._q_stream.append(stream)
            self._q_time.append(float(self.clock()))
            self.requests_seen += 1
        self.upkeep_seconds["add"] += time.perf_counter() - t0
        if not self.trained and self.index.ntotal - self._row_live >= self.train_size:
            self._train()
        self._enforce()

    def drop_pending(self) -> None:
        """Forget the queued records of the request being decoded (one that failed half-way
        through being stored), so the next request is not refused for it."""
        self._pending = []

    def expire(self, now: float | None = None) -> int:
        """Apply the retention policy now (e.g. from a timer); returns records evicted."""
        return self._enforce(now)

    def _over(self, now: float) -> bool:
        if self.n_requests == 0:
            return False
        if self.max_records is not None and len(self) > self.max_records:
            return True
        if self.max_requests is not None and self.n_requests > self.max_requests:
            return True
        if self.max_bytes is not None and len(self) * self.record_nbytes > self.max_bytes:
            return True
        if self.max_age_s is not None and now - self._q_time[self._q_live] > self.max_age_s:
            return True
        return False

    def _enforce(self, now: float | None = None) -> int:
        t0 = time.perf_counter()
        now = float(self.clock()) if now is None else float(now)
        before = self.first_record
        while self._over(now):
            self.evict_oldest(compact=False)
        evicted = self.first_record - before
        self.upkeep_seconds["evict"] += time.perf_counter() - t0
        if evicted:
            self._maybe_compact()
        return evicted

    def evict_oldest(self, compact: bool = True) -> int:
        """Evict the oldest live request; returns how many records went."""
        if self.n_requests == 0:
            return 0
        q = self._q_live
        self._q_live += 1
        n = self._q_n[q]
        self.first_record = self._q_first[q] + n
        self.evicted_records += n
        self.suffix.evict_before(self._q_stream[q] + n + 1)      # past its separator
        rows = self._row_rec.view()[:self.index.ntotal]
        # (an int32 needle: a Python int would make numpy copy the whole row map to int64)
        self._row_live = int(np.searchsorted(rows, np.int32(self.first_record - self._rbase), side="left"))
        if compact:
            self._maybe_compact()
        return n

    def _maybe_compact(self) -> None:
        dead = self.first_record - self._rbase
        if dead <= 0:
            return
        if dead > self.compact_slack * len(self) or len(self) == 0:
            self.compact()

    def compact(self) -> None:
        """Drop evicted records physically (invisible since their eviction)."""
        t0 = time.perf_counter()
        dead = self.first_record - self._rbase
        if dead > 0:
            if self._row_live:
                off = self._row_base if self._is_ivf() else 0
                self.index.remove_ids(faiss.IDSelectorRange(off, off + self._row_live))
            self._row_rec.drop_front(self._row_live, subtract=dead)
            self._row_base += self._row_live
            self._row_live = 0
            self._posn.drop_front(dead)
            self._rbase = self.first_record
        q = self._q_live
        if q:
            for lst in (self._q_id, self._q_first, self._q_n, self._q_stream, self._q_time):
                del lst[:q]
            self._q_live = 0
        self.suffix.compact()
        self.upkeep_seconds["compact"] += time.perf_counter() - t0

    def _train(self) -> None:
        """Train the target index (PQ codebooks, IVF clusters) on the live staged states and
        move them over; rows keep their numbers."""
        t0 = time.perf_counter()
        self.compact()
        x = self.index.reconstruct_n(0, self.index.ntotal)
        ix = new_state_index(self.dim, self.state_dtype, self.pq_m, self.pq_nbits,
                              self.index_type, self.ivf_nlist, self.ivf_nprobe)
        ix.train(x)
        if self.index_type == "ivf" and self.state_dtype == "int8":
            faiss.copy_array_to_vector(INT8_RANGE, ix.sq.trained)   # the fixed grid, as flat
        if isinstance(ix, faiss.IndexIVF):
            ix.add_with_ids(x, np.arange(self._row_base, self._row_base + len(x), dtype=np.int64))
        else:
            ix.add(x)
        self.index = ix
        self.trained = True
        self.upkeep_seconds["train"] += time.perf_counter() - t0

    # -- reading -----------------------------------------------------------------------------
    def _check(self, i: int) -> int:
        i = int(i)
        if not self.first_record <= i < self.next_record:
            raise KeyError(f"record {i} is not in store '{self.tenant}' (live ids "
                           f"{self.first_record}..{self.next_record - 1}; evicted or never added)")
        return i

    def _request_of(self, i: int) -> int:
        return bisect.bisect_right(self._q_first, i, lo=self._q_live) - 1

    def search(self, query: np.ndarray, k: int = 8, followed_by: int | None = None,
               step: int = 1) -> list[tuple[int, float]]:
        """Top-k live records by cosine with ``query`` (normalised here if it is not already):
        [(record, similarity)]. With ``followed_by``, the top-k of only the records whose token
        ``step`` after, in their own request, is that token (``step`` 0: the record's own token),
        however far down the whole ranking they sit (the semantic key's root check): exact on a
        flat index, and on an IVF one among the ``ivf_nprobe`` lists probed, as its plain search
        is. faiss computes only their similarities; listing them costs O(the token's count)."""
        live = self.index.ntotal - self._row_live
        if live <= 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != self.dim:
            raise ValueError(f"query has {q.shape[1]} dims, the store {self.dim}")
        if followed_by is not None:
            ids = self._rows_followed_by(int(followed_by), int(step))
            if not len(ids):
                return []
            live = len(ids)
        norm = float(np.linalg.norm(q))
        if norm > 0 and abs(norm - 1.0) > 1e-5:     # a unit query (the drafter's) is used as is
            q = q / norm
        kk = min(int(k), live)
        off = self._row_base if self._is_ivf() else 0
        if followed_by is not None:
            sel, keep = self._selector(ids)             # (keep: the array the selector reads)
        else:
            sel = (faiss.IDSelectorRange(off + self._row_live, off + self.index.ntotal)
                   if self._row_live else None)
        if self._is_ivf():
            params = faiss.SearchParametersIVF(sel=sel, nprobe=min(self.ivf_nprobe, self.index.nlist))
        else:
            params = faiss.SearchParameters(sel=sel) if sel is not None else None
        sims, rows = self.index.search(q, kk, params=params)
        rec = self._row_rec.a
        return [(int(rec[r - off]) + self._rbase, float(s)) for r, s in zip(rows[0], sims[0]) if r >= 0]

    def _rows_followed_by(self, token: int, step: int) -> np.ndarray:
        """The index ids of the live records (with a state) whose token ``step`` after, in their
        own request, is ``token``: read off the lexical index's positions of ``token``."""
        if step < 0:
            raise ValueError(f"step must be >= 0, not {step}")
        P = self.suffix.positions_of(token)
        first, n, stream = self._live_requests()
        if not len(P) or not len(first):
            return np.zeros(0, dtype=np.int64)
        q = np.searchsorted(stream, P, side="right") - 1
        ok = q >= 0
        q, P = q[ok], P[ok]
        at = P - stream[q] - step                          # the record's place in its request
        ok = at >= 0
        local = (first[q[ok]] + at[ok] - self._rbase).astype(np.int32)
        rows = self._row_rec.a[:self.index.ntotal]
        if not len(rows) or not len(local):
            return np.zeros(0, dtype=np.int64)
        j = np.minimum(np.searchsorted(rows, local), len(rows) - 1)
        j = j[(rows[j] == local) & (j >= self._row_live)]   # records without a state have no row
        return j.astype(np.int64) + (self._row_base if self._is_ivf() else 0)

    def _selector(self, ids: np.ndarray):
        """A faiss id selector of exactly ``ids``, and the array it reads (keep it alive while
        searching): a bitmap over the flat index's rows, a hash set over an IVF's growing ids."""
        if self._is_ivf():
            ids = np.ascontiguousarray(ids, dtype=np.int64)
            return faiss.IDSelectorBatch(len(ids), faiss.swig_ptr(ids)), ids
        mask = np.zeros(self.index.ntotal, dtype=bool)
        mask[ids] = True
        bits = np.packbits(mask, bitorder="little")
        return faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits)), bits

    def continuation(self, record: int, start: int, depth: int) -> list[int]:
        """Tokens of the same request from ``record + start`` on, at most ``depth`` (none past the
        request's last token, however far ``start`` reaches)."""
        i = self._check(record)
        q = self._request_of(i)
        depth = min(depth, self._q_first[q] + self._q_n[q] - i - start)
        if start < 1 or depth <= 0:
            return []
        return self.suffix.continuation(self._q_stream[q] + i - self._q_first[q] + start - 1, depth)

    def next_tokens(self, records, step: int = 1) -> np.ndarray:
        """The token ``step`` after each record in its own request, -1 past the request's end:
        ``continuation(r, step, 1)`` of many records at once (the semantic key's cut, ``root_widen``);
        ``step`` 0 is the record's own token (a semantic key with ``lag`` 1 compares it)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, not {step}")
        recs = np.asarray(records, dtype=np.int64).reshape(-1)
        if recs.size == 0:
            return np.zeros(0, dtype=np.int64)
        bad = recs[(recs < self.first_record) | (recs >= self.next_record)]
        if bad.size:
            self._check(int(bad[0]))                     # raises, naming the record
        first, n, stream = self._live_requests()
        q = np.searchsorted(first, recs, side="right") - 1
        off = recs - first[q] + int(step)
        ok = (off >= 0) & (off < n[q])
        out = np.full(recs.shape, -1, dtype=np.int64)
        out[ok] = self.suffix.tokens_at(stream[q[ok]] + off[ok])
        return out

    def _live_requests(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The live requests' first record, length and stream position, as arrays; rebuilt
        only when requests came, went or were compacted (the lists are the truth)."""
        key = (id(self._q_first), self._q_live, len(self._q_first), self.requests_seen)
        if self._q_arrays[0] != key:
            lo = self._q_live
            self._q_arrays = (key, *(np.asarray(a[lo:], dtype=np.int64)
                                     for a in (self._q_first, self._q_n, self._q_stream)))
        return self._q_arrays[1:]

    def record(self, i: int) -> Record:
        i = self._check(i)
        q = self._request_of(i)
        return Record(i, self.suffix.token_at(self._q_stream[q] + i - self._q_first[q]),
                      self._q_id[q], int(self._posn.a[i - self._rbase]))

    def context(self, i: int, before: int = 8, after: int = 8) -> tuple[list[int], int]:
        """Tokens around record i within its request, and i's index in that window."""
        i = self._check(i)
        q = self._request_of(i)
        first, n, s = self._q_first[q], self._q_n[q], self._q_stream[q]
        lo, hi = max(first, i - before), min(first + n - 1, i + after)
        return self.suffix.tokens_between(s + lo - first, s + hi - first + 1), i - lo

    @property
    def states(self) -> np.ndarray:
        """States of the live records as stored (decoded), row j = record first_record + j;
        zeros for records without a state. fp16, like the records."""
        out = np.zeros((len(self), self.dim), dtype=np.float16)
        live = self.index.ntotal - self._row_live
        if live > 0 and self._is_ivf():
            ids, x = ivf_rows(self.index)
            local = ids - self._row_base
            keep = local >= self._row_live
            out[self._row_rec.a[local[keep]] + self._rbase - self.first_record] = x[keep]
        elif live > 0:
            x = self.index.reconstruct_n(self._row_live, live)
            recs = self._row_rec.a[self._row_live:self.index.ntotal] + self._rbase - self.first_record
            out[recs] = x
        return out

    # -- what a store file holds (oilbird.store_files writes and reads it) -----------------------
    def states_before(self, stream_positions) -> list[np.ndarray | None]:
        """For each match end position of ``self.suffix``, the stored (decoded, unit) state of the
        record just before it; None where there is none (a request's first token, a record stored
        without a state) or the index cannot hand states back (IVF and trained PQ codes)."""
        out: list[np.ndarray | None] = [None] * len(stream_positions)
        if self._is_ivf() or not len(stream_positions):
            return out
        rows = self._row_rec.a[:self.index.ntotal]
        qs, lo = self._q_stream, self._q_live
        for k, s in enumerate(stream_positions):
            q = bisect.bisect_right(qs, s - 1, lo=lo) - 1
            if q < lo or not qs[q] <= s - 1 < qs[q] + self._q_n[q]:
                continue
            local = self._q_first[q] + (s - 1 - qs[q]) - self._rbase
            j = int(np.searchsorted(rows, np.int32(local)))
            if self._row_live <= j < len(rows) and rows[j] == local:
                out[k] = self.index.reconstruct(j)
        return out

    def snapshot(self) -> Snapshot:
        """The committed records as a :class:`Snapshot`; the request being decoded (queued, not
        yet ended) is left out. Compacts first (invisible to readers). The arrays are views:
        write them out before the store changes again."""
        self.compact()
        return Snapshot(
            config=self.config(),
            state={"first_record": self.first_record, "next_record": self.next_record,
                   "stream_start": self.suffix.start, "stream_end": self.suffix.end,
                   "trained": self.trained, "row_base": self._row_base,
                   "requests_seen": self.requests_seen, "evicted_records": self.evicted_records,
                   "index_kind": index_kind(self.index), "ntotal": int(self.index.ntotal)},
            arrays={"positions": self._posn.view(), "row_rec": self._row_rec.view()[:self.index.ntotal],
                    "tokens": self.suffix.live_tokens(),
                    "q_first": np.asarray(self._q_first, dtype=np.int64),
                    "q_n": np.asarray(self._q_n, dtype=np.int64),
                    "q_stream": np.asarray(self._q_stream, dtype=np.int64),
                    "q_time": np.asarray(self._q_time, dtype=np.float64)},
            request_ids=list(self._q_id), index=self.index)

    @classmethod
    def from_snapshot(cls, snap: Snapshot, clock: Callable[[], float] = time.time) -> "Store":
        """A new store holding ``snap``, checked end to end first (:func:`check_snapshot`: the
        index against the options, the request table against the records, the token stream
        against the request table, the state rows against the records; ValueError with the
        reason otherwise); the suffix index is rebuilt from the tokens rather than trusted."""
        st, arr, q_id = snap.state, snap.arrays, snap.request_ids
        store = cls(clock=clock, **snap.config)
        check_snapshot(snap)
        # everything verified: fill the new object
        q_n, q_stream, s0, toks = arr["q_n"], arr["q_stream"], int(st["stream_start"]), arr["tokens"]
        store.index = snap.index
        store.trained = bool(st["trained"])
        store._row_base = int(st["row_base"])
        store.first_record = store._rbase = int(st["first_record"])
        store.next_record = int(st["next_record"])
        store._posn = Column(np.int32, arr["positions"])
        store._row_rec = Column(np.int32, arr["row_rec"])
        store._q_id = [str(r) for r in q_id]
        store._q_first, store._q_n = arr["q_first"].tolist(), q_n.tolist()
        store._q_stream, store._q_time = q_stream.tolist(), arr["q_time"].tolist()
        store.requests_seen = int(st["requests_seen"])
        store.evicted_records = int(st["evicted_records"])
        store.suffix = PoolSuffixIndex.rebuilt(
            store.gram, s0, (toks[int(q_stream[q]) - s0:int(q_stream[q]) - s0 + int(q_n[q])] for q in range(len(q_id))))
        return store

