"""The identifiability-gap diagnosis (paper section 3), measured on the traffic itself.

    python -m oilbird diagnose --data builtin --out runs/diag-builtin
    python -m oilbird diagnose --data api-bank --limit 60 --max-new-tokens 64 --out runs/diag-api

No drafter is in the loop. The requests are replayed in order; each one is decoded greedily
(the output every lossless method produces), then ONE teacher-forced forward over prompt + output
gives the hidden state at ``lm.state_layer`` at every position. At every generated position t of
request r (the model is about to emit ``output[t]`` after ``context = prompt + output[:t]``) we
ask what a server would have had in its pool at that moment.

**The pool.** Primary (``pool="generated"``, what :class:`oilbird.store.Store` holds): the
generated tokens of every request before r, each with the state at its own position, documents
separated so that nothing matches across a request boundary. The current request is never in
its own pool: neither its prompt nor its own earlier output (that is the per-request sources'
job, not the store's), so ``present`` does not count the current prompt either. Because the
paper's wording is "everything the requests before it contain", the CLI also reports
``pool="full"`` (earlier requests' prompt + output, with the prompt positions' states) under
``pool_full`` in diagnosis.json; the labels are always those of the primary pool.

**Labels at position t** (``../shared/paper/method-notes.md``, "The identifiability-gap diagnosis, precisely"):

* ``present_2`` / ``present_4``: ``output[t:t+k]`` occurs verbatim in the pool. Near the end of
  the output fewer than k tokens remain; then the remaining ones must occur (at the last
  position that is the final token alone).
* exact-match oracle: for suffix lengths L = min(16, longest recurring suffix) down to
  ``min_suffix`` = 2 (the paper's oracle "stops at the two-token key"), collect the distinct
  tokens that follow any occurrence of the L-token suffix of the context in the pool, most
  frequent first (ties: most recent first), until 8 candidates are held; hit if the true next
  token is one of them. All occurrences count (no caps), so this is the strongest such oracle.
  ``match_len`` is the longest suffix of the context that recurs at all (length 1 included).
* ``gap`` = present_2 and oracle miss; ``gap_4`` = present_4 and oracle miss.
* semantic reach: top-8 pool records by cosine of the L2-normalised hidden states (faiss
  ``IndexFlatIP``); hit if a record is followed (in its own document) by the true next token.
* static reach: the same with the model's static input embedding of the token as the key
  (exact ties, i.e. repeats of one token, are broken most-recent-first).
* run behind a recovered gap position: ``run_behind`` = the longest common prefix of a hitting
  neighbour's continuation and the true continuation ``output[t:]`` (best of the hitting
  neighbours, first token included, so >= 1); ``run_available`` = the longest prefix of
  ``output[t:]`` that occurs anywhere in the pool (the verbatim run a neighbour could match).

**Alignment (the off-by-one).** The state at input position i is computed from tokens[..i] and
predicts token i+1. A pool record is (token at i, state at i); its prediction is the token at
i+1. The query for ``output[t]`` is the state at the position of ``context[-1]`` (input index
``len(prompt) - 1 + t``), the state whose LM head emits ``output[t]``. So a neighbour at pool
stream position i is a hit iff ``pool[i + 1] == output[t]``. Toy check: pool document
[A, B, C]; current output [X, B, C]; at t = 2 (true next C) the query is the state at B; the
neighbour is the record of B (pool position 1); pool[2] = C is the hit. The static key uses the
same positions with the token's input embedding instead of the state (key of ``context[-1]``).
This is the diagnosis, queried at every position with no lag. **The drafter's key**
(``semantic_reach_drafter``): at draft time the root's own state is not computed yet, so the
drafter asks with the state one position earlier (input index ``len(prompt) - 2 + t``) among
the records followed by the root, all of them (``SemanticConfig.root_check``); a record at i is a hit
iff ``pool[i + 2] == output[t]``. Not asked at t = 0 (None): the prefill gives output[0].

**Copy oracle** (``copy_oracle_tau`` in diagnosis.json, by tree budget): the tau a perfect
copy drafter would reach on these same outputs, each cycle drafting the longest true
continuation that occurs verbatim in what the copy sources can see (current prompt, the
request's own output so far, earlier requests' outputs), capped at budget - 1 tokens; see
:func:`copy_oracle_tau`. It bounds the tau of every source that copies verbatim (not the
token-adjacency and rejected-branch sources, which replay the model's own predictions).

**Per-position labels** for views, one per output token: ``absent`` (not present_2),
``lexical_hit`` (present and oracle hit), ``gap_recovered`` (gap, semantic hit), ``gap_missed``
(gap, semantic miss). Oracle hits at positions that are not present_2 are labelled ``absent``;
the fractions below are computed from the raw booleans, not from the labels. Beside them, views
get ``drafter_reach`` (the drafter's key's hit, one per output token).

The labelling is pure (:class:`Pool` takes token lists and state arrays); the model only enters
in :func:`diagnose_requests`.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from statistics import median
from typing import Callable, Iterable, Sequence

import faiss
import numpy as np

from ..suffix_index import SEP
from .copy_oracle import copy_oracle_tau, longest_prefix_in

LABELS = ("lexical_hit", "gap_recovered", "gap_missed", "absent")

# Paper, section 3 (API-Bank, Llama-3.1-8B). run_available ~ "a 6.8-token verbatim run behind
# it", run_behind ~ "6.4 matched by the neighbour" (method-notes); semantic_reach_4 ~ "the key
# below reaches 88% of it" (the 4-token gap).
# the oracle and the semantic key of the spec: top-8 candidates, suffixes of 16 tokens backing
# off to 2 (method-notes.md); what diagnosis.json's "settings" records
K, MAX_SUFFIX, MIN_SUFFIX = 8, 16, 2

PAPER_API_BANK = {"present_2": 0.92, "present_4": 0.80, "oracle_miss": 0.13, "gap": 0.068,
                  "gap_4": 0.052, "semantic_reach": 0.81, "semantic_reach_4": 0.88,
                  "static_reach": 0.23, "run_available": 6.8, "run_behind": 6.4,
                  "match_len_gap_median": 1}


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    n = np.linalg.norm(x, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return np.ascontiguousarray(x / n, dtype=np.float32)


class ContinuationTable:
    """Every n-gram (n <= ``max_n``) of the pool documents -> the tokens that follow it.

    ``oilbird.store.SuffixIndex`` answers "where does the longest suffix occur" for one length
    at a time and keeps only recent occurrences (it serves a drafter, so it is capped); the
    oracle needs, for every suffix length, all continuations ranked by count. This table keeps
    exactly that: ``{ngram: {next_token: [count, last_position]}}``; an n-gram that ends a
    document is a key with no continuations (it still counts as recurring).
    """

    def __init__(self, max_n: int = 16):
        self.max_n = max_n
        self.next: dict[tuple, dict[int, list[int]]] = {}
        self._pos = 0

    def add(self, doc: Sequence[int]) -> None:
        doc = [int(t) for t in doc]
        nxt = self.next
        for j in range(len(doc)):
            follow = doc[j + 1] if j + 1 < len(doc) else None
            for n in range(1, min(self.max_n, j + 1) + 1):
                d = nxt.setdefault(tuple(doc[j - n + 1:j + 1]), {})
                if follow is not None:
                    e = d.get(follow)
                    if e is None:
                        d[follow] = [1, self._pos + j]
                    else:
                        e[0] += 1
                        e[1] = self._pos + j
        self._pos += len(doc) + 1

    def __contains__(self, ngram: Sequence[int]) -> bool:
        return tuple(ngram) in self.next

    def longest_match(self, context: Sequence[int]) -> int:
        """Length of the longest suffix of ``context`` (<= max_n) that occurs in the pool."""
        L = 0
        while L < min(self.max_n, len(context)) and tuple(context[len(context) - L - 1:]) in self.next:
            L += 1
        return L

    def candidates(self, context: Sequence[int], k: int = 8, min_len: int = 2,
                   longest: int | None = None) -> list[int]:
        """Up to ``k`` distinct next tokens, longest suffix first, backing off to ``min_len``."""
        if longest is None:
            longest = self.longest_match(context)
        out: list[int] = []
        for L in range(longest, min_len - 1, -1):
            d = self.next.get(tuple(context[len(context) - L:]))
            if not d:
                continue
            for tok, _ in sorted(d.items(), key=lambda kv: (-kv[1][0], -kv[1][1])):
                if tok not in out:
                    out.append(tok)
                    if len(out) >= k:
                        return out
        return out


@dataclass
class RequestDiagnosis:
    """Per-position results for one request (one entry per output token)."""
    request_id: str
    output: list[int]
    present_2: list[bool] = field(default_factory=list)
    present_4: list[bool] = field(default_factory=list)
    oracle_hit: list[bool] = field(default_factory=list)
    match_len: list[int] = field(default_factory=list)
    semantic_hit: list[bool] = field(default_factory=list)     # at every position
    drafter_hit: list[bool | None] = field(default_factory=list)  # the drafter's key (module doc)
    static_hit: list[bool | None] = field(default_factory=list)  # at gap positions, else None
    run_behind: list[int | None] = field(default_factory=list)   # at recovered gap positions
    run_available: list[int | None] = field(default_factory=list)  # at gap positions

    @property
    def gap(self) -> list[bool]:
        return [p and not h for p, h in zip(self.present_2, self.oracle_hit)]

    @property
    def gap_4(self) -> list[bool]:
        return [p and not h for p, h in zip(self.present_4, self.oracle_hit)]

    @property
    def labels(self) -> list[str]:
        out = []
        for p, h, s in zip(self.present_2, self.oracle_hit, self.semantic_hit):
            out.append("absent" if not p else "lexical_hit" if h
                       else "gap_recovered" if s else "gap_missed")
        return out

    def detail(self) -> dict:         # every per-position list, by its name
        return {k: v for k, v in vars(self).items() if k not in ("request_id", "output")}


class Pool:
    """What a server holds before request r: token stream, n-gram table, state index.

    ``static_table`` ([V, d]) is the static key (the model's input embeddings); without it the
    static reach is not measured (None).
    """

    def __init__(self, dim: int, static_table: np.ndarray | None = None, k: int = K,
                 max_suffix: int = MAX_SUFFIX, min_suffix: int = MIN_SUFFIX, mode: str = "generated"):
        if mode not in ("generated", "full"):
            raise ValueError("mode must be 'generated' or 'full'")
        if max_suffix < 4:   # "present" is looked up in the oracle's table of <= max_suffix-grams
            raise ValueError(f"max_suffix must be >= 4 (present_4 reads the same table), not {max_suffix}")
        self.dim, self.k, self.max_suffix, self.min_suffix, self.mode = dim, k, max_suffix, min_suffix, mode
        self.stream: list[int] = []          # pool tokens, SEP between documents
        self.table = ContinuationTable(max_suffix)
        self.index = faiss.IndexFlatIP(dim)
        self.record_pos: list[int] = []      # faiss row -> stream position
        self.static = None if static_table is None else _normalise(static_table)
        self._arr = np.zeros(0, dtype=np.int64)       # stream as an array
        self._rec_tok = np.zeros(0, dtype=np.int64)   # faiss row -> token

    def __len__(self) -> int:
        return len(self.record_pos)

    # -- writing -----------------------------------------------------------------------------
    def add_document(self, tokens: Sequence[int], states: np.ndarray) -> None:
        """Add one document; ``states[i]`` is the state at the position of ``tokens[i]``."""
        tokens = [int(t) for t in tokens]
        states = np.asarray(states)
        if states.shape != (len(tokens), self.dim):
            raise ValueError(f"states shape {states.shape}, expected {(len(tokens), self.dim)}")
        if not tokens:
            return
        start = len(self.stream)
        self.stream.extend(tokens)
        self.stream.append(SEP)
        self.table.add(tokens)
        self.index.add(_normalise(states))
        self.record_pos.extend(range(start, start + len(tokens)))
        self._arr = np.asarray(self.stream, dtype=np.int64)
        self._rec_tok = self._arr[np.asarray(self.record_pos, dtype=np.int64)]

    def add_request(self, prompt: Sequence[int], output: Sequence[int], states: np.ndarray) -> None:
        """Add a finished request. ``states`` has one row per token of prompt + output."""
        P = len(prompt)
        if self.mode == "generated":
            self.add_document(output, np.asarray(states)[P:P + len(output)])
        else:
            self.add_document(list(prompt) + list(output), np.asarray(states)[:P + len(output)])

    # -- reading -----------------------------------------------------------------------------
    def _run(self, p: int, future: Sequence[int]) -> int:
        """Common prefix of the pool stream from ``p`` and ``future`` (stops at SEP)."""
        n = 0
        s = self.stream
        while n < len(future) and p + n < len(s) and s[p + n] == future[n]:
            n += 1
        return n

    def _longest_run(self, future: Sequence[int]) -> int:
        """Longest prefix of ``future`` that occurs anywhere in the pool."""
        return longest_prefix_in(self._arr, future)

    def _static_top(self, token: int) -> list[int]:
        """Stream positions of the top-k records by static-embedding cosine (ties: recent first)."""
        sims = (self.static @ self.static[token])[self._rec_tok]
        k = min(self.k, sims.size)
        kth = np.partition(sims, -k)[-k]
        cand = np.flatnonzero(sims >= kth)
        order = np.lexsort((-cand, -sims[cand]))[:k]
        return [self.record_pos[i] for i in cand[order]]

    @property
    def states(self) -> np.ndarray:
        """The records' normalised states, row r = faiss row r: a view of the index's own array
        (no copy; read it before the pool grows)."""
        return faiss.rev_swig_ptr(self.index.get_xb(), len(self) * self.dim).reshape(len(self), self.dim)

    def followed_top(self, roots: np.ndarray, queries: np.ndarray) -> list[list[int]]:
        """For each (root, unit query): the stream positions of the ``k`` records followed by the
        root nearest the query, best first (ties: older first), all of them ranked (the drafter's
        key: ``drafter_hit``)."""
        pos = np.asarray(self.record_pos, dtype=np.int64)
        nxt = self._arr[pos + 1]          # every document ends in SEP: a record always has a next
        order = np.argsort(nxt, kind="stable")
        ranked = nxt[order]
        X = self.states
        out: list[list[int]] = [[] for _ in range(len(roots))]
        for root in np.unique(roots):
            lo, hi = np.searchsorted(ranked, [root, root + 1])
            if lo == hi:
                continue
            rows = order[lo:hi]
            ts = np.flatnonzero(roots == root)
            sims = queries[ts] @ X[rows].T
            top = np.argsort(-sims, axis=1, kind="stable")[:, :self.k]
            for t, best in zip(ts, top):
                out[t] = pos[rows[best]].tolist()
        return out

    def label(self, request_id: str, prompt: Sequence[int], output: Sequence[int],
              states: np.ndarray) -> RequestDiagnosis:
        """Label every generated position of one request against this pool (not yet added)."""
        prompt = [int(t) for t in prompt]
        output = [int(t) for t in output]
        states = np.asarray(states)
        P, n = len(prompt), len(output)
        if P < 1:
            raise ValueError("the prompt must hold at least one token")
        if states.shape[0] != P + n or states.shape[1] != self.dim:
            raise ValueError(f"states shape {states.shape}, expected {(P + n, self.dim)}")
        d = RequestDiagnosis(request_id, output)
        context = prompt + output
        # semantic neighbours for every position in one batch: query row for output[t] is the
        # state at input index P - 1 + t (the position of context[-1]), see the module doc.
        if len(self) and n:
            k = min(self.k, len(self))
            _, rows = self.index.search(_normalise(states[P - 1:P - 1 + n]), k)
        else:
            rows = np.full((n, 0), -1)
        # the drafter's key: of the records followed by the root, the k nearest the state one
        # position before it (all of them ranked, as the drafter's root check does)
        lagged = (self.followed_top(np.asarray(context[P - 1:P - 1 + n]), _normalise(states[P - 2:P - 2 + n]))
                  if len(self) and n and P >= 2 else [[] for _ in range(n)])
        for t in range(n):
            ctx = context[:P + t]
            p2 = tuple(output[t:t + 2]) in self.table
            p4 = tuple(output[t:t + 4]) in self.table
            m = self.table.longest_match(ctx)
            cands = self.table.candidates(ctx, self.k, self.min_suffix, longest=m) if m >= self.min_suffix else []
            hit = output[t] in cands
            # neighbour record at stream position i is followed by stream[i + 1]
            nbrs = [self.record_pos[r] for r in rows[t] if r >= 0]
            sem = [i for i in nbrs if self.stream[i + 1] == output[t]]
            d.present_2.append(p2)
            d.present_4.append(p4)
            d.oracle_hit.append(hit)
            d.match_len.append(m)
            d.semantic_hit.append(bool(sem))
            # None at t = 0: no drafter drafts output[0] (the prefill gives it), so it is not counted
            d.drafter_hit.append(any(self.stream[i + 2] == output[t] for i in lagged[t]) if t else None)
            gap = p2 and not hit
            if gap and self.static is not None and len(self):
                st = self._static_top(ctx[-1])
                d.static_hit.append(any(self.stream[i + 1] == output[t] for i in st))
            else:
                d.static_hit.append(None)
            d.run_available.append(self._longest_run(output[t:]) if gap else None)
            d.run_behind.append(max(self._run(i + 1, output[t:]) for i in sem) if gap and sem else None)
        return d


def _frac(num: int, den: int) -> float | None:
    return num / den if den else None


def summarise(diags: Iterable[RequestDiagnosis]) -> dict:
    """The fractions of diagnosis.json (positions pooled over requests)."""
    diags = list(diags)
    P2, P4, H, G, G4, S, ST, RB, RA, ML_G, ML_H, DR = ([] for _ in range(12))
    g_start = 0
    for d in diags:
        P2 += d.present_2
        P4 += d.present_4
        H += d.oracle_hit
        S += d.semantic_hit
        for t, (g, g4) in enumerate(zip(d.gap, d.gap_4)):
            G.append(g)
            G4.append(g4)
            if g:
                g_start += t < 2
                ML_G.append(d.match_len[t])
                DR += [] if d.drafter_hit[t] is None else [d.drafter_hit[t]]     # positions a drafter drafts
                if d.static_hit[t] is not None:
                    ST.append(d.static_hit[t])
                if d.semantic_hit[t]:
                    RB.append(d.run_behind[t])
                    RA.append(d.run_available[t])
            if d.oracle_hit[t]:
                ML_H.append(d.match_len[t])
    n = len(P2)
    gap_sem = [s for s, g in zip(S, G) if g]
    gap4_sem = [s for s, g in zip(S, G4) if g]
    return {
        "n_requests": len(diags), "n_positions": n,
        "present_2": _frac(sum(P2), n), "present_4": _frac(sum(P4), n),
        "oracle_miss": _frac(n - sum(H), n), "gap": _frac(sum(G), n), "gap_4": _frac(sum(G4), n),
        "semantic_reach": _frac(sum(gap_sem), len(gap_sem)),
        "semantic_reach_4": _frac(sum(gap4_sem), len(gap4_sem)),
        "static_reach": _frac(sum(ST), len(ST)),
        "run_behind": _frac(sum(RB), len(RB)), "run_available": _frac(sum(RA), len(RA)),
        "semantic_hit_all": _frac(sum(S), n),
        "semantic_reach_drafter": _frac(sum(DR), len(DR)),
        "match_len_gap_median": median(ML_G) if ML_G else None,
        "match_len_hit_median": median(ML_H) if ML_H else None,
        "n_gap": sum(G), "n_gap_4": sum(G4), "n_recovered": len(RB),
        # share of the gap at a request's first two outputs, where the context's suffix is the
        # chat template (which the generated-only pool never holds)
        "gap_first2_share": _frac(g_start, sum(G)),
    }


def diagnose_sequences(seqs: Iterable[tuple[str, Sequence[int], Sequence[int], np.ndarray]], dim: int,
                       static_table: np.ndarray | None = None, mode: str = "generated",
                       **pool_kw) -> list[RequestDiagnosis]:
    """Pure replay: ``(request_id, prompt, output, states[len(prompt)+len(output), dim])`` in order."""
    pool = Pool(dim, static_table, mode=mode, **pool_kw)
    out = []
    for rid, prompt, output, states in seqs:
        out.append(pool.label(rid, prompt, output, states))
        pool.add_request(prompt, output, states)
    return out


# -- with the model ----------------------------------------------------------------------------
def teacher_forced(lm, ids: list[int], output: list[int]) -> tuple[np.ndarray, float]:
    """States at ``lm.state_layer`` for every token of ids + output, and the fraction of output
    tokens the teacher-forced argmax reproduces (a check of the alignment: ~1.0)."""
    import torch
    seq = list(ids) + list(output)
    with torch.inference_mode():
        x = torch.tensor([seq], device=lm.device)
        out = lm.model(input_ids=x, output_hidden_states=True, logits_to_keep=len(output) + 1)
        states = out.hidden_states[lm.state_layer][0].float().cpu().numpy()
        # logits row j is for input index len(ids) - 1 + j, which predicts output[j]
        am = out.logits[0, :len(output)].argmax(-1).cpu().tolist()
    agree = sum(a == b for a, b in zip(am, output)) / max(1, len(output))
    return states, agree


def static_embeddings(lm) -> np.ndarray:
    return lm.model.get_input_embeddings().weight.detach().float().cpu().numpy()


def diagnose_requests(requests, lm, max_new_tokens: int, modes: Sequence[str] = ("generated",),
                      outputs: dict[str, list[int]] | None = None, progress: bool = True,
                      on_request: Callable[[dict], None] | None = None) -> dict:
    """Replay ``requests`` in order with the model; returns ``{"diags": {mode: [...]}, ...}``
    (and gives the same for the requests so far to ``on_request`` after each one).

    ``outputs`` maps request ids to already-known greedy outputs (e.g. from lossless traces);
    one is used only if it is complete (ends in EOS or has ``max_new_tokens`` tokens) and the
    teacher-forced argmax reproduces every token of it (then it *is* the greedy output); the
    others are decoded here with the library's autoregressive greedy decoder.
    """
    from tqdm import tqdm

    from ..data.requests import encode_requests
    from ..decoding import autoregressive
    from ..verifier import Verifier
    encoded = encode_requests(lm, requests, max_new_tokens)
    verifier = Verifier(lm)
    eos = lm.eos_token_ids
    static = static_embeddings(lm)
    dim = int(lm.model.config.hidden_size)
    pools = {m: Pool(dim, static, mode=m) for m in modes}
    diags: dict[str, list[RequestDiagnosis]] = {m: [] for m in modes}
    agree: list[tuple[float, int]] = []       # (matches, positions) per request
    texts: dict[str, list[str]] = {}
    pairs: list[tuple[list[int], list[int]]] = []
    for req, ids in tqdm(encoded, desc="diagnose", unit="req", disable=not progress, file=sys.stderr):
        out = (outputs or {}).get(req.id)
        states = None
        if out is not None:
            out = list(out)[:max_new_tokens]
            complete = len(out) == max_new_tokens or (out and out[-1] in eos)
            states, a = teacher_forced(lm, ids, out) if complete and out else (None, 0.0)
            if a < 1.0:        # not the greedy output (or cut short): decode it here instead
                out, states = None, None
        if out is None:
            out = autoregressive(verifier, ids, max_new_tokens).output_ids
        if states is None:
            states, a = teacher_forced(lm, ids, out)
        agree.append((a * len(out), len(out)))        # (matches, positions)
        texts[req.id] = [lm.tokenizer.decode([t]) for t in out]
        pairs.append((ids, list(out)))
        for m, pool in pools.items():
            diags[m].append(pool.label(req.id, ids, out, states))
            pool.add_request(ids, out, states)
        if on_request is not None:
            on_request(_so_far(diags, texts, pairs, agree))
    return _so_far(diags, texts, pairs, agree)


def _so_far(diags, texts, pairs, agree) -> dict:
    return {"diags": diags, "texts": texts, "pairs": pairs,
            "teacher_forced_agreement": agreement(agree)}


def agreement(counts: list[tuple[float, int]]) -> float | None:
    """The share of positions where the argmax is the output's token, over every request's
    ``(matches, positions)`` (a ratio of sums: a long output weighs as its positions do)."""
    n = sum(c[1] for c in counts)
    return sum(c[0] for c in counts) / n if n else None


ROWS = [("present_2", "present (next 2)", "%"), ("present_4", "present (next 4)", "%"),
        ("oracle_miss", "oracle misses", "%"), ("gap", "gap", "%"), ("gap_4", "gap (4 tokens)", "%"),
        ("semantic_reach", "semantic reach (of gap)", "%"),
        ("semantic_reach_4", "semantic reach (of gap_4)", "%"),
        ("semantic_reach_drafter", "... by the drafter's key (of gap)", "%"),
        ("static_reach", "static reach (of gap)", "%"),
        ("run_available", "verbatim run behind", "n"), ("run_behind", "run matched by neighbour", "n"),
        ("match_len_gap_median", "longest match at gap (median)", "n")]


def format_gap_table(summary: dict, full: dict | None = None) -> str:
    def f(v, kind):
        if v is None:
            return "-"
        return f"{100 * v:.1f}%" if kind == "%" else f"{v:.1f}"
    head = f"{'':32s} {'ours':>8s}" + (f" {'full pool':>10s}" if full else "") + f" {'paper (API-Bank)':>17s}"
    rows = [head]
    for key, name, kind in ROWS:
        line = f"{name:32s} {f(summary.get(key), kind):>8s}"
        if full:
            line += f" {f(full.get(key), kind):>10s}"
        rows.append(line + f" {f(PAPER_API_BANK.get(key), kind):>17s}")
    rows.append(f"positions {summary['n_positions']}, requests {summary['n_requests']}, "
                f"gap positions {summary['n_gap']}, recovered {summary['n_recovered']}")
    return "\n".join(rows)


def build_report(res: dict, meta: dict) -> dict:
    diags = res["diags"]["generated"]
    report = {**meta, "pool": "generated", **summarise(diags),
              "teacher_forced_agreement": res["teacher_forced_agreement"],
              "paper_api_bank": PAPER_API_BANK}
    if "full" in res["diags"]:
        report["pool_full"] = summarise(res["diags"]["full"])
    if res.get("pairs"):
        # keyed by tree budget (chain cap + 1): what a perfect copy drafter's tau would be
        report["copy_oracle_tau"] = {str(c + 1): v for c, v in copy_oracle_tau(res["pairs"]).items()}
    report["requests"] = [d.request_id for d in diags]
    report["labels"] = {d.request_id: d.labels for d in diags}
    report["output_text"] = {d.request_id: res["texts"][d.request_id] for d in diags}
    report["detail"] = {d.request_id: d.detail() for d in diags}
    return report


def diagnose_run(requests, lm, max_new_tokens: int, meta: dict | None = None,
                 checkpoint: Callable[[dict], None] | None = None) -> dict:
    """The ``diagnose`` command's report on ``requests`` (both pools, copy-oracle tau), with
    ``meta`` (data, limit, skip) and the pool's own constants recorded beside the numbers.
    ``checkpoint`` (optional) receives the report on the requests so far after each one
    (without copy-oracle tau, which is worked out once, at the end)."""
    meta = {**(meta or {}), "model": lm.name, "max_new_tokens": max_new_tokens,
            "settings": {"k": K, "max_suffix": MAX_SUFFIX, "min_suffix": MIN_SUFFIX,
                         "state_layer": lm.state_layer, "num_layers": lm.num_layers}}
    each = None if checkpoint is None else (lambda res: checkpoint(build_report({**res, "pairs": []}, meta)))
    res = diagnose_requests(requests, lm, max_new_tokens, modes=("generated", "full"), on_request=each)
    return build_report(res, meta)


def summary_lines(report: dict) -> list[str]:
    """What ``diagnose`` and ``replay --diagnose`` print (and ``report``): the table, copy-oracle tau."""
    lines = [format_gap_table(report, report.get("pool_full"))]
    if report.get("copy_oracle_tau"):
        lines.append("tau of a perfect verbatim-copy drafter on these outputs, by tree budget (copy_oracle_tau): "
                     + ", ".join(f"{b} nodes {v:.2f}" for b, v in report["copy_oracle_tau"].items() if v))
    if report.get("teacher_forced_agreement") is not None:
        what = ("the local model's argmax is the recorded token" if report.get("replay")    # replay --diagnose
                else "teacher-forced argmax agrees with greedy")
        lines.append(f"{what} at {100 * report['teacher_forced_agreement']:.2f}% of positions")
    return lines
