"""The whole decoding cycle in one place: draft -> verify -> commit -> record.

Two decoders share the verifier:

* :func:`autoregressive` — the baseline: prefill, then one token per forward.
* :class:`SpeculativeDecoder` — each cycle

  1. **draft**: the drafter builds a tree under the node budget; its root is the newest
     committed token (not yet in the KV cache);
  2. **verify**: one forward over the whole tree (ancestor-only mask);
  3. **commit**: greedy walk (longest path whose tokens equal their parent's argmax) plus
     the bonus token; the KV cache keeps only the accepted nodes;
  4. **record**: sources learn from the verdict; the store receives the accepted tokens with
     the hidden states this same forward computed (no extra forward).

  Stop conditions: an EOS token is committed, or ``max_new_tokens`` are reached (the commit
  is truncated there, so the output is exactly greedy decoding's). Every cycle yields one
  :class:`~oilbird.trace.CycleTrace`.

  **Replay** (:class:`Replay`) is the same cycle with one rule changed in step 3: it accepts
  the longest root path that a recorded output holds, then the recorded next token as the
  bonus. Exact mode still runs every verify forward; fast mode reads the outputs of one
  teacher-forced forward per turn instead (``oilbird.evaluation.replay``).

tau = generated tokens / target forwards, the prefill forward included (AR is exactly 1).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

from .drafter import Drafter
from .model import LoadedModel
from .errors import PromptError
from .store import Store
from .trace import BONUS, CycleTrace, Neighbour, RequestTrace
from .tree import DraftTree, greedy_accept
from .verifier import NodeOutputs, Verifier


def check_prompt(lm: LoadedModel, ids: list[int], max_new_tokens: int) -> None:
    if max_new_tokens < 1:
        raise PromptError(f"max_new_tokens must be at least 1, not {max_new_tokens}.")
    if not ids:
        raise PromptError("The prompt is empty: give a request with some text.")
    limit = int(getattr(lm.model.config, "max_position_embeddings", 0) or 0)
    if limit and len(ids) + max_new_tokens > limit:
        raise PromptError(f"The prompt has {len(ids)} tokens; with max_new_tokens={max_new_tokens} it "
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


@dataclass
class Replay:
    """What a replayed request follows instead of the model (``python -m oilbird replay``).

    recording: the recorded output (a conversation's turn, ending with its end-of-turn token).
    teacher: fast mode: the model's outputs with the recording teacher-forced, one row per
        generated position p from -1 (the last prompt token, row 0) to ``len(recording) - 1``
        (row p + 1), from one forward per turn shared by every method; None: exact mode, where
        every cycle runs its real verify forward.
    """
    recording: list[int]
    teacher: NodeOutputs | None = None


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


class SpeculativeDecoder:
    """Tree-verifying decoder around one drafter and (optionally) one tenant's store.

    The decoder owns the cross-request ``store`` and fills it; the drafter's sources read it.
    ``reuse_prefix``: keep the KV cache of the last request, and prefill only the part of the
    next prompt after it when that prompt starts with it (a conversation's next turn).
    """

    def __init__(self, verifier: Verifier, drafter: Drafter, store: Store | None = None,
                 method: str = "oilbird", trace: bool = True, reuse_prefix: bool = False):
        self.verifier = verifier
        self.drafter = drafter
        self.store = store
        self.method = method
        self.trace = trace
        self.reuse_prefix = reuse_prefix
        self._kept: tuple[list[int], object] | None = None   # (tokens in the cache, the cache)
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
               out: RequestTrace | None = None, replay: Replay | None = None) -> Iterator[CycleTrace]:
        """Decode one request, yielding a trace per cycle; fills ``out`` when given.

        ``replay``: the same cycle with one rule changed: the commit accepts the longest root
        path whose tokens the recording holds, and the recorded next token as the bonus (see
        :class:`Replay`; fast mode runs no forward). ``max_new_tokens`` is then the recording's
        length at most.

        A caller may stop early (``break``, or closing the generator): the request then ends
        there, with what it committed so far stored, as if it had stopped at that length."""
        if replay is not None:
            max_new_tokens = min(max_new_tokens, len(replay.recording))
        fast = replay is not None and replay.teacher is not None
        # fast replay runs no forward: its teacher rows may come from a window past the context
        check_prompt(self.verifier.lm, ids if not fast else ids[:1], max_new_tokens)
        v, drafter, store, tr = self.verifier, self.drafter, self.store, self.trace
        eos = v.lm.eos_token_ids
        generated: list[int] = []
        t0 = time.perf_counter()

        # 1) prefill: one forward over the prompt gives the first token (cycle 0)
        if fast:
            cache, pre = None, _teacher_rows(replay.teacher, 0, 1)
        else:
            cache, pre = v.prefill(ids, self._cache_for(ids) if self.reuse_prefix else None)
        first = int(pre.argmax[-1]) if replay is None else replay.recording[0]
        _, done = _finish(generated, [first], eos, max_new_tokens)
        query_state = pre.states[-1].numpy()
        drafter.start_request(list(ids), request_id)
        # whatever ends the request (its last token, an error, or a caller that stops iterating:
        # the generator is closed), the store and the sources are told, so the next one starts clean
        n_stored = 0   # generated tokens already handed to the store
        try:
            prefix_len = len(ids)
            c0 = CycleTrace(request_id=request_id, method=self.method, cycle=0, prefix_len=0,
                            generated_before=0, bonus=first, committed=[first],
                            committed_text=self._pieces([first]) if tr else [],
                            committed_sources=[[BONUS]],
                            timings={"verify": time.perf_counter() - t0})
            if out is not None:
                out.cycles.append(c0)
            yield c0

            cycle = 0
            while not done:
                cycle += 1
                context = list(ids) + generated
                before = len(generated)
                # 2) draft: a tree rooted at the newest committed token
                t_a = time.perf_counter()
                tree, info = drafter.draft(context, request_id, query_state)
                t_b = time.perf_counter()
                # 3) verify: one forward over the whole tree (fast replay: none)
                res = None if fast else v.verify(cache, prefix_len, tree)
                t_c = time.perf_counter()
                # 4) commit: the longest root path whose tokens equal their parent's argmax (replay:
                #    that the recording holds), plus the bonus; the cache keeps only those nodes
                targets = (res.argmax.tolist() if replay is None
                           else recorded_targets(tree, replay.recording, before))
                accepted, bonus = greedy_accept(tree.tokens, tree.parents, targets)
                if fast:      # what the model says is known on the recorded path alone
                    res = _teacher_rows(replay.teacher, before, len(accepted))
                    path_states = res.states.numpy()
                    argmax = [-1] * len(tree)
                    for j, node in enumerate(accepted):
                        argmax[node] = int(res.argmax[j])
                else:
                    Verifier.commit(cache, prefix_len, accepted)
                    path_states = res.states.numpy()[accepted]
                    argmax = res.argmax.tolist()
                new = [tree.tokens[i] for i in accepted[1:]] + [bonus]
                appended, done = _finish(generated, new, eos, max_new_tokens)
                prefix_len += len(accepted)
                t_d = time.perf_counter()
                # 5) record: store the states of the tokens this forward committed; sources learn
                if store is not None:
                    # the root is generated token (before - 1); accepted node j is token before-1+j
                    for j, node in enumerate(accepted):
                        pos = before - 1 + j
                        if pos == n_stored and pos < len(generated):
                            store.add(request_id, pos, tree.tokens[node], path_states[j])
                            n_stored += 1
                query_state = path_states[-1]
                drafter.update(tree, res, accepted, list(ids) + generated, request_id, info,
                               root_index=len(ids) + before - 1, targets=targets,
                               verified=accepted if fast else None)
                t_e = time.perf_counter()

                c = CycleTrace(request_id=request_id, method=self.method, cycle=cycle,
                               prefix_len=prefix_len - len(accepted), generated_before=before,
                               bonus=bonus, accepted=accepted, committed=appended,
                               lexical_match_len=info.lexical_match_len, adjacency_row=info.adjacency_row,
                               store_records=len(store) if store is not None else None,
                               semantic_muted=info.semantic_muted, retrieval=info.retrieval,
                               retrieval_floor=info.retrieval_floor,
                               timings={"draft": t_b - t_a, "verify": t_c - t_b,
                                        "commit": t_d - t_c, "update": t_e - t_d})
                node_sources = [sorted(s) for s in tree.sources]
                c.committed_sources = ([node_sources[i] for i in accepted[1:]] + [[BONUS]])[:len(appended)]
                # the tree itself is cheap to keep; text, scores and neighbours only when tracing
                c.tokens = list(tree.tokens)
                c.parents = list(tree.parents)
                c.sources = node_sources
                c.argmax = argmax
                if tr:
                    c.depths = tree.depths()
                    c.scores = [dict(s) for s in tree.scores]
                    c.token_text = self._pieces(tree.tokens)
                    c.argmax_text = [self.tok.decode([a]) if a >= 0 else "" for a in argmax]
                    c.committed_text = self._pieces(appended)
                    c.neighbours = self._neighbours(info, tree, accepted)
                if out is not None:
                    out.cycles.append(c)
                yield c
        finally:
            self._end_request(request_id, generated, n_stored, out, t0)
            if cache is not None and self.reuse_prefix:
                self._keep(cache, list(ids) + generated)

    def _keep(self, cache, tokens: list[int]) -> None:
        """Keep ``cache`` for the next request, cropped to the committed ``tokens`` it holds (a
        commit cut at EOS or max_new_tokens may leave accepted nodes past them)."""
        held = cache.get_seq_length()
        if held > len(tokens):
            cache.crop(-(held - len(tokens)))
            held = len(tokens)
        self._kept = (tokens[:held], cache)

    def _end_request(self, request_id: str, generated: list[int], n_stored: int,
                     out: RequestTrace | None, t0: float) -> None:
        """However the request ended: the tokens that never got a state (the final bonus) join
        the store's token stream, the store and the sources are told (the sources even if the
        store refused the records), and ``out`` gets the output."""
        try:
            if self.store is not None:
                for pos in range(n_stored, len(generated)):
                    self.store.add(request_id, pos, generated[pos], None)
                self.store.end_request()
        finally:
            self.drafter.end_request(request_id)
            if out is not None:
                out.output_ids = list(generated)
                out.output_text = self._pieces(generated) if self.trace else []
                out.meta["seconds"] = time.perf_counter() - t0

    def _neighbours(self, info, tree: DraftTree, accepted: list[int]) -> list[Neighbour]:
        acc = set(accepted)
        out = []
        lexical_first = {tree.tokens[i] for i in range(1, len(tree)) if tree.parents[i] == 0
                         and tree.sources[i] & self.drafter.lexical_names}
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
                why_no_node=nb["why_no_node"]))
        return out

    def run(self, request_id: str, ids: list[int], max_new_tokens: int,
            on_cycle: Callable[[CycleTrace], None] | None = None, replay: Replay | None = None) -> RequestTrace:
        """Decode (or, with ``replay``, replay) one request to the end and return its full trace.

        ``on_cycle`` (optional) is called with every cycle's trace as it is produced
        (e.g. to report progress).
        """
        out = RequestTrace(request_id=request_id, method=self.method, model=self.verifier.lm.name,
                           prompt_ids=list(ids), prompt_text=self.tok.decode(ids) if self.trace else "")
        for c in self.cycles(request_id, ids, max_new_tokens, out, replay=replay):
            if on_cycle is not None:
                on_cycle(c)
        return out
