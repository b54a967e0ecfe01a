"""The metrics panel: four small plots of one request (tokens per cycle, running tokens per
forward, share by source: the tokens it alone proposed, then its split credit of shared ones,
time per stage), a dotted line at the selected
cycle. Reads the request's cycle records (``committed``, ``committed_sources``, ``timings``).
"""
from __future__ import annotations

from itertools import accumulate

import plotly.graph_objects as go

from oilbird.trace import RequestTrace

from ..palette import STAGE_COLOURS, STAGE_PATTERNS, STAGES, Style, shown_sources
from .base import (CURSOR, PATTERN, SHARE_TITLE, axis_key, figure, grid, label_of, panel_layout, pin_title,
                   style_or_default, title_height, vline, wrap_html)
from .provenance import accepted_share, is_replay, local_model, sampling_note, sole_share, verdict_text


def _a(word: str) -> str:
    """``word`` after its indefinite article ("an exact", "a fast")."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def metrics_spec(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> dict:
    """Four metric panels for one request (see :func:`metrics_figure`)."""
    s = style_or_default(style)
    mode = (request.meta.get("replay") or {}).get("mode")
    # a fast replay runs no verify forward (the recording is the verdict): its times are drafting's;
    # said in the stage key (a longer subplot title runs into its neighbour's)
    stage_key = {"fast": "stage<br>(fast replay:<br>no verify<br>forward)",
                 "exact": "stage<br>(replay: the<br>local model)"}.get(mode, "stage")
    # narrower than 1000 px, the bottom row's titles on two lines each (at 700 px they ran together)
    narrow = bool(s.width) and s.width < 1000
    axes, ref = grid(2, 2, ("tokens per cycle", "cumulative tokens per forward",
                            SHARE_TITLE.replace(": ", ":<br>") if narrow else SHARE_TITLE,
                            "ms per stage,<br>as recorded" if narrow else "ms per stage, as recorded"),
                     hspace=0.1, vspace=0.22)
    cyc = [c.cycle for c in request.cycles]
    per = [len(c.committed) for c in request.cycles]
    cum = list(accumulate(per))
    share = accepted_share(request)
    alone = sole_share(request)           # the solid part: tokens no other source proposed
    order = shown_sources(share)

    def at(rc):
        return {"xaxis": ref[rc][0], "yaxis": ref[rc][1]}

    data = [
        {"type": "bar", "x": cyc, "y": per, "name": "tokens / cycle", "marker": {"color": "#777777"},
         "showlegend": False, "meta": "per-cycle", "hoverinfo": "text",
         "hovertext": [f"cycle {c.cycle}: {verdict_text(c, bool(mode))} · {len(c.committed)} committed"
                       for c in request.cycles], **at((1, 1))},
        {"type": "scatter", "x": cyc, "y": [t / (k + 1) for k, t in enumerate(cum)], "mode": "lines+markers",
         "name": "tokens / forward", "line": {"color": "#222222"}, "showlegend": False, "meta": "cumulative",
         "hovertemplate": "after cycle %{x}: %{y:.2f} tokens per forward<extra></extra>", **at((1, 2))},
        {"type": "bar", "x": order, "y": [alone.get(k, 0.0) for k in order],
         "marker": {"color": [s.colour(k) for k in order]}, "showlegend": False, "name": "alone",
         "meta": "alone", "hovertemplate": "%{x}: %{y:.1%} of output tokens proposed by it alone"
         "<extra></extra>", **at((2, 1))},
        {"type": "bar", "x": order, "y": [max(0.0, share.get(k, 0.0) - alone.get(k, 0.0)) for k in order],
         "customdata": [share.get(k, 0.0) for k in order],
         # each source's whole share printed over its bar (a printout has no hover)
         "text": [f"{share.get(k, 0.0):.0%}" for k in order], "textposition": "outside", "cliponaxis": False,
         "constraintext": "none", "textfont": {"size": max(9, s.font_size - 1)},
         "marker": {"color": [s.colour(k) for k in order], "opacity": 0.45,
                    "pattern": {"shape": "/", **PATTERN}}, "showlegend": False, "name": "share",
         "meta": "share", "hovertemplate": "%{x}: %{customdata:.1%} of output tokens in all: a token several "
         "sources proposed is split evenly among them<br>(the text and comparison colour it by one, exact "
         "match first)<extra></extra>", **at((2, 1))},
    ]
    for st in STAGES:
        data.append({"type": "bar", "x": cyc, "y": [1000 * c.timings.get(st, 0.0) for c in request.cycles],
                     "name": st, "legendgroup": f"stage-{st}", "meta": f"stage-{st}",
                     "marker": {"color": STAGE_COLOURS[st], "pattern": {"shape": STAGE_PATTERNS[st], **PATTERN}},
                     "hovertemplate": f"cycle %{{x}}: {st} %{{y:.1f}} ms<extra></extra>", **at((2, 2))})
    shapes = []
    if cycle is not None and 0 <= cycle < len(request.cycles):
        x = request.cycles[cycle].cycle
        shapes = [vline(x, *ref[rc], CURSOR) for rc in ((1, 1), (1, 2), (2, 2))]
    # two lines: the panel is half the page wide in the app, and one line was cut off there
    # (the counts and whose they are on lines of their own: a parenthesis across the break read as unclosed)
    whose = (f"{_a(mode)} replay: the recording's tokens; the drafters' trees, keyed on {local_model(request)} states"
             if mode else f"{local_model(request)} own decoding") + (
        f"; {sampled}" if (sampled := sampling_note(request)) else "")
    title = (wrap_html(f"metrics · {request.request_id} · {request.method}", s, s.font_size + 2) + "<br>"
             f"<span style='font-size:{s.font_size}px'>τ = {request.tau:.2f}: {len(request.output_ids)} "
             f"tokens / {request.forwards} forwards<br>"      # wrapped to an export's width (cut at 700 px)
             + wrap_html(whose, s, s.font_size, quote=False) + "</span>")
    # its lines pinned to the top (plotly spaces them by the title's font, whatever a span's), then
    # the subplots' titles: a title wrapped to four lines at 700 px had sunk onto them
    top = round(title_height(title, s) + 40)
    layout = panel_layout(s, title, height=max(s.height, 410 + top), barmode="stack", shapes=shapes,
                     margin={"l": 40, "r": 10, "t": top, "b": 40},
                     legend={"title": {"text": stage_key}, "x": 1.01, "y": 0.0, "yanchor": "bottom"}, **axes)
    for rc in ((1, 1), (1, 2), (2, 2)):
        if rc == (2, 2):   # one axis title, the bottom row's: the top row's ran into the titles below it
            layout[axis_key(ref[rc][0])]["title"] = {"text": "cycle"}
        if len(cyc) <= 12:
            layout[axis_key(ref[rc][0])]["dtick"] = 1
    layout[axis_key(ref[(2, 1)][1])].update({"tickformat": ".0%",      # room over the tallest bar for its share
                                             "range": [0, 1.2 * max([share.get(k, 0.0) for k in order] + [0.05])]})
    layout[axis_key(ref[(2, 1)][0])].update({"tickangle": -35, "automargin": True,   # names, not cut off
                                             "tickvals": order, "ticktext": [label_of(k, is_replay(request)) for k in order]})
    return {"data": data, "layout": pin_title(layout)}


def metrics_figure(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> go.Figure:
    """Four panels for one request: tokens committed per cycle (their mean is tau), the running
    tokens per forward, the share of output tokens each source delivered (solid: the tokens it
    alone proposed, :func:`sole_share`; hatched above: its split credit of tokens several proposed,
    the bar's whole being :func:`accepted_share`; the text and the comparison colour a token by one
    source, exact match first, instead), and the time per stage of every cycle (from
    ``CycleTrace.timings``). A dotted line marks cycle index ``cycle``."""
    return figure(metrics_spec(request, cycle, style), style)

