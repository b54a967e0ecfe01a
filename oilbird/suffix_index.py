"""The two lexical indexes: where does the longest suffix of a context occur in a token stream?

* :class:`SuffixIndex`: a small, mutable per-request index (n-gram -> end positions in dicts),
  used by the per-request sources and by the diagnosis;
* :class:`PoolSuffixIndex`: the same queries over compact, evictable numpy arrays, the lexical
  key of the cross-request :class:`~oilbird.store.Store`.

Both answer ``match(context) -> [(end_position, match_len), ...]`` and
``continuation(end_position, depth)`` identically (tested on random streams). Streams hold
documents separated by :data:`SEP`, which never matches and is never proposed. Knows nothing
about states, requests or files.
"""
from __future__ import annotations

import math

import numpy as np

SEP = -1  # separates requests in a token stream; never matches, never proposed


def extend_back(tokens: list[int], context: list[int], p: int, n: int, max_len: int) -> int:
    """How far back (up to ``max_len``) ``tokens`` ending at ``p`` equals the end of ``context``,
    given that the last ``n`` already do: match lengths beyond an index's longest n-gram."""
    L = n
    while L < max_len and p - L >= 0 and len(context) - 1 - L >= 0:
        t = tokens[p - L]
        if t == SEP or t != context[-1 - L]:
            break
        L += 1
    return L

class SuffixIndex:
    """Exact-match index over a token stream: n-grams (n <= ``gram``) -> end positions.

    ``match`` finds, for the longest suffix of a context that occurs in the stream (up to
    ``max_len`` tokens), every occurrence and its match length; continuations are read from
    the stream after each occurrence. Lengths above ``gram`` are found by extending the
    ``gram``-gram hits backwards, so the index costs ``gram`` entries per token.

    This is the small per-request index; the store's pool uses :class:`PoolSuffixIndex`, which
    answers the same queries in compact arrays and can evict.

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
                L = extend_back(self.tokens, context, p, n, max_len) if n == self.gram else n
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


# -- compact building blocks ------------------------------------------------------------------
_FNV_BASIS = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def _gram_key(tokens) -> int:
    """64-bit FNV-style hash of a token sequence (same as the vectorised one in the index)."""
    h = _FNV_BASIS
    for t in tokens:
        h = ((h ^ (int(t) + 1)) * _FNV_PRIME) & _MASK64
    return h


class Column:
    """A growable 1-D numpy array that can drop a prefix (amortised O(1) append)."""

    def __init__(self, dtype, data=None):
        self.a = np.zeros(0, dtype=dtype) if data is None else np.array(data, dtype=dtype)
        self.n = len(self.a)

    def extend(self, vals) -> None:
        vals = np.asarray(vals)
        k = len(vals)
        if self.n + k > len(self.a):
            new = np.zeros(max(self.n + k, int(1.25 * len(self.a)) + 64), dtype=self.a.dtype)
            new[:self.n] = self.a[:self.n]
            self.a = new
        self.a[self.n:self.n + k] = vals
        self.n += k

    def view(self) -> np.ndarray:
        return self.a[:self.n]

    def drop_front(self, m: int, subtract=None) -> None:
        """Drop the first ``m`` entries (and subtract ``subtract`` from the rest); shrink."""
        rest = self.a[m:self.n].copy()
        if subtract:
            rest -= subtract
        self.a, self.n = rest, len(rest)

    @property
    def nbytes(self) -> int:
        return int(self.a.nbytes)


class PoolSuffixIndex:
    """The store's lexical key: :class:`SuffixIndex`'s queries over compact, evictable arrays.

    The stream holds whole documents (requests) separated by ``SEP``; positions are global and
    only grow. For each n <= ``gram`` the index keeps a sorted array of (hash of the n-gram
    ending at p, p): 12 bytes per token and n, plus 4 bytes of token. New documents go into a
    small sorted run that is merged into the main run when it exceeds ~sqrt(256 main) entries
    (a two-level LSM), so adding a request costs O(sqrt(main)) amortised. Hashes are verified against the stream, so a
    collision can only hide an occurrence, never invent one.

    ``evict_before(p)`` makes everything before stream position ``p`` invisible at once (every
    query filters by the live start); ``compact()`` drops it physically.
    """

    def __init__(self, gram: int = 4):
        self.gram = gram
        self.start = 0      # first live stream position
        self.end = 0        # next stream position
        self._base = 0      # stream position of _toks[0]; stored n-gram positions are relative
        self._toks = Column(np.int32)
        e = [np.zeros(0, np.uint64), np.zeros(0, np.int32)]
        self._main = [list(e) for _ in range(gram + 1)]     # [keys, rel positions] per n
        self._recent = [list(e) for _ in range(gram + 1)]

    def __len__(self) -> int:
        """Live stream length (tokens + separators)."""
        return self.end - self.start

    # -- writing
    def add_document(self, tokens) -> int:
        """Append one document and its separator; returns the document's first position. All or
        nothing: if it raises (memory), the index is as it was."""
        t = np.asarray(tokens, dtype=np.int64)
        first = self.end
        if first + len(t) + 1 - self._base >= 2 ** 31:
            raise OverflowError("stream offset exceeds int32: compact (evict) the store")
        # the runs are rebound, never changed in place (_insert, _maybe_merge): keeping the lists
        # that hold them is enough to go back
        kept = (self.end, self._toks.n, [r[:] for r in self._recent], [r[:] for r in self._main])
        try:
            return self._add(t, first)
        except BaseException:
            self.end, self._toks.n, self._recent, self._main = kept
            raise

    def _add(self, t: np.ndarray, first: int) -> int:
        self._toks.extend(np.append(t, SEP).astype(np.int32))
        self.end += len(t) + 1
        m = len(t)
        if m:
            with np.errstate(over="ignore"):
                h = np.full(m, _FNV_BASIS, dtype=np.uint64)
                tt = (t + 1).astype(np.uint64)
                prime = np.uint64(_FNV_PRIME)
                for n in range(1, min(self.gram, m) + 1):
                    # h_n(p) = (h_{n-1}(p-1) ^ (t_p + 1)) * P for n-grams ending at p >= n-1
                    h = (h[:m - n + 1] ^ tt[n - 1:]) * prime
                    pos = np.arange(first + n - 1 - self._base, first + m - self._base, dtype=np.int32)
                    order = np.argsort(h, kind="stable")
                    self._insert(self._recent[n], h[order], pos[order])
            self._maybe_merge()
        return first

    @staticmethod
    def _insert(run: list, keys: np.ndarray, pos: np.ndarray) -> None:
        # new positions are larger than every stored one, so 'right' keeps (key, pos) order
        at = np.searchsorted(run[0], keys, side="right")
        run[0] = np.insert(run[0], at, keys)
        run[1] = np.insert(run[1], at, pos)

    def _maybe_merge(self, force: bool = False) -> None:
        for n in range(1, self.gram + 1):
            rk, rp = self._recent[n]
            # a run of ~sqrt(256 main) balances inserting into it against merging it
            if len(rk) and (force or len(rk) > max(4096, math.isqrt(256 * len(self._main[n][0])))):
                self._insert(self._main[n], rk, rp)
                self._recent[n] = [rk[:0].copy(), rp[:0].copy()]

    def evict_before(self, position: int) -> None:
        """Everything before ``position`` stops being visible (call with a document start)."""
        self.start = max(self.start, min(int(position), self.end))

    def compact(self) -> None:
        """Drop evicted tokens and n-gram entries; rebase the stored positions."""
        delta = self.start - self._base
        if delta <= 0:
            return
        for runs in (self._main, self._recent):
            for n in range(1, self.gram + 1):
                k, p = runs[n]
                keep = p >= delta
                runs[n] = [k[keep], (p[keep] - delta).astype(np.int32)]
        self._toks.drop_front(delta)
        self._base = self.start

    # -- reading
    def token_at(self, position: int) -> int:
        return int(self._toks.a[position - self._base])

    def tokens_between(self, lo: int, hi: int) -> list[int]:
        return self._toks.a[lo - self._base:hi - self._base].tolist()

    def tokens_at(self, positions: np.ndarray) -> np.ndarray:
        """The tokens at many live stream positions at once."""
        return self._toks.a[np.asarray(positions, dtype=np.int64) - self._base]

    def _lookup(self, n: int, key: int, limit: int) -> np.ndarray:
        """The newest ``limit`` live positions whose n-gram hashes to ``key`` (ascending)."""
        k = np.uint64(key)
        parts = []
        for keys, pos in (self._main[n], self._recent[n]):
            lo = np.searchsorted(keys, k, side="left")
            hi = np.searchsorted(keys, k, side="right")
            if hi > lo:
                parts.append(pos[max(lo, hi - limit):hi])
        if not parts:
            return np.zeros(0, np.int64)
        P = np.concatenate(parts).astype(np.int64) + self._base
        P = P[P >= self.start]
        return P[-limit:]

    def positions_of(self, token: int) -> np.ndarray:
        """Every live stream position that holds ``token``, ascending (the unigram run, checked
        against the stream: a hash collision cannot add a position)."""
        P = self._lookup(1, _gram_key([token]), len(self._toks.a) + 1)
        return P[self.tokens_at(P) == int(token)] if len(P) else P

    def _match_lengths(self, context: list[int], P: np.ndarray, cap: int) -> np.ndarray:
        """For each end position, how many tokens back the stream equals the context."""
        J = np.arange(cap)
        idx = P[:, None] - J[None, :]
        k = min(cap, len(context))
        c = np.full(cap, -2, dtype=np.int64)
        c[:k] = context[::-1][:k]
        valid = (idx >= self.start) & (J[None, :] < k)
        vals = self._toks.a[np.where(valid, idx - self._base, 0)]
        eq = valid & (vals == c[None, :]) & (vals != SEP)
        return np.cumprod(eq, axis=1).sum(axis=1)

    def match(self, context: list[int], max_len: int = 16, min_len: int = 1,
              exclude_from: int | None = None, limit: int = 64) -> list[tuple[int, int]]:
        """Same contract as :meth:`SuffixIndex.match`, over the live part of the stream."""
        if self.end <= self.start:
            return []
        for n in range(min(self.gram, len(context)), max(min_len, 1) - 1, -1):
            P = self._lookup(n, _gram_key(context[-n:]), limit)
            if exclude_from is not None:
                P = P[P < exclude_from]
            if not len(P):
                continue
            M = self._match_lengths(context, P, max(max_len, n))
            ok = M >= n                      # drops hash collisions
            P, M = P[ok], M[ok]
            if not len(P):
                continue
            L = M if n == self.gram else np.full(len(P), n)
            hits = list(zip(P.tolist(), L.tolist()))
            hits.sort(key=lambda h: (-h[1], -h[0]))
            return hits
        return []

    def continuation(self, end_position: int, depth: int) -> list[int]:
        """Up to ``depth`` tokens after ``end_position``, stopping at a document boundary."""
        a = end_position + 1
        if a < self.start or depth <= 0:
            return []
        b = min(self.end, a + depth)
        seg = self._toks.a[a - self._base:b - self._base]
        cut = np.flatnonzero(seg == SEP)
        return (seg[:cut[0]] if len(cut) else seg).tolist()

    def live_tokens(self) -> np.ndarray:
        """The live stream (documents and their separators) as stored: what a store file keeps."""
        return self._toks.view()[self.start - self._base:]

    @classmethod
    def rebuilt(cls, gram: int, start: int, documents) -> "PoolSuffixIndex":
        """An index whose live stream begins at position ``start`` and holds ``documents`` in
        order (how a loaded store gets its index back: rebuilt from the tokens, not trusted)."""
        sx = cls(gram=gram)
        sx.start = sx.end = sx._base = int(start)
        for doc in documents:
            sx.add_document(doc)
        sx._maybe_merge(force=True)
        return sx

    def nbytes(self) -> int:
        b = self._toks.nbytes
        for runs in (self._main, self._recent):
            for n in range(1, self.gram + 1):
                b += runs[n][0].nbytes + runs[n][1].nbytes
        return int(b)
