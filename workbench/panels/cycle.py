"""One cycle of a request at once: which cycle to open on, the counter above the tree, and
every per-request panel of one cycle (what the app shows and a notebook exports).

Knows which panels make up a step (tree, text, neighbours, gap strip, metrics); draws none of
them itself.
"""
from __future__ import annotations

import html

import plotly.graph_objects as go

from oilbird.trace import CycleTrace, RequestTrace

from ..palette import Style
from . import gap, metrics, neighbours, text, tree
from .base import figure, message_spec
from .provenance import (NO_CYCLES, committed_upto, drafted_sources, live_mark, local_model, output_stops,
                         replay_note, sampling_note, trace_marks)


def first_cycle(request: RequestTrace | None) -> int:
    """Open a request on its first cycle with a draft tree (cycle 0 is the prefill); 0 for no
    request, a request without cycle records, or a prefill-only one."""
    return 1 if request is not None and len(request.cycles) > 1 else 0


def last_cycle(request: RequestTrace) -> int:
    """The last cycle index a slider and Play may reach: 0 for a prefill-only request (and
    for one without cycle records, drawn as messages), never a cycle that does not exist."""
    return max(0, len(request.cycles) - 1)


def cycle_at(request: RequestTrace, cycle: int) -> CycleTrace | None:
    """``request.cycles[cycle]``, or None for a request without cycle records (drawn as a
    message, like the other no-data cases). Any other index out of range is a ValueError."""
    if not request.cycles:
        return None
    if not 0 <= cycle < len(request.cycles):
        raise ValueError(f"cycle {cycle} is outside 0..{len(request.cycles) - 1} for request "
                         f"{request.request_id!r} ({request.method})")
    return request.cycles[cycle]


def empty_store(request: RequestTrace) -> bool:
    """Did the semantic key find an empty store every time it looked (a session's first live
    run: no request had finished before it)? Cycles where it did not look (its gate closed, no
    query state, a method without it) say nothing either way."""
    looked = [c.retrieval for c in request.cycles if c.retrieval not in (None, "no-source", "gate-closed", "no-query")]
    return bool(looked) and all(r == "empty-store" for r in looked)


def _count(request: RequestTrace, cycle: int) -> tuple[str, str]:
    """("cycle k / n", where the count starts): :func:`cycle_count`'s two parts."""
    where = "the prefill: the prompt is read, nothing is drafted" if cycle == 0 else "0: the prefill"
    return f"cycle {cycle} / {len(request.cycles) - 1}", where


def cycle_count(request: RequestTrace, cycle: int) -> str:
    """"cycle k / n" and where the count starts, in words: cycles count from 0, the prompt's
    prefill, which drafts nothing, so "cycle 26 / 55" is the 26th of 55 drafting cycles (the
    app's counter and the notebooks' stepper both say it)."""
    return "{} ({})".format(*_count(request, cycle))


def counter_html(request: RequestTrace, cycle: int) -> str:
    """The cycle counter above the tree: "cycle k / n (0: the prefill) · request · method ·
    whose decoding · tokens so far" (cycles count from the prefill, which drafts nothing; whose:
    a replay's recording, a live run, or the local model's precomputed decoding); on a cycle
    where the output ends inside the verdict it says so, as the tree's title does."""
    c = cycle_at(request, cycle)
    live = live_mark(request)
    if live and empty_store(request):
        live += (f" ({html.escape(request.method)}'s store in this session was empty: the semantic key had "
                 f"nothing to retrieve yet; each live run of {html.escape(request.method)} adds its output to it)")
    replayed = replay_note(request)
    if replayed:
        live = f" · {html.escape(replayed)}"
    elif not live:          # a trace file of the local model: whose decoding it is, as replays and live runs say
        live = f" · {html.escape(local_model(request))} own decoding, precomputed"
    sampled = sampling_note(request)
    if sampled:
        live += f" · {html.escape(sampled)}"
    if c is None:
        return (f"<b>no cycles</b> · {html.escape(request.request_id)} · {html.escape(request.method)}{live} · "
                f"{len(request.output_ids)} tokens · {NO_CYCLES}")
    stop = " (the output stops here)" if output_stops(c) else ""
    count, where = _count(request, cycle)
    return (f"<b>{count}</b> ({where}) · {html.escape(request.request_id)} · "
            f"{html.escape(request.method)}{live} · {committed_upto(request, cycle)} of "
            f"{len(request.output_ids)} tokens · {len(c.committed)} committed this cycle{stop}")


def cycle_specs(request: RequestTrace, cycle: int, style: Style | None = None,
                moment: tuple[int, int] | None = None, fit: bool = False) -> dict[str, dict]:
    """Every per-request spec for cycle index ``cycle`` (what the app shows), by name; the gap
    strip with a bar under the tokens ``moment`` spans (the gap moment shown). The tree takes the
    height of its request's widest tree, so that stepping through the cycles keeps the plot
    still; ``fit``: its own (a figure that stands alone, an export: a one-row tree of a request
    with a wide one left most of its image blank)."""
    c = cycle_at(request, cycle)
    if c is None:
        head = f"{request.request_id} · {request.method}"
        return {"tree": message_spec(f"{head} · draft tree", NO_CYCLES, style),
                "text": message_spec(f"{head} · text", NO_CYCLES, style),
                "neighbours": message_spec(f"{head} · nearest neighbours", NO_CYCLES, style),
                "gap": gap.gap_strip_spec(request, None, style), "metrics": metrics.metrics_spec(request, None, style)}
    marks = {**trace_marks(request), **({"rows": 0} if fit else {})}
    return {"tree": tree.tree_spec(c, style=style, keyed=drafted_sources(request), **marks),
            "text": text.text_spec(request, cycle, style),
            "neighbours": neighbours.neighbours_spec(c, style=style, request=request),
            "gap": gap.gap_strip_spec(request, cycle, style, moment),
            "metrics": metrics.metrics_spec(request, cycle, style)}


def cycle_figures(request: RequestTrace, cycle: int, style: Style | None = None,
                  moment: tuple[int, int] | None = None, fit: bool = False) -> dict[str, go.Figure]:
    """:func:`cycle_specs` as validated Figures (for notebooks and exports)."""
    return {k: figure(v, style) for k, v in cycle_specs(request, cycle, style, moment, fit).items()}
