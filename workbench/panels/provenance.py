"""What a trace says was committed: who delivered each output token, which cycle committed
it, and each cycle's verdict in words.

Read from :class:`~oilbird.trace.RequestTrace` / :class:`~oilbird.trace.CycleTrace` only
(``committed``, ``committed_sources``, ``accepted``, ``bonus``); nothing is re-derived from
token text. Several panels use these (the counter, the tree's title, the text, the metrics).
"""
from __future__ import annotations

import html

from oilbird.trace import CycleTrace, RequestTrace, lexical_sources, recorder_words
from oilbird.trace import bonus_committed, committed_drafts  # noqa: F401 - the views' names for the library's

from ..palette import BONUS, shown_sources

NO_CYCLES = "no cycle records in this trace: no draft trees to step through"


# a title's mark on a replayed request's figure (its numbers are the recording's verdicts)
REPLAYED = " · replayed (the recording decides)"
# ... and on a request decoded live in the app, beside the precomputed traces
LIVE_RUN = " · live run"


def sampling_note(request: RequestTrace) -> str:
    """A sampled trace's settings as its figures mark them ("sampled (T=0.8, top-p=1, seed=3)");
    empty for greedy decoding and replays.

    >>> sampling_note(RequestTrace("q", "goose", "m", [], "", meta={"sampling": {"temperature": 0.8,
    ...     "top_p": 1.0, "seed": 3}}))
    'sampled (T=0.8, top-p=1, seed=3)'
    """
    sp = request.meta.get("sampling")
    if not isinstance(sp, dict):
        return ""
    try:
        from oilbird.sampling import SamplingParams
        return f"sampled ({SamplingParams(sp['temperature'], sp['top_p'], sp['seed']).describe()})"
    except (KeyError, TypeError, ValueError):
        return "sampled"


def is_live(request) -> bool:
    """Was ``request`` (a RequestTrace) decoded live (in the app or a notebook: ``meta["live"]``)?"""
    return bool(request is not None and request.meta.get("live"))


def live_mark(request) -> str:
    """" · live run" for a request decoded live (:func:`is_live`), else "": how the counter, the
    tree's title, the comparison and the notebooks' stepper tell it from a precomputed trace of
    the same request (an exported figure too); with the model that decoded it, where the trace
    names it (" · live run of SmolLM2-135M-Instruct"), HTML-escaped: the counter is HTML."""
    if not is_live(request):
        return ""
    return LIVE_RUN + (f" of {html.escape(request.model)}" if getattr(request, "model", "") else "")


def trace_marks(request) -> dict:
    """What a cycle's tree takes of its request (:func:`~workbench.panels.tree.tree_figure`'s
    ``replay`` and ``live``, which its title marks, ``rows``, which keeps its height, and
    ``lexical``, its exact-match sources, which colour a node before the key):
    ``F.tree_figure(c, **F.trace_marks(request))`` wherever a view draws one."""
    return {"replay": is_replay(request), "live": is_live(request), "rows": tree_rows(request),
            "lexical": lexical_sources(request)}


def tree_rows(request) -> float:
    """How many rows the widest draft tree of ``request`` may take below its top row: its most
    leaves in one cycle less one (a row each, :func:`~workbench.panels.tree.tree_layout`), and
    the bonus token's spot, up to :data:`~workbench.panels.tree.BONUS_CLEARANCE` rows above or
    below them."""
    return max((len(c.tokens) - len(set(c.parents[1:])) for c in request.cycles if c.tokens), default=1) + 0.5


def is_replay(request) -> bool:
    """Is ``request`` (a RequestTrace) a replay of recorded outputs (its verdicts the recording's)?"""
    return bool(request is not None and request.meta.get("replay"))


def replay_note(request: RequestTrace) -> str:
    """For a replayed request (``python -m oilbird replay``), whose its numbers are: the text
    and the verdict are the recording's; the hidden states (which the semantic key, its
    neighbours' similarities and the gap labels read) are the local model's, named. Empty for
    a live trace.

    >>> replay_note(RequestTrace("c#0", "goose", "SmolLM2", [], "", meta={"replay": {"recorded_by": "gpt-4o",
    ...     "mode": "fast"}}))
    "replay of gpt-4o's recorded turn (fast mode): the verdict is the recording; the hidden states are SmolLM2's"
    >>> replay_note(RequestTrace("c#0", "goose", "", [], "", meta={"replay": {"recorded_by": "a bot (scripted)"}}))
    "replay of a bot's recorded turn (scripted): the verdict is the recording; the hidden states are the local model's"
    """
    rp = request.meta.get("replay")
    if not isinstance(rp, dict):
        return ""
    whose, note = recorder_words(rp.get("recorded_by"))
    notes = "; ".join(n for n in (note, f"{rp['mode']} mode" if rp.get("mode") else "") if n)
    return (f"replay of {whose} recorded turn{f' ({notes})' if notes else ''}: the verdict is the recording; "
            f"the hidden states are {local_model(request)}")


def local_model(request: RequestTrace) -> str:
    """The model whose hidden states a trace's key read, in words: "SmolLM2's", or "the local
    model's" where the trace does not name it."""
    return f"{request.model}'s" if request.model else "the local model's"


def traffic(request: RequestTrace) -> str:
    """Whose outputs a trace holds, the scope a count over several traces keeps to: one model's
    recorded turns (a replay) or what the local model decoded itself (live, or in a trace file).

    >>> traffic(RequestTrace("c#0", "goose", "m", [], "", meta={"replay": {"recorded_by": "gpt-4o"}}))
    "gpt-4o's recorded turns, replayed"
    >>> traffic(RequestTrace("r1", "goose", "SmolLM2", [], ""))
    "SmolLM2's own decoding"

    Sampled decoding is traffic of its own (its outputs and trees are not greedy's): "SmolLM2's
    own decoding, sampled (T=0.8, top-p=1, seed=3)".
    """
    rp = request.meta.get("replay")
    if isinstance(rp, dict):
        whose, note = recorder_words(rp.get("recorded_by"))
        return f"{whose} recorded turns, replayed" + (f" ({note})" if note else "")
    sampled = sampling_note(request)
    # (live or precomputed: a trace file of the model's decoding is what a live run would give)
    return f"{local_model(request)} own decoding" + (f", {sampled}" if sampled else "")


def token_sources(request: RequestTrace) -> list[list[str]]:
    """Sources that delivered each output token (``["bonus"]`` for the verifier's tokens):
    ``CycleTrace.committed_sources`` concatenated over the cycles."""
    out: list[list[str]] = []
    for c in request.cycles:
        out.extend(list(s) for s in c.committed_sources)
    return out


def token_cycles(request: RequestTrace) -> list[int]:
    """Index (into ``request.cycles``) of the cycle that committed each output token."""
    out: list[int] = []
    for i, c in enumerate(request.cycles):
        out.extend([i] * len(c.committed))
    return out


def committed_upto(request: RequestTrace, cycle: int | None) -> int:
    """How many output tokens are committed once cycle index ``cycle`` has run."""
    if cycle is None:
        return len(request.output_ids)
    return sum(len(c.committed) for c in request.cycles[: cycle + 1])


def drafted_sources(request: RequestTrace) -> set[str]:
    """Every source that proposed a node in any of ``request``'s cycles: what a key of its
    draft trees lists, so the key holds still while one steps through the cycles."""
    return {s for c in request.cycles for srcs in c.sources[1:] for s in srcs}


def accepted_share(request: RequestTrace) -> dict[str, float]:
    """Share of output tokens credited to each source.

    The bonus token goes to ``bonus``; a drafted token is split evenly between the sources that
    proposed its node (the rule of ``oilbird.evaluation.bench``), so the shares add up to 1.
    """
    credit = {s: 0.0 for s in shown_sources()}      # any other source is added where it shows up
    n = 0
    for srcs in token_sources(request):
        n += 1
        if not srcs or srcs == [BONUS]:
            credit[BONUS] += 1
            continue
        for s in srcs:
            credit[s] = credit.get(s, 0.0) + 1.0 / len(srcs)
    return {k: v / n for k, v in credit.items()} if n else credit


def sole_share(request: RequestTrace) -> dict[str, float]:
    """Share of output tokens that one source alone proposed (the bonus: the verifier's, or the
    recording's): the part of :func:`accepted_share` no other source would have delivered."""
    srcs = token_sources(request)
    alone: dict[str, float] = {}
    for x in srcs:
        if len(x) <= 1:
            k = x[0] if x else BONUS
            alone[k] = alone.get(k, 0.0) + 1
    return {k: v / len(srcs) for k, v in alone.items()} if srcs else {}


def output_stops(cycle: CycleTrace) -> bool:
    """Did the output end inside this cycle's verdict (accepted drafts or bonus cut)? Why it
    ended (EOS or the token limit) is recorded in ``cycle.stop``."""
    return not bonus_committed(cycle) and (cycle.bonus >= 0 or bool(cycle.accepted))


def verdict_parts(cycle: CycleTrace, replay: bool = False) -> tuple[str, str]:
    """(the counts, why the output took fewer tokens than the verdict: "" on most cycles);
    ``replay``: the recording, not the verifier, gives the bonus."""
    if not cycle.n_nodes:
        return f"prefill: the {'recording' if replay else 'verifier'}'s first token (bonus)", ""
    of = f"{max(0, len(cycle.accepted) - 1)} of {max(0, cycle.n_nodes - 1)} drafts accepted"
    if not output_stops(cycle):
        return f"{of} + bonus", ""
    why = {"eos": "at an end-of-sequence token", "limit": "at the token limit"}.get(cycle.stop or "", "")
    return (f"{of}, {len(cycle.committed)} committed", f"no bonus: the output stops here {why}".rstrip())


def verdict_text(cycle: CycleTrace, replay: bool = False) -> str:
    """The verdict in words, agreeing with ``committed``: "2 of 4 drafts accepted + bonus", or
    on a cut last cycle "12 of 23 drafts accepted, 5 committed, no bonus: the output stops
    here at the token limit" (the reason the decoder recorded, ``cycle.stop``)."""
    return ", ".join(x for x in verdict_parts(cycle, replay) if x)
