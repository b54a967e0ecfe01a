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
  forward. Teacher forcing (``oilbird.evaluation.teacher``) reuses the conversation's cache and
  a shared system prompt's, windows the states past the model's context (so no conversation is
  skipped) and can keep its rows on disk (``--cache``). What fast mode cannot see: the outputs at rejected nodes. So the adjacency table
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
from typing import Callable, Iterable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from ..decoding import Replay, SpeculativeDecoder
from ..errors import repeated
from ..methods import Method, TreeConfig, as_methods, lookup
from ..presets import make_decoder
from .results import MethodStats, with_speedups
from ..trace import RequestTrace
from ..verifier import NodeOutputs, Verifier
from .teacher import TeacherForcer, floor_seconds, flops_per_token, model_context

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


# methods that decode inside transformers' generate, which cannot be made to follow a recording
CANNOT_REPLAY = ("hf-greedy", "hf-pld")


def check_method(m: Method) -> None:
    """Replay drafts with our tree decoders; ``hf-pld`` runs ``generate`` and cannot follow a
    recording, so it is refused (with the reason)."""
    if m.base in CANNOT_REPLAY:
        raise ValueError(f"'{m.name}' cannot replay: it decodes inside transformers' generate, which cannot "
                         f"be made to follow a recording; replay takes ar, suffix-arctic and the presets")


def replay_methods(text: str) -> list[Method]:
    """``--methods`` of a replay, parsed and each checked (:func:`check_method`); an unknown name
    is refused with the methods replay takes, not every method (hf-pld would be refused next)."""
    from ..methods import known_methods, parse_methods
    takes = [m for m in known_methods() if m not in CANNOT_REPLAY]
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise ValueError(f"no method given; replay takes {', '.join(takes)}")
    for name in names:
        if name.split(":")[0] not in known_methods():
            raise ValueError(f"unknown method '{name}'; replay takes {', '.join(takes)} (a tree method may add a "
                             f"fill after a colon, e.g. oilbird:reserved)")
    methods = parse_methods(text)
    for m in methods:
        check_method(m)
    return methods


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
    teacher-forced; each turn feeds only what the conversation's cache does not hold (past the
    model's context, from a window: :mod:`oilbird.evaluation.teacher`)."""
    for out, _ in TeacherForcer(verifier, shared_prefix=False).conversation(turns):
        yield out


def replay(conversations: Iterable[Sequence[Turn]], methods: list[str | Method], verifier: Verifier,
           mode: str = "fast", tree: TreeConfig | None = None, trace: bool = True,
           recorded_by: str | Mapping[str, str] | None = None, on_request: Callable[[list[RequestTrace], dict], None] | None = None,
           progress: Callable[[int], None] | None = None, store_kwargs: dict | None = None,
           teacher: TeacherForcer | None = None, timing: dict | None = None,
           teacher_sink: Callable[[Turn, NodeOutputs], None] | None = None,
           own: Mapping[str, SpeculativeDecoder] | None = None) -> dict:
    """Replay ``conversations`` (each a list of turns, in order) with every method, and with
    ``own``'s decoders (a name to a :class:`~oilbird.decoding.SpeculativeDecoder` built by the
    caller over ``verifier``'s model: a drafter of one's own, docs/replay.md), each under its name
    beside the methods (a name no method has); it keeps what its store and sources hold from
    before, and what this replay adds.

    Returns the results dict (``oilbird.evaluation.results`` shape: tau, mean nodes, source shares, per
    request rows; in exact mode tokens/s and speedup over ``ar``, the local model's cost of these
    outputs). ``on_request(traces, results)`` is called after every turn with that turn's traces
    (one per method) and the results so far, so a caller can write as it goes.

    Fast mode replays every conversation whose recordings each fit the context (one that
    does not cannot be teacher-forced, and its conversation is skipped and counted): past the
    model's context the teacher rows are windowed (``teacher``: a :class:`~oilbird.evaluation.teacher.TeacherForcer`, default one with
    the default window and no disk cache), and ``results["replay"]`` counts the windowed turns.
    Exact mode runs the model on the whole conversation, so a conversation longer than the
    context is skipped and counted there, never truncated. ``timing`` (optional) holds the
    run's ``encode_seconds`` and ``matmul`` measurement for the time split.
    ``recorded_by`` names the model whose outputs were recorded: one name for every conversation,
    or a mapping from conversation id to its model, so each trace names its own and the results
    name only the conversations replayed (not those skipped); an id the mapping lacks, or maps to
    None, was recorded by "an unnamed model".
    ``teacher_sink(turn, rows)`` (fast mode) gets each turn's teacher-forced rows, so a caller
    can reuse them (:func:`diagnose_turns`' ``rows``) instead of forcing the turn again.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    methods = as_methods(methods, (tree or TreeConfig()).fill)   # (a name without a fill takes the tree's)
    own = dict(own or {})
    names = [m.name for m in methods] + list(own)
    for name, dec in own.items():
        if lookup(name) is not None:     # the views would read it as that method (its key, its tree)
            raise ValueError(f"'{name}' is a method's name; name a decoder of one's own otherwise (e.g. '[{name}]')")
        if dec.verifier.lm is not verifier.lm:
            raise ValueError(f"decoder '{name}' verifies with another model than the replay's")
    twice = repeated(names)
    if twice:
        raise ValueError(f"'{twice}' names two decoders of one's own; name each once")
    for m in methods:
        check_method(m)
    lm = verifier.lm
    context = model_context(lm)
    if mode == "fast" and teacher is None:
        teacher = TeacherForcer(verifier)
    decoders = {m.name: make_replay_decoder(m, verifier, tree, trace, store_kwargs) for m in methods}
    for name, dec in own.items():           # as make_replay_decoder leaves a method's decoder
        dec.reuse_prefix, dec.method = True, name
        decoders[name] = dec
    stats = {n: MethodStats() for n in names}
    drafting = {n: 0.0 for n in names}
    skipped = {"conversations": 0, "turns": 0, "ids": []}      # ids: which traffic tau leaves out
    run = {"conversations": 0, "turns": 0, "windowed_turns": 0}
    whom: dict[str, str | None] = {}        # each replayed conversation's recording model

    def results() -> dict:
        who = (", ".join(sorted(set(whom.values()))) or None) if isinstance(recorded_by, Mapping) else recorded_by
        return _results(stats, methods, lm, mode, tree, who, run, skipped, teacher, drafting, timing, own)

    for turns in conversations:
        turns = list(turns)
        # exact mode cannot window; fast mode can, unless one recording alone is past the context
        replayable = fits(turns, context) if mode == "exact" else teacher.fits(turns)
        if not replayable:
            skipped["conversations"] += 1
            skipped["turns"] += len(turns)
            skipped["ids"].append(turns[0].conversation if turns else "")
            continue
        run["conversations"] += 1
        for c in {t.conversation for t in turns}:
            whom[c] = (recorded_by.get(c) or "an unnamed model") if isinstance(recorded_by, Mapping) else recorded_by
        teachers: Iterator[tuple[NodeOutputs, bool]] = (teacher.conversation(turns) if mode == "fast"
                                                        else iter([(None, False)] * len(turns)))
        for t in turns:
            rows, windowed = next(teachers)
            run["windowed_turns"] += windowed
            if rows is not None and teacher_sink is not None:
                teacher_sink(t, rows)
            rec = list(t.recording_ids)
            req_traces = []
            for n in names:
                t1 = time.perf_counter()
                tr = decoders[n].run(t.id, list(t.prompt_ids), len(rec), judge=Replay(rec, rows))
                secs = time.perf_counter() - t1
                drafting[n] += secs
                tr.lossless = tr.output_ids == rec          # replay's own check: it followed the recording
                tr.meta["replay"] = {"mode": mode, "recorded_by": whom[t.conversation], "conversation": t.conversation,
                                     "turn": t.index, "windowed": windowed}
                st = stats[n]
                st.add_request(t.id, len(tr.output_ids), tr.forwards, secs if mode == "exact" else 0.0,
                               tr.cycles[0].timings.get("verify", 0.0) if mode == "exact" else 0.0,
                               unit=t.conversation)
                st.add_trace(tr)
                if not tr.lossless:
                    st.lossless = False
                    st.first_failure = st.first_failure or f"{t.id}: replay left the recording"
                req_traces.append(tr)
            run["turns"] += 1
            if progress is not None:
                progress(1)
            if on_request is not None:
                on_request(req_traces, results())
    return results()


# what a replay's numbers are, in results.json beside them (the printed table says the same)
WHOSE = {m: ("tau: what each drafter, run on the local model, would have committed per forward on the recorded "
             "outputs (the recording is the verdict, not the local model); lossless: the replay followed the "
             "recording token for token" + ("; tokens/s and speedup: the local model's cost of these outputs"
                                             if m == "exact" else "; fast mode times nothing"))
         for m in ("fast", "exact")}


def _results(stats, methods, lm, mode, tree, recorded_by, run, skipped, teacher, drafting, timing, own) -> dict:
    from dataclasses import asdict
    fills = {m.name: m.tree(tree).fill if m.drafts_tree else None for m in methods}
    fills.update({name: dec.drafter.cfg.fill for name, dec in own.items()})
    res = {name: stats[name].summary() for name in fills}
    for name, fill in fills.items():
        if fill is not None:
            res[name]["fill"] = fill
        if mode == "fast":          # no forward runs per method: time means nothing here
            for k in ("tokens_per_s", "decode_tokens_per_s", "seconds", "overhead_share", "stage_share"):
                res[name].pop(k, None)
            res[name]["per_request"] = [      # (nor per turn: not measured, not 0; copies: stats keeps its rows)
                {k: v for k, v in row.items() if k not in ("seconds", "prefill_seconds")}
                for row in res[name].get("per_request", [])]
    if mode == "exact":
        with_speedups(res)
    else:
        for r in res.values():
            r["speedup"] = r["decode_speedup"] = None
    t = teacher.stats if teacher is not None else None
    return {"methods": res, "model": lm.name, "replay": {
                "mode": mode, "recorded_by": recorded_by, "conversations": run["conversations"],
                "turns": run["turns"], "windowed_turns": run["windowed_turns"],
                "teacher": None if teacher is None else {**teacher.settings(), **t.as_dict()},
                "skipped_over_context": skipped, "teacher_forcing_seconds": t.seconds if t else 0.0,
                "time": time_split(teacher, drafting, lm, timing),
                "whose": WHOSE[mode], "note": LIMIT_NOTE},
            "n_requests": run["turns"], "tree": asdict(tree or TreeConfig())}


def time_split(teacher: TeacherForcer | None, drafting: dict, lm, timing: dict | None) -> dict:
    """Where a run's time went: encoding, teacher forcing, drafting per method (in exact mode the
    drafting seconds include each method's own verify forwards), and the teacher forcing's floor:
    the FLOPs it ran (:func:`~oilbird.evaluation.teacher.flops_per_token` x what it forwarded)
    over the measured matmul throughput (``timing["matmul"]``, :func:`~oilbird.evaluation.teacher.matmul_gflops`)."""
    timing = timing or {}
    out = {"encode_seconds": timing.get("encode_seconds"),
           "teacher_forcing_seconds": teacher.stats.seconds if teacher is not None else 0.0,
           "drafting_seconds": dict(drafting), "matmul": timing.get("matmul"), "floor": None}
    if teacher is not None and timing.get("matmul"):
        flops = flops_per_token(lm)
        floor = floor_seconds(teacher.stats, flops, timing["matmul"]["gflops"])
        out["floor"] = {**floor, "flops_per_token": flops, "tokens_forwarded": teacher.stats.tokens_forwarded,
                        "rows_kept": teacher.stats.rows_kept, "attention_pairs": teacher.stats.attention_pairs}
        if floor["seconds"]:     # the seconds that forwarded, not those that read the disk cache
            out["floor"]["teacher_over_floor"] = (teacher.stats.seconds - teacher.stats.cache_seconds) / floor["seconds"]
    return out


def time_lines(t: dict, teacher: dict | None) -> str:
    """The time split of :func:`time_split`, as printed after a replay."""
    parts = []
    if t.get("encode_seconds") is not None:
        parts.append(f"encoding {t['encode_seconds']:.1f} s")
    if teacher is not None:
        cache = (f", disk cache {teacher['cache_hits']} of {teacher['cache_hits'] + teacher['cache_misses']} "
                 f"conversations" if teacher["cache_hits"] + teacher["cache_misses"] else "")
        parts.append(f"teacher forcing {t['teacher_forcing_seconds']:.1f} s ({teacher['tokens_forwarded']:,} tokens "
                     f"forwarded, {teacher['shared_prefix_tokens']:,} taken from a shared prefix{cache})")
    # fast mode: drafting and acceptance alone; exact mode: each method's own verify forwards too
    label = "drafting" if teacher is not None else "decoding (drafting and verify forwards)"
    parts.append(label + " " + ", ".join(f"{m} {s:.1f} s" for m, s in t["drafting_seconds"].items()))
    line = "time: " + "; ".join(parts)
    f = t.get("floor")
    if f and f.get("seconds"):
        line += (f"\nfloor of the teacher forcing: {f['flops'] / 1e12:.3g} TFLOP at the measured "
                 f"{t['matmul']['gflops']:.3g} GFLOP/s (fp32 matmul {'x'.join(map(str, t['matmul']['shape']))}, "
                 f"best of {t['matmul']['repetitions']}) = {f['seconds']:.1f} s; teacher forcing took "
                 f"{f['teacher_over_floor']:.2f}x that"
                 + (" (its conversations not read from the disk cache)" if teacher and teacher.get("cache_hits") else ""))
    return line


def diagnose_turns(lm, conversations, progress: bool = True, rows: dict | None = None) -> dict:
    """The labels of :func:`oilbird.evaluation.diagnose.diagnose_requests` on recorded outputs (``replay --diagnose``): each
    turn's recording is its output, served conversation by conversation, the pool holding the
    earlier recordings ("generated" pool). States come from one teacher-forced forward per turn
    that reuses the conversation's cache (:func:`teacher_forced`), so only the
    recorded positions (and the last prompt token, the first query) get one.
    ``teacher_forced_agreement`` is here the share of recorded positions where the local model's
    argmax is the recorded token (pooled over positions, not turns): how far the recording is
    from what the local model would write. ``rows`` (turn id
    -> those rows, e.g. kept by a fast :func:`replay`'s ``teacher_sink``) spares the forward of
    a conversation whose turns it all holds."""
    from tqdm import tqdm

    from .diagnose import Pool, RequestDiagnosis, agreement, static_embeddings
    conversations = [list(c) for c in conversations]
    verifier = Verifier(lm)
    dim = int(lm.model.config.hidden_size)
    pool = Pool(dim, static_embeddings(lm), mode="generated")
    diags: list[RequestDiagnosis] = []
    agree: list[tuple[int, int]] = []           # (matches, positions) per turn
    texts: dict[str, list[str]] = {}
    pairs: list[tuple[list[int], list[int]]] = []
    bar = tqdm(total=sum(len(c) for c in conversations), desc="diagnose", unit="turn", disable=not progress,
               file=sys.stderr)
    for turns in conversations:
        known = rows is not None and all(t.id in rows for t in turns)
        for t, rows_t in zip(turns, (rows[t.id] for t in turns) if known else teacher_forced(verifier, turns)):
            ids, out = list(t.prompt_ids), list(t.recording_ids)
            P, n = len(ids), len(out)
            states = np.zeros((P + n, dim), dtype=np.float32)      # only rows P - 1 on are read
            states[P - 1:] = rows_t.states.numpy()[: n + 1]
            agree.append((int(np.sum(rows_t.argmax.numpy()[:n] == np.asarray(out))), n))   # (matches, positions)
            texts[t.id] = [lm.tokenizer.decode([tok]) for tok in out]
            pairs.append((ids, out))
            diags.append(pool.label(t.id, ids, out, states))
            pool.add_request(ids, out, states)
            bar.update(1)
    bar.close()
    return {"diags": {"generated": diags}, "texts": texts, "pairs": pairs,
            "teacher_forced_agreement": agreement(agree)}
