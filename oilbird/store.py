"""The cross-request store: one record per committed generated token, with two keys.

Each record is (token id, request, position in that request's output, hidden state). The same
records are addressed two ways:

* lexically, by :class:`SuffixIndex` over the token stream (longest suffix of the context that
  occurs in the pool, with the positions where it occurs);
* semantically, by a faiss inner-product index over the L2-normalised states (= cosine).

A :class:`Store` belongs to one tenant; there is no API that searches across stores. Records of
the request being decoded are buffered and only become searchable when it ends, so a request
never retrieves from itself through the store (its own text is covered by the per-request index
of the suffix and prompt-lookup sources).
"""
from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

SEP = -1  # separates requests in a token stream; never matches, never proposed


class SuffixIndex:
    """Exact-match index over a token stream: n-grams (n <= ``gram``) -> end positions.

    ``match`` finds, for the longest suffix of a context that occurs in the stream (up to
    ``max_len`` tokens), every occurrence and its match length; continuations are read from
    the stream after each occurrence. Lengths above ``gram`` are found by extending the
    ``gram``-gram hits backwards, so the index costs ``gram`` entries per token.

    Example: stream [5, 6, 7, 5, 6, 8]; context [9, 5, 6] -> longest suffix that occurs is
    [5, 6] (length 2) at end positions 1 and 4; continuations [7, 5, 6, 8] and [8].
    """

    def __init__(self, gram: int = 4, max_positions: int = 256):
        self.gram = gram
        self.max_positions = max_positions
        self.tokens: list[int] = []
        self._grams: list[dict[tuple, list[int]]] = [dict() for _ in range(gram + 1)]

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, tokens: list[int]) -> None:
        """Append tokens (use ``SEP`` between documents) and index the new n-grams."""
        toks = self.tokens
        for t in tokens:
            toks.append(int(t))
            p = len(toks) - 1
            if t == SEP:
                continue
            for n in range(1, self.gram + 1):
                if p - n + 1 < 0:
                    break
                g = tuple(toks[p - n + 1:p + 1])
                if g[0] == SEP:
                    break
                lst = self._grams[n].setdefault(g, [])
                lst.append(p)
                if len(lst) > 2 * self.max_positions:   # keep the most recent occurrences
                    del lst[:self.max_positions]

    def truncate(self, length: int) -> None:
        """Drop everything from ``length`` on (used when a request's index is rebuilt)."""
        if length >= len(self.tokens):
            return
        self.tokens = self.tokens[:length]
        for n in range(1, self.gram + 1):
            for g in list(self._grams[n]):
                lst = [p for p in self._grams[n][g] if p < length]
                if lst:
                    self._grams[n][g] = lst
                else:
                    del self._grams[n][g]

    def _extend_back(self, context: list[int], p: int, n: int, max_len: int) -> int:
        toks = self.tokens
        L = n
        while L < max_len and p - L >= 0 and len(context) - 1 - L >= 0:
            t = toks[p - L]
            if t == SEP or t != context[-1 - L]:
                break
            L += 1
        return L

    def match(self, context: list[int], max_len: int = 16, min_len: int = 1,
              exclude_from: int | None = None, limit: int = 64) -> list[tuple[int, int]]:
        """Occurrences of suffixes of ``context``, longest first.

        Returns ``[(end_position, match_len), ...]`` sorted by match length, then recency,
        for the longest n (<= gram) whose n-gram occurs; match lengths beyond ``gram`` are
        exact (extended backwards up to ``max_len``). Positions ``>= exclude_from`` are
        skipped (e.g. the context's own end in a per-request index). Empty if nothing matches.
        """
        for n in range(min(self.gram, len(context)), min_len - 1, -1):
            lst = self._grams[n].get(tuple(context[-n:]))
            if not lst:
                continue
            hits = []
            for p in reversed(lst[-limit:]):
                if exclude_from is not None and p >= exclude_from:
                    continue
                L = self._extend_back(context, p, n, max_len) if n == self.gram else n
                hits.append((p, L))
            if hits:
                hits.sort(key=lambda h: (-h[1], -h[0]))
                return hits
        return []

    def continuation(self, end_position: int, depth: int) -> list[int]:
        """Up to ``depth`` tokens after ``end_position``, stopping at a document boundary."""
        out = []
        toks = self.tokens
        for q in range(end_position + 1, min(len(toks), end_position + 1 + depth)):
            if toks[q] == SEP:
                break
            out.append(toks[q])
        return out


@dataclass
class Record:
    """What the store knows about one committed generated token."""
    index: int
    token: int
    request_id: str
    position: int


class Store:
    """One tenant's pool of past generated tokens and their hidden states.

    ``states`` are kept L2-normalised in fp16 (the record); the faiss index holds float32
    copies for search. Records are appended per request and committed at ``end_request``.
    """

    def __init__(self, dim: int, tenant: str = "default", gram: int = 4):
        if dim < 1:
            raise ValueError("dim must be >= 1")
        self.dim = dim
        self.tenant = tenant
        self.tokens: list[int] = []          # record -> token
        self.request_of: list[str] = []      # record -> request id
        self.position_of: list[int] = []     # record -> position in that request's output
        self._states = np.zeros((0, dim), dtype=np.float16)
        self.has_state: list[bool] = []
        self.index = faiss.IndexFlatIP(dim)
        self._faiss_ids: list[int] = []      # faiss row -> record
        self.suffix = SuffixIndex(gram=gram)
        self._stream_pos: list[int] = []     # record -> position in suffix stream
        self._record_at: dict[int, int] = {}  # suffix stream position -> record
        # pending records of the request being decoded
        self._pending: list[tuple[int, str, int, np.ndarray | None]] = []

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def states(self) -> np.ndarray:
        return self._states[: len(self.tokens)]

    def nbytes(self) -> int:
        """Bytes held for records (tokens + fp16 states + faiss copies)."""
        return int(len(self.tokens) * (4 + 8) + self._states[: len(self.tokens)].nbytes
                   + self.index.ntotal * self.dim * 4)

    # -- writing -----------------------------------------------------------------------------
    def add(self, request_id: str, position: int, token: int, state: np.ndarray | None) -> None:
        """Queue one committed token of the current request (state may be None)."""
        if state is not None:
            s = np.asarray(state, dtype=np.float32).reshape(-1)
            norm = float(np.linalg.norm(s))
            state = s / norm if norm > 0 else None
        self._pending.append((int(token), request_id, int(position), state))

    def end_request(self) -> None:
        """Make the queued records of the finished request searchable."""
        if not self._pending:
            return
        pend = sorted(self._pending, key=lambda r: r[2])
        self._pending = []
        start = len(self.tokens)
        n = len(pend)
        if self._states.shape[0] < start + n:
            grow = max(start + n, 2 * self._states.shape[0], 1024)
            new = np.zeros((grow, self.dim), dtype=np.float16)
            new[:start] = self._states[:start]
            self._states = new
        with_state = []
        stream_start = len(self.suffix)
        for k, (tok, rid, pos, st) in enumerate(pend):
            r = start + k
            self.tokens.append(tok)
            self.request_of.append(rid)
            self.position_of.append(pos)
            self._stream_pos.append(stream_start + k)
            self._record_at[stream_start + k] = r
            self.has_state.append(st is not None)
            if st is not None:
                self._states[r] = st
                with_state.append(r)
        self.suffix.extend([p[0] for p in pend] + [SEP])
        if with_state:
            vecs = self._states[with_state].astype(np.float32)
            self.index.add(vecs)
            self._faiss_ids.extend(with_state)

    # -- reading -----------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int = 8) -> list[tuple[int, float]]:
        """Top-k records by cosine with ``query`` (normalised): [(record, similarity)]."""
        if self.index.ntotal == 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        sims, rows = self.index.search(q, min(k, self.index.ntotal))
        return [(self._faiss_ids[r], float(s)) for r, s in zip(rows[0], sims[0]) if r >= 0]

    def continuation(self, record: int, start: int, depth: int) -> list[int]:
        """Tokens of the same request from ``record + start`` on, at most ``depth``."""
        p = self._stream_pos[record]
        toks = self.suffix.continuation(p + start - 1, depth) if start >= 1 else []
        return toks

    def record(self, i: int) -> Record:
        return Record(i, self.tokens[i], self.request_of[i], self.position_of[i])

    def context(self, i: int, before: int = 8, after: int = 8) -> tuple[list[int], int]:
        """Tokens around record i within its request, and i's index in that window."""
        rid = self.request_of[i]
        lo = i
        while lo > 0 and i - lo < before and self.request_of[lo - 1] == rid:
            lo -= 1
        hi = i
        while hi + 1 < len(self.tokens) and hi - i < after and self.request_of[hi + 1] == rid:
            hi += 1
        return self.tokens[lo:hi + 1], i - lo
