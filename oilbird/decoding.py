"""The whole decoding cycle in one place: draft -> verify -> commit -> record.

Two decoders share the verifier:

* :func:`autoregressive` — the baseline: prefill, then one token per forward.
* :class:`SpeculativeDecoder` — after (1) the **prefill** of the prompt, which gives the first
  token, each cycle (the numbers are those of the comments in :meth:`SpeculativeDecoder.cycles`)

  2. **draft**: the drafter builds a tree under the node budget; its root is the newest
     committed token (not yet in the KV cache);
  3. **verify**: one forward over the whole tree (ancestor-only mask), then the greedy walk
     (:func:`~oilbird.tree.greedy_accept`: the longest path whose tokens equal their parent's
     argmax) and the bonus token; the KV cache keeps only the accepted nodes
     (:meth:`~oilbird.verifier.Verifier.commit`);
  4. **commit**: the accepted tokens and the bonus join the output, cut at EOS or
     ``max_new_tokens`` (so the output is exactly greedy decoding's);
  5. **record**: sources learn from the verdict; the accepted tokens and the hidden states this
     same forward computed (no extra forward) are queued for the store, which receives them
     when the request ends (:mod:`oilbird.request_records`: a request never retrieves itself).

  Stop conditions: an EOS token is committed, or ``max_new_tokens`` are reached. Every cycle
  yields one :class:`~oilbird.trace.CycleTrace`.

  Step 3 asks one object, the **judge**, for the verdict on the tree (a
  :class:`~oilbird.verdict.TreeVerdict`): :class:`Greedy` (live, the default) runs the forward,
  walks the argmax and commits the cache; :class:`Replay` accepts the longest root path that a recorded output
  holds, then the recorded next token as the bonus (exact mode still runs every verify forward;
  fast mode reads the outputs of one teacher-forced forward per turn, ``oilbird.evaluation.replay``).

tau = generated tokens / target forwards, the prefill forward included (AR is exactly 1).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from .drafter import Drafter
from .errors import ContextError, PromptError
from .model import LoadedModel
from .sampling import decisions_per_node
from .request_records import RequestRecords
from .store import Store
from .trace import BONUS, CycleTrace, Neighbour, RequestTrace, lexical_first_tokens
from .tree import DraftTree, greedy_accept
from .verdict import TreeVerdict
from .verifier import NodeOutputs, Verifier


def check_prompt(lm: LoadedModel, ids: list[int], max_new_tokens: int) -> None:
    if max_new_tokens < 1:
        raise PromptError(f"max_new_tokens must be at least 1, not {max_new_tokens}.")
    if not ids:
        raise PromptError("The prompt is empty: give a request with some text.")
    limit = int(getattr(lm.model.config, "max_position_embeddings", 0) or 0)
    if limit and len(ids) + max_new_tokens > limit:
        raise ContextError(f"The prompt has {len(ids)} tokens; with max_new_tokens={max_new_tokens} it "
                          f"exceeds the model's context of {limit} tokens. Shorten it or lower max_new_tokens.")


@dataclass
class DecodeResult:
    """One request decoded by one method: what every bench runner returns.

    ``output_ids``: the generated ids (named as in :class:`~oilbird.trace.RequestTrace`); ``forwards``: target forwards, prefill included;
    ``seconds``: wall time, prefill included; ``prefill_seconds``: the prefill alone (0.0 where
    the method cannot time it apart); ``trace``: the cycle trace, for methods that keep one.
    """
    output_ids: list[int]
    forwards: int
    seconds: float
    prefill_seconds: float = 0.0
    trace: RequestTrace | None = None

    @property
    def tau(self) -> float:
        return len(self.output_ids) / max(1, self.forwards)


def _finish(tokens: list[int], new: list[int], eos: set[int], max_new: int) -> tuple[list[int], bool]:
    """Append ``new`` to ``tokens`` up to EOS (kept) or ``max_new``; return (appended, done)."""
    appended = []
    for t in new:
        if len(tokens) >= max_new:
            return appended, True
        tokens.append(t)
        appended.append(t)
        if t in eos:
            return appended, True
    return appended, len(tokens) >= max_new


PRICE_DIGITS = 4       # significant figures of the fill's prices in a trace (CycleTrace.prices, Neighbour.left_out)


def _rounded(price: float | None) -> float | None:
    """A price kept to :data:`PRICE_DIGITS` significant figures (a deep path's is small, not 0)."""
    return None if price is None else float(f"{price:.{PRICE_DIGITS}g}")


def _stop(generated: list[int], eos: set[int]) -> str:
    """Why a finished output ended (:data:`oilbird.trace.STOP_REASONS`): EOS, or the token limit."""
    return "eos" if generated and generated[-1] in eos else "limit"


def autoregressive(verifier: Verifier, ids: list[int], max_new_tokens: int) -> DecodeResult:
    """Plain greedy decoding with the KV cache: one forward per token."""
    check_prompt(verifier.lm, ids, max_new_tokens)
    eos = verifier.lm.eos_token_ids
    t0 = time.perf_counter()
    cache, out = verifier.prefill(ids)
    t_prefill = time.perf_counter() - t0
    tokens: list[int] = []
    forwards = 1
    _, done = _finish(tokens, [int(out.argmax[-1])], eos, max_new_tokens)
    while not done:
        nxt = verifier.step(cache, tokens[-1])
        forwards += 1
        _, done = _finish(tokens, [nxt], eos, max_new_tokens)
    return DecodeResult(tokens, forwards, time.perf_counter() - t0, t_prefill)


class Greedy:
    """The live judge: the verifier's argmax decides (greedy decoding, lossless).

    Every judge answers the same questions for the cycle (:meth:`SpeculativeDecoder.cycles`):
    ``limit`` (how many tokens the request may produce), ``start`` (the prefill: the cache, the
    first token and the query state for the first draft) and ``verdict`` (one tree's outcome,
    with the KV cache left holding the prefix and the accepted nodes); ``meta``: what the
    request's trace must say of how it was judged (the decoder writes it, so no view draws a
    sampled trace as greedy because a caller forgot to say so); and ``runs_model``: whether its
    verdicts run the model's forwards (the prompt must then fit the model's context).
    """
    runs_model = True

    def meta(self) -> dict:
        return {}

    def limit(self, max_new_tokens: int) -> int:
        return max_new_tokens

    def start(self, v: Verifier, ids: list[int], cache) -> tuple[object, int, np.ndarray]:
        cache, pre = v.prefill(ids, cache)
        return cache, int(pre.argmax[-1]), pre.states[-1].numpy()

    def verdict(self, v: Verifier, cache, prefix_len: int, tree: DraftTree, before: int) -> TreeVerdict:
        res = v.verify(cache, prefix_len, tree)                  # one forward over the whole tree
        targets = res.argmax.tolist()
        accepted, bonus = greedy_accept(tree.tokens, tree.parents, targets)
        Verifier.commit(cache, prefix_len, accepted)             # keep only the accepted nodes
        return outputs_verdict(accepted, bonus, targets, res)


def outputs_verdict(accepted: list[int], bonus: int, targets: list[int], res: NodeOutputs,
                    seen: list[int] | None = None) -> TreeVerdict:
    """A :class:`~oilbird.verdict.TreeVerdict` over the verifier's outputs (rows of ``seen``)."""
    return TreeVerdict(accepted, bonus, targets, seen, res.argmax.numpy(), res.topk_ids.numpy(),
                       res.topk_probs.numpy(), res.states.numpy())


@dataclass
class Replay:
    """The replay judge (``python -m oilbird replay``): the recording decides, not the model.

    recording: the recorded output (a conversation's turn, ending with its end-of-turn token).
    teacher: fast mode: the model's outputs with the recording teacher-forced, one row per
        generated position p from -1 (the last prompt token, row 0) to ``len(recording) - 1``
        (row p + 1), from one forward per turn shared by every method; the cycle then runs no
        forward and knows the outputs on the recorded path alone. None: exact mode, where every
        cycle runs its real verify forward.
    """
    recording: list[int]
    teacher: NodeOutputs | None = None

    @property
    def runs_model(self) -> bool:    # fast mode reads the teacher's rows instead
        return self.teacher is None

    def limit(self, max_new_tokens: int) -> int:
        return min(max_new_tokens, len(self.recording))

    def meta(self) -> dict:          # replay() adds what only it knows (conversation, whose recording)
        return {"replay": {"mode": "exact" if self.teacher is None else "fast"}}

    def start(self, v: Verifier, ids: list[int], cache) -> tuple[object, int, np.ndarray]:
        if self.teacher is not None:
            return None, self.recording[0], self.teacher.states[0].numpy()
        cache, pre = v.prefill(ids, cache)
        return cache, self.recording[0], pre.states[-1].numpy()

    def verdict(self, v: Verifier, cache, prefix_len: int, tree: DraftTree, before: int) -> TreeVerdict:
        targets = recorded_targets(tree, self.recording, before)
        accepted, bonus = greedy_accept(tree.tokens, tree.parents, targets)
        if self.teacher is None:
            res = v.verify(cache, prefix_len, tree)
            Verifier.commit(cache, prefix_len, accepted)
            return outputs_verdict(accepted, bonus, targets, res)
        return outputs_verdict(accepted, bonus, targets, _teacher_rows(self.teacher, before, len(accepted)),
                               seen=accepted)


def recorded_targets(tree: DraftTree, recording: list[int], before: int) -> list[int]:
    """Replay's stand-in for the verifier's argmax: at a node of depth d, the recorded token
    that follows it on the recorded path (the root is generated token ``before - 1``); -1 past
    the recording's end. :func:`~oilbird.tree.greedy_accept` over these accepts the longest
    root path that the recording holds, and the recorded next token as the bonus.

    >>> recorded_targets(DraftTree([5, 6, 9], [-1, 0, 0]), [4, 5, 6, 7], 2)
    [6, 7, 7]
    """
    at = [before + d for d in tree.depths()]
    return [recording[i] if i < len(recording) else -1 for i in at]


def _teacher_rows(teacher: NodeOutputs, before: int, n: int) -> NodeOutputs:
    """Fast replay: the teacher-forced outputs of the ``n`` nodes of an accepted path whose root
    is generated token ``before - 1`` (row ``before``, see :class:`Replay`)."""
    rows = slice(before, before + n)
    return NodeOutputs(teacher.argmax[rows], teacher.topk_ids[rows], teacher.topk_probs[rows],
                       teacher.states[rows])


def _store_of(drafter: Drafter, store: Store | None) -> Store | None:
    """The store a decoder fills: ``store``, or the one its sources read when none is given;
    ValueError where a source reads another store than the decoder's (it would never see what
    the decoder stores)."""
    read = {id(s.store): (s.name, s.store) for s in drafter.sources if isinstance(getattr(s, "store", None), Store)}
    if store is None and len(read) == 1:
        return next(iter(read.values()))[1]
    if store is None and len(read) > 1:
        names = " and ".join(repr(name) for name, _ in read.values())
        raise ValueError(f"draft sources {names} read different stores, and a decoder fills one: build the "
                         f"sources over one store (oilbird.presets.make_sources)")
    other = next((name for name, st in read.values() if st is not store), None)
    if other is not None:
        raise ValueError(f"draft source {other!r} reads another store than the decoder fills: build the "
                         f"sources over the store you give the decoder (oilbird.presets.make_sources)")
    return store


class SpeculativeDecoder:
    """Tree-verifying decoder around one drafter and (optionally) one tenant's store.

    The decoder owns the cross-request ``store`` and fills it; the drafter's sources read it.
    ``reuse_prefix``: keep the KV cache of the last request, and prefill only the part of the
    next prompt after it when that prompt starts with it (a conversation's next turn).
    ``method``: the name its traces carry (a preset's, :func:`oilbird.presets.make_decoder`);
    without one, the sources' names in brackets, e.g. ``[pld+mine]``, which no view mistakes for a
    preset (they read what a preset drafts from its name: the key, a tree). Without ``store``, the
    store the drafter's sources read (the semantic key's, the suffix index's) is the one it fills:
    a decoder that filled none would leave their store empty for good.
    """

    def __init__(self, verifier: Verifier, drafter: Drafter, store: Store | None = None,
                 method: str | None = None, trace: bool = True, reuse_prefix: bool = False):
        self.verifier = verifier
        self.drafter = drafter
        self.store = _store_of(drafter, store)
        if drafter.vocab_size is None:       # every proposed token id is checked against it
            drafter.vocab_size = int(getattr(verifier.lm.model.config, "vocab_size", 0) or 0) or None
        self.method = method or "[" + "+".join(s.name for s in drafter.sources) + "]"
        self.trace = trace
        self.reuse_prefix = reuse_prefix
        self._kept: tuple[list[int], object] | None = None   # (tokens in the cache, the cache)
        self._open: str | None = None           # the request being decoded (one at a time)
        self.tok = verifier.lm.tokenizer

    def _pieces(self, ids) -> list[str]:
        return [self.tok.decode([int(i)]) for i in ids]

    def _cache_for(self, ids: list[int]):
        """The kept cache if ``ids`` starts with what it holds (else None, and it is dropped)."""
        kept, self._kept = self._kept, None
        if kept is not None and kept[0] == list(ids[: len(kept[0])]):
            return kept[1]
        return None

    def cycles(self, request_id: str, ids: list[int], max_new_tokens: int,
               out: RequestTrace | None = None, judge=None) -> Iterator[CycleTrace]:
        """Decode one request, yielding a trace per cycle; fills ``out`` when given.

        ``judge`` gives the verdict on each tree: :class:`Greedy` (the default: live, lossless)
        or :class:`Replay` (a recording decides; fast mode runs no forward), or
        :class:`oilbird.sampled.Sampled`; its ``meta()`` goes into ``out.meta``. A caller may stop
        early (``break``, or closing the generator): the request then ends there, with what it
        committed so far stored, as if it had stopped at that length."""
        if self._open is not None:    # the sources follow one request at a time
            raise ValueError(f"request {request_id!r} starts while {self._open!r} is still being decoded: "
                             f"finish or close the decoder's cycles() of it first")
        self._open = request_id       # claimed before the prefill: another request is refused during it
        try:
            judge = judge or Greedy()
            max_new_tokens = judge.limit(max_new_tokens)
            if out is not None:          # (a judge of one's own may leave meta out)
                out.meta.update(getattr(judge, "meta", dict)())
                # the views count these as exact match (oilbird.trace.lexical_sources)
                out.meta["lexical_sources"] = sorted(self.drafter.lexical_names)
                # the tree it drafted into: why a neighbour got no node depends on the fill
                out.meta["tree"] = {"budget": self.drafter.cfg.budget, "fill": self.drafter.cfg.fill}
            # fast replay runs no forward: its teacher rows may come from a window past the context
            # (a judge of one's own that does not say runs the model, as the live one does)
            check_prompt(self.verifier.lm, ids if getattr(judge, "runs_model", True) else ids[:1], max_new_tokens)
            v, drafter = self.verifier, self.drafter
            generated: list[int] = []
            t0 = time.perf_counter()
            # 1) prefill: one forward over the prompt gives the first token (cycle 0)
            cache, first, query_state = judge.start(v, ids, self._cache_for(ids) if self.reuse_prefix else None)
            t_prefill = time.perf_counter() - t0        # the forward alone: the drafter's setup is not in it
            eos = v.lm.eos_token_ids
            _, done = _finish(generated, [first], eos, max_new_tokens)
            drafter.start_request(list(ids), request_id)
        except BaseException:         # nothing was stored or drafted yet: the decoder is free again
            self._open = None
            raise
        # whatever ends the request (its last token, an error, or a caller that stops iterating:
        # the generator is closed), the store and the sources are told, so the next one starts clean
        records = RequestRecords(request_id)    # generated tokens (with states) for the store
        try:
            yield self._record(out, CycleTrace(
                request_id=request_id, method=self.method, cycle=0, prefix_len=0, generated_before=0,
                bonus=first, committed=[first], committed_text=self._pieces([first]) if self.trace else [],
                committed_sources=[[BONUS]], timings={"verify": t_prefill},
                stop=_stop(generated, eos) if done else None))
            prefix_len, cycle = len(ids), 0
            while not done:
                cycle, before = cycle + 1, len(generated)
                t_a = time.perf_counter()
                # 2) draft: a tree rooted at the newest committed token
                tree, info = drafter.draft(list(ids) + generated, request_id, query_state)
                t_b = time.perf_counter()
                # 3) verify: the judge's verdict on the whole tree (live, Greedy.verdict: one
                #    forward, greedy_accept, and Verifier.commit keeps only the accepted nodes' cache)
                verdict = judge.verdict(v, cache, prefix_len, tree, before)
                t_c = time.perf_counter()
                # 4) commit: the accepted path and the bonus, cut at EOS or max_new_tokens
                new = [tree.tokens[i] for i in verdict.accepted[1:]] + [verdict.bonus]
                appended, done = _finish(generated, new, eos, max_new_tokens)
                t_d = time.perf_counter()
                # 5) record: the states this forward computed are queued for the store (it gets them
                #    when the request ends); the sources learn
                path_states = verdict.path_states()
                records.record(generated, before - 1, path_states)   # the root is token before - 1
                query_state = path_states[-1]
                drafter.update(tree, verdict, info, list(ids) + generated, request_id,
                               root_index=len(ids) + before - 1)
                t_e = time.perf_counter()
                # (the KV cache keeps only the accepted nodes inside the judge's verdict: "verify"
                # counts it; "commit" is the output's bookkeeping)
                timings = {"draft": t_b - t_a, "verify": t_c - t_b, "commit": t_d - t_c, "update": t_e - t_d}
                c = self._cycle_trace(request_id, cycle, prefix_len, before, tree, info, verdict, appended, timings)
                c.stop = _stop(generated, eos) if done else None
                yield self._record(out, c)
                prefix_len += len(verdict.accepted)
        finally:
            if out is not None:
                out.stop = _stop(generated, eos) if done else "stopped"
            self._open = None
            self._end_request(request_id, generated, records, out, t0)
            if cache is not None and self.reuse_prefix:
                self._keep(cache, list(ids) + generated)

    @staticmethod
    def _record(out: RequestTrace | None, c: CycleTrace) -> CycleTrace:
        if out is not None:
            out.cycles.append(c)
        return c

    def _cycle_trace(self, request_id: str, cycle: int, prefix_len: int, before: int, tree: DraftTree,
                     info, verdict: TreeVerdict, appended: list[int], timings: dict) -> CycleTrace:
        """The cycle's trace: the tree is cheap to keep; text, scores and neighbours only when tracing."""
        accepted, node_sources = verdict.accepted, [sorted(s) for s in tree.sources]
        argmax = verdict.node_argmax(len(tree))
        c = CycleTrace(request_id=request_id, method=self.method, cycle=cycle, prefix_len=prefix_len,
                       generated_before=before, bonus=verdict.bonus, accepted=accepted, committed=appended,
                       lexical_match_len=info.lexical_match_len, adjacency_row=info.adjacency_row,
                       store_records=len(self.store) if self.store is not None else None,
                       semantic_muted=info.semantic_muted, retrieval=info.retrieval,
                       retrieval_floor=info.retrieval_floor, timings=timings,
                       committed_sources=([node_sources[i] for i in accepted[1:]] + [[BONUS]])[:len(appended)],
                       tokens=list(tree.tokens), parents=list(tree.parents), sources=node_sources,
                       argmax=argmax)
        if info.prices is not None:         # (rounded: a trace file holds them for every cycle)
            c.prices, c.fill_bar = [_rounded(p) for p in info.prices.nodes], _rounded(info.prices.bar)
            c.fill_from = info.prices.start
        if verdict.decisions is not None:   # sampled: what decided each tried node (oilbird.sampling)
            c.decided_prob, c.residual_mass = decisions_per_node(verdict.decisions, len(tree))
        if self.trace:
            c.depths = tree.depths()
            c.scores = [dict(s) for s in tree.scores]
            c.token_text = self._pieces(tree.tokens)
            c.argmax_text = [self.tok.decode([a]) if a >= 0 else "" for a in argmax]
            c.committed_text = self._pieces(appended)
            c.neighbours = self._neighbours(info, tree, accepted)
        return c

    def _keep(self, cache, tokens: list[int]) -> None:
        """Keep ``cache`` for the next request, cropped to the committed ``tokens`` it holds (a
        commit cut at EOS or max_new_tokens may leave accepted nodes past them)."""
        held = cache.get_seq_length()
        if held > len(tokens):
            cache.crop(-(held - len(tokens)))
            held = len(tokens)
        self._kept = (tokens[:held], cache)

    def _end_request(self, request_id: str, generated: list[int], records: RequestRecords,
                     out: RequestTrace | None, t0: float) -> None:
        """However the request ended: its output joins the store as one request (the tokens that
        never got a state, such as the final bonus, with none), the sources are told (even if the
        store refused the records), and ``out`` gets the output."""
        try:
            if self.store is not None:
                records.close(self.store, generated)
        finally:
            self.drafter.end_request(request_id)
            if out is not None:
                out.output_ids = list(generated)
                out.output_text = self._pieces(generated) if self.trace else []
                out.meta["seconds"] = time.perf_counter() - t0

    def _neighbours(self, info, tree: DraftTree, accepted: list[int]) -> list[Neighbour]:
        """The trace's nearest neighbours, from what the drafter recorded of each retrieved record
        (``info.neighbours``: :class:`~oilbird.sources.base.LookedUp`)."""
        acc = set(accepted)
        out = []
        lexical_first = lexical_first_tokens(tree.tokens, tree.parents, tree.sources,
                                             self.drafter.lexical_names)
        for nb in info.neighbours:
            ctx, at = (self.store.context(nb["record"]) if self.store is not None else ([], 0))
            walked = nb.get("walked", [])
            out.append(Neighbour(
                record=nb["record"], request_id=nb["request_id"], position=nb["position"],
                similarity=nb["similarity"], proposed=nb["proposed"],
                proposed_text=self._pieces(nb["proposed"]), context_text=self._pieces(ctx),
                context_index=at, paid_nodes=nb.get("paid", []), walked_nodes=walked,
                accepted=sum(1 for n in walked if n in acc),
                lexical_reachable=bool(nb["proposed"]) and nb["proposed"][0] in lexical_first,
                why_no_node=nb["why_no_node"], withheld=nb.get("withheld"), agreement=nb.get("agreement"),
                left_out=_rounded(nb.get("left_out"))))
        return out

    def run(self, request_id: str, ids: list[int], max_new_tokens: int,
            on_cycle: Callable[[CycleTrace], None] | None = None, judge=None) -> RequestTrace:
        """Decode one request to the end (``judge``: see :meth:`cycles`) and return its full trace.

        ``on_cycle`` (optional) is called with every cycle's trace as it is produced
        (e.g. to report progress); when it returns True the request stops there, as a caller that
        stops iterating :meth:`cycles` (its trace says ``stop="stopped"``).
        """
        out = RequestTrace(request_id=request_id, method=self.method, model=self.verifier.lm.name,
                           prompt_ids=list(ids), prompt_text=self.tok.decode(ids) if self.trace else "")
        gen = self.cycles(request_id, ids, max_new_tokens, out, judge=judge)
        try:
            for c in gen:
                if on_cycle is not None and on_cycle(c) is True:
                    break
        finally:
            gen.close()               # ends the request now: the store and the sources are told
        return out
