"""Replay recorded traffic through every drafter: what each one would have bought on it.

    python -m oilbird replay --data agent-builtin --methods ar,goose,oilbird --limit 4

A recorded conversation (``oilbird.data.conversations``) becomes one request per assistant turn:
the prompt is every message before the turn, the recording is the turn itself. Requests are
served as a server would see them, conversation by conversation and turn by turn, one decoder
per method, its store and tables carrying over. Each cycle is the live cycle with one rule
changed (:class:`oilbird.decoding.Replay`): the drafter drafts exactly as live, and the commit
accepts the longest root path the recording holds, then the recorded next token as the bonus.

Two modes, one code path for drafting and acceptance:

* **exact**: every cycle runs its real verify forward of the local model over the tree, so the
  hidden states, store records, the adjacency table's top-k, the rejected pool and the verify
  cost are what they would be live; tokens/s is measured (the local model's cost of these
  outputs). Each turn reuses the KV cache of the conversation so far: only the new messages
  are prefilled.
* **fast** (default): one teacher-forced forward per turn, shared by every method, gives the
  hidden states and outputs at the recorded positions; drafting and acceptance then cost no
  forward. What fast mode cannot see: the outputs at rejected nodes. So the adjacency table
  learns only from the recorded path's top-k, and the rejected-branch pool learns nothing
  (docs/replay.md has the measured difference from exact mode).

One limit holds wherever replay numbers appear: the sources that replay the model's own
predictions (the adjacency table's top-k, the rejected pool's argmax rollouts) learn the local
model's predictions, not the recording model's, so replay under-states them; the copying
sources (prompt lookup, suffix, the semantic key's retrieved continuations) copy recorded text
and are measured as they would be.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np

from ..decoding import Replay, SpeculativeDecoder
from ..methods import Method, TreeConfig, as_methods
from ..presets import make_decoder
from .results import MethodStats, with_speedups
from ..trace import RequestTrace
from ..verifier import NodeOutputs, Verifier

MODES = ("fast", "exact")
LIMIT_NOTE = ("replay under-states the sources that replay the local model's own predictions (the "
              "adjacency table's top-k, the rejected pool's rollouts): they learn the local model's "
              "predictions, not the recording model's; the copying sources (prompt lookup, suffix, "
              "the semantic key) copy recorded text and are measured as they would be")


class Turn(Protocol):
    """One replayed request (``oilbird.data.conversations.ReplayTurn`` is one)."""
    id: str
    conversation: str
    index: int
    prompt_ids: list[int]
    recording_ids: list[int]


@dataclass
class RecordedTurn:
    """A turn built from plain ids (e.g. a live run's greedy output, replayed)."""
    id: str
    conversation: str
    index: int
    prompt_ids: list[int]
    recording_ids: list[int]


def check_method(m: Method) -> None:
    """Replay drafts with our tree decoders; ``hf-pld`` runs ``generate`` and cannot follow a
    recording, so it is refused (with the reason)."""
    if m.base == "hf-pld" or m.base == "hf-greedy":
        raise ValueError(f"'{m.name}' cannot replay: it decodes inside transformers' generate, which cannot "
                         f"be made to follow a recording; replay takes ar, suffix-arctic and the presets")


def make_replay_decoder(m: Method, verifier: Verifier, tree: TreeConfig | None, trace: bool,
                        store_kwargs: dict | None = None) -> SpeculativeDecoder:
    """The decoder that replays method ``m`` (:func:`oilbird.presets.make_decoder`; ``ar`` is the
    same cycle with a root-only tree); it keeps the conversation's KV cache between turns."""
    check_method(m)
    dec = make_decoder(m, verifier, tree=tree, trace=trace, store_kwargs=store_kwargs)
    dec.reuse_prefix = True
    return dec


def fits(turns: Sequence[Turn], context: int) -> bool:
    """Does every turn of a conversation fit the model's context (prompt + recording)?"""
    return all(len(t.prompt_ids) + len(t.recording_ids) <= context for t in turns)


def teacher_forced(verifier: Verifier, turns: Sequence[Turn]) -> Iterator[NodeOutputs]:
    """Fast mode: per turn, the outputs at the last prompt token and at every recorded token
    (the rows :class:`~oilbird.decoding.Replay` reads), from one forward with the recording
    teacher-forced; each turn feeds only what the conversation's cache does not hold."""
    cache = None
    held: list[int] = []
    for t in turns:
        rec = list(t.recording_ids)
        ids = list(t.prompt_ids) + rec
        if held and ids[: len(held)] != held:
            cache, held = None, []                    # not a continuation: start afresh
        cache, out = verifier.prefill(ids, cache, keep=len(rec) + 1)
        held = ids
        yield out


def replay(conversations: Iterable[Sequence[Turn]], methods: list[str | Method], verifier: Verifier,
           mode: str = "fast", tree: TreeConfig | None = None, trace: bool = True,
           recorded_by: str | None = None, on_request: Callable[[list[RequestTrace], dict], None] | None = None,
           progress: Callable[[int], None] | None = None, store_kwargs: dict | None = None) -> dict:
    """Replay ``conversations`` (each a list of turns, in order) with every method.

    Returns the results dict (``oilbird.evaluation.results`` shape: tau, mean nodes, source shares, per
    request rows; in exact mode tokens/s and speedup over ``ar``, the local model's cost of these
    outputs). ``on_request(traces, results)`` is called after every turn with that turn's traces
    (one per method) and the results so far, so a caller can write as it goes. Conversations
    that do not fit the model's context are skipped and counted, never truncated.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    methods = as_methods(methods)
    names = [m.name for m in methods]
    for m in methods:
        check_method(m)
    lm = verifier.lm
    context = int(getattr(lm.model.config, "max_position_embeddings", 0) or 0) or 10 ** 9
    decoders = {m.name: make_replay_decoder(m, verifier, tree, trace, store_kwargs) for m in methods}
    stats = {n: MethodStats() for n in names}
    skipped = {"conversations": 0, "turns": 0}
    n_conv = n_turns = 0
    teacher_seconds = 0.0
    for turns in conversations:
        turns = list(turns)
        if not fits(turns, context):
            skipped["conversations"] += 1
            skipped["turns"] += len(turns)
            continue
        n_conv += 1
        teachers: Iterator[NodeOutputs | None] = (teacher_forced(verifier, turns) if mode == "fast"
                                                  else iter([None] * len(turns)))
        for t in turns:
            t0 = time.perf_counter()
            teacher = next(teachers)
            teacher_seconds += time.perf_counter() - t0
            rec = list(t.recording_ids)
            req_traces = []
            for n in names:
                t1 = time.perf_counter()
                tr = decoders[n].run(t.id, list(t.prompt_ids), len(rec), judge=Replay(rec, teacher))
                secs = time.perf_counter() - t1
                tr.lossless = tr.output_ids == rec          # replay's own check: it followed the recording
                tr.meta["replay"] = {"mode": mode, "recorded_by": recorded_by, "conversation": t.conversation,
                                     "turn": t.index}
                st = stats[n]
                st.add_request(t.id, len(tr.output_ids), tr.forwards, secs if mode == "exact" else 0.0,
                               tr.cycles[0].timings.get("verify", 0.0) if mode == "exact" else 0.0)
                st.add_trace(tr)
                if not tr.lossless:
                    st.lossless = False
                    st.first_failure = st.first_failure or f"{t.id}: replay left the recording"
                req_traces.append(tr)
            n_turns += 1
            if progress is not None:
                progress(1)
            if on_request is not None:
                on_request(req_traces, _results(stats, methods, lm, mode, tree, recorded_by, n_conv, n_turns,
                                                skipped, teacher_seconds))
    return _results(stats, methods, lm, mode, tree, recorded_by, n_conv, n_turns, skipped, teacher_seconds)


def _results(stats, methods, lm, mode, tree, recorded_by, n_conv, n_turns, skipped, teacher_seconds) -> dict:
    from dataclasses import asdict
    res = {m.name: stats[m.name].summary() for m in methods}
    for m in methods:
        if m.drafts_tree:
            res[m.name]["fill"] = m.tree(tree).fill
        if mode == "fast":          # no forward runs per method: time means nothing here
            for k in ("tokens_per_s", "decode_tokens_per_s", "seconds", "overhead_share", "stage_share"):
                res[m.name].pop(k, None)
    if mode == "exact":
        with_speedups(res)
    else:
        for r in res.values():
            r["speedup"] = r["decode_speedup"] = None
    return {"methods": res, "model": lm.name, "replay": {
                "mode": mode, "recorded_by": recorded_by, "conversations": n_conv, "turns": n_turns,
                "skipped_over_context": skipped, "teacher_forcing_seconds": teacher_seconds,
                "note": LIMIT_NOTE},
            "n_requests": n_turns, "tree": asdict(tree or TreeConfig())}


def diagnose_turns(lm, conversations, progress: bool = True) -> dict:
    """The labels of :func:`oilbird.evaluation.diagnose.diagnose_requests` on recorded outputs (``replay --diagnose``): each
    turn's recording is its output, served conversation by conversation, the pool holding the
    earlier recordings ("generated" pool). States come from one teacher-forced forward per turn
    that reuses the conversation's cache (:func:`teacher_forced`), so only the
    recorded positions (and the last prompt token, the first query) get one.
    ``teacher_forced_agreement`` is here how often the local model's argmax is the recorded
    token: how far the recording is from what the local model would write."""
    from tqdm import tqdm

    from .diagnose import Pool, RequestDiagnosis, static_embeddings
    conversations = [list(c) for c in conversations]
    verifier = Verifier(lm)
    dim = int(lm.model.config.hidden_size)
    pool = Pool(dim, static_embeddings(lm), mode="generated")
    diags: list[RequestDiagnosis] = []
    agree: list[float] = []
    texts: dict[str, list[str]] = {}
    pairs: list[tuple[list[int], list[int]]] = []
    bar = tqdm(total=sum(len(c) for c in conversations), desc="diagnose", unit="turn", disable=not progress,
               file=sys.stderr)
    for turns in conversations:
        for t, rows in zip(turns, teacher_forced(verifier, turns)):
            ids, out = list(t.prompt_ids), list(t.recording_ids)
            P, n = len(ids), len(out)
            states = np.zeros((P + n, dim), dtype=np.float32)      # only rows P - 1 on are read
            states[P - 1:] = rows.states.numpy()[: n + 1]
            agree.append(float(np.mean(rows.argmax.numpy()[:n] == np.asarray(out))))
            texts[t.id] = [lm.tokenizer.decode([tok]) for tok in out]
            pairs.append((ids, out))
            diags.append(pool.label(t.id, ids, out, states))
            pool.add_request(ids, out, states)
            bar.update(1)
    bar.close()
    return {"diags": {"generated": diags}, "texts": texts, "pairs": pairs,
            "teacher_forced_agreement": float(np.mean(agree)) if agree else None}
