"""The funnel panel: where the semantic key's reach is lost, stage by stage, per method.

Reads the conversion funnel of :mod:`oilbird.evaluation.funnel` (counted from request traces,
or read from a diagnosis.json's ``funnel``): left, the nested stages (drafting cycles, gate
open, lookup ran, a found record continues right, ... its token accepted, and the key's own
tokens) as one bar per method and stage, each value printed; right (or below, where narrow),
where the cycles with a right record lost it (below the floor, muted, cut by copy depth, no node
left) and the cycles that accepted fewer tokens than the right record held (no node, copy depth,
budget). Counts are drafting cycles;
the hover says each stage's share of the cycles and of the stage above.
"""
from __future__ import annotations

import html
from typing import Callable, Iterable

import plotly.graph_objects as go

from oilbird.evaluation.funnel import LOST_HELP, REACHED, SHORT, SHORT_HELP, STAGE_HELP, STAGES, funnel
from oilbird.trace import RequestTrace

from ..palette import OKABE_ITO, Style
from .base import (PATTERN, TABLE_WIDTH, axis_key, centred_note, figure, grid, key_rows, panel_layout, pin_title,
                   style_or_default, wrap_to)
from .gap import keyless
from .provenance import traffic

# one colour per method, in order (Okabe-Ito, skipping black and grey)
METHOD_COLOURS = (OKABE_ITO["vermillion"], OKABE_ITO["blue"], OKABE_ITO["bluish_green"], OKABE_ITO["orange"],
                  OKABE_ITO["reddish_purple"], OKABE_ITO["sky_blue"], OKABE_ITO["yellow"])
# and a fill pattern each, in the same order: a greyscale printout tells the methods apart
METHOD_PATTERNS = ("", "/", ".", "x", "\\", "+", "-")
STACK_BELOW = 1000      # a figure narrower than this (pixels) draws the losses under the stages
LEGEND_ROOM = 36        # pixels under the axes' titles for one row of the key of methods
LOSSES = tuple(f"lost: {k}" for k in REACHED[:-1]) + tuple(f"short: {k.replace('_', ' ')}" for k in SHORT)
LOSS_WHY = tuple(LOST_HELP[k] for k in REACHED[:-1]) + tuple(SHORT_HELP[k] for k in SHORT)
FUNNEL_TITLE = "conversion funnel: drafting cycles at each stage of the semantic key"


def as_funnel(source: dict | Iterable[RequestTrace]) -> dict:
    """A funnel dict (``{method: counts}``) as given, or counted from request traces."""
    if isinstance(source, dict):
        return source
    return funnel(list(source))


def funnel_scope(traces: Iterable[RequestTrace], selected: RequestTrace | None,
                 origin: Callable[[RequestTrace], str] | None = None,
                 named: Callable[[str], str] = str) -> tuple[list[RequestTrace], str]:
    """The traces a funnel beside ``selected`` counts, and the words for them: those of methods
    with the hidden-state key (the funnel's stages are its; :func:`~workbench.panels.gap.keyless`)
    over the same traffic as ``selected`` (:func:`~workbench.panels.provenance.traffic`: a
    replay's recorded turns are not counted with the model's own decoding, nor one agent's with another's)
    and, given ``origin`` (where a trace came from: a file's name, a session's live runs), from
    the same place: two runs of one traffic (say a shipped replay and one uploaded, each with
    trees of its own size) are not summed; ``named`` says an origin in the words. Without a
    selection, every such trace of the first traffic (and origin) among them."""
    keyed = [t for t in traces if not keyless(t.method, t)]
    if not keyed:
        return [], ""
    first = selected if selected is not None else keyed[0]
    scope = traffic(first)
    mine = [t for t in keyed if traffic(t) == scope]
    where = ""
    if origin is not None:
        where = origin(first)
        mine = [t for t in mine if origin(t) == where]
        where = f" · from {named(where)}" if where else ""
    n = len({t.request_id for t in mine})
    return mine, f"{n} request{'s' if n != 1 else ''}: {scope}{where}"


def method_looks(names: list[str]) -> dict[str, tuple[str, str]]:
    """Each method's colour and fill pattern: ``oilbird`` always the first of
    :data:`METHOD_COLOURS` (its colour does not change from a slide with one method to one with
    three), the others the next ones in order; the pattern tells them apart in greyscale."""
    order = sorted(names, key=lambda m: m != "oilbird")
    return {m: (METHOD_COLOURS[k % len(METHOD_COLOURS)], METHOD_PATTERNS[k % len(METHOD_PATTERNS)])
            for k, m in enumerate(order)}


def funnel_spec(source: dict | Iterable[RequestTrace], methods: list[str] | None = None,
                style: Style | None = None, scope: str = "") -> dict:
    """The funnel panel (see :func:`funnel_figure`) as a plain plotly spec; ``scope`` says what
    it counts, under the title (:func:`funnel_scope`)."""
    s = style_or_default(style)
    fun = as_funnel(source)
    names = [m for m in (methods or list(fun)) if m in fun]
    looks = method_looks(names)
    # side by side, or the losses under the stages where the figure is narrow (at 700 px the
    # losses' labels ran over the stages' bars)
    stacked = bool(s.width) and s.width < STACK_BELOW
    titles = ("cycles reaching each stage", "where right records were lost" if stacked
              else "where right records<br>were lost")
    axes, ref = (grid(2, 1, titles, vspace=0.12, row_heights=[len(STAGES), len(LOSSES)]) if stacked
                 else grid(1, 2, titles, hspace=0.28))
    stages_at, losses_at = ref[(1, 1)], ref[(2, 1)] if stacked else ref[(1, 2)]
    axes["annotations"] = list(axes["annotations"])
    stage_names = [name for _, name in STAGES]
    data, widest = [], [1, 1]
    for m in names:
        st = fun[m]["stages"]
        counts = [st[key] for key, _ in STAGES]
        tot = counts[0]
        hover = [f"{html.escape(m)} · {html.escape(name)}: {_cycles(n)}<br>"
                 f"{_pct(n, tot)} of the drafting cycles, {_pct(n, counts[i - 1] if i else tot)} of the stage above"
                 f"<br><i>{html.escape(STAGE_HELP[key])}</i>"
                 for i, ((key, name), n) in enumerate(zip(STAGES, counts))]
        colour, shape = looks[m]
        marker = {"color": colour, "pattern": {"shape": shape, "fgcolor": "#333333", **PATTERN}}
        # every value printed beside its bar: a printed page has no hover (inside the bars, plotly
        # hid them all once two methods shared a row)
        data.append({"type": "bar", "orientation": "h", "name": m, "y": stage_names, "x": counts,
                     "meta": f"funnel-{m}", "legendgroup": m, "marker": marker,
                     "text": [f"{n} ({_pct(n, tot)})" if i else str(n) for i, n in enumerate(counts)],
                     "textposition": "outside", "constraintext": "none", "cliponaxis": False,
                     "textfont": {"size": max(9, s.font_size - 1)},
                     "hoverinfo": "text", "hovertext": hover, "xaxis": stages_at[0], "yaxis": stages_at[1]})
        lost = fun[m]["lost"]
        short = fun[m]["tokens"]["short"]
        values = [lost.get(key, 0) for key in REACHED[:-1]] + [short.get(key, 0) for key in SHORT]
        right = st["right_any"]
        data.append({"type": "bar", "orientation": "h", "name": m, "y": list(LOSSES), "x": values,
                     "meta": f"lost-{m}", "legendgroup": m, "showlegend": False, "marker": marker,
                     "text": [str(v) for v in values], "textposition": "outside", "constraintext": "none",
                     "cliponaxis": False,
                     "textfont": {"size": max(9, s.font_size - 1)},
                     "hoverinfo": "text",
                     "hovertext": [f"{html.escape(m)} · {label}: {_cycles(v)} ({_pct(v, right)} of the {right} "
                                   f"with a right record)<br><i>{html.escape(why)}</i>"
                                   for label, v, why in zip(LOSSES, values, LOSS_WHY)],
                     "xaxis": losses_at[0], "yaxis": losses_at[1]})
        widest = [max(widest[0], *counts), max(widest[1], *values)]
    title = FUNNEL_TITLE + "".join(f"<br><span style='font-size:{s.font_size}px;color:#555'>{html.escape(x)}</span>"
                                   for x in wrap_to(scope, s, s.font_size))
    # the title's lines from the top, then the subplots' two-line titles above their plots: a
    # centred title in plotly's default 50 px ran into them
    top = 26 + (s.font_size + 6) * (title.count("<br>") + 1) + 2 * (s.font_size + 4) + 8
    # a stage's row holds a bar a method, each tall enough for its printed value (plotly shrinks
    # a value to its bar: with four methods they printed 5 px tall)
    row = max(41, 14 * len(names) + 10)
    plots = max(s.height - 10, len(STAGES) * row) if not stacked else (len(STAGES) + len(LOSSES)) * row + 60
    # the key at the figure's foot, under the axes' titles: placed by the plot's height (y -0.12 of
    # it), it overprinted "drafting cycles" in the app, whose plot is shorter than an export's
    # (as many rows as its entries take across the width: a wrapped key grows up from the foot)
    room = LEGEND_ROOM * legend_rows(names, s)
    layout = panel_layout(s, title, height=plots + top + room, barmode="group", bargap=0.25,
                          margin={"l": 40, "r": 10, "t": top, "b": 40 + room},
                          legend={"title": {"text": "method"}, "orientation": "h", "yref": "container", "y": 0,
                                  "yanchor": "bottom", "x": 0},
                          **axes)
    for (x, y), most in ((stages_at, widest[0]), (losses_at, widest[1])):
        layout[axis_key(y)].update({"autorange": "reversed", "automargin": True,
                                    "ticklabelstandoff": 6})         # the labels off the bars
        # room right of the longest bar for its printed value
        layout[axis_key(x)].update({"range": [0, most * (1.3 if x == stages_at[0] else 1.15)], "rangemode": "tozero"})
    # (what lost: and short: mean is in each bar's hover and in funnel_glossary; a note under the
    # axis was cut at the right edge of a projector-wide app)
    if stacked:     # the longest stage names on two lines: at 700 px they left the bars a third of the width
        layout[axis_key(stages_at[1])].update({"tickvals": stage_names, "ticktext": [
            name.replace(" (", "<br>(") if len(name) > 40 else name for name in stage_names]})
    layout[axis_key(stages_at[0])]["title"] = {"text": "drafting cycles"}
    layout[axis_key(losses_at[0])]["title"] = {"text": "cycles"}
    if not names:
        layout["annotations"].append(centred_note("no drafting cycles: no trace with a tree"))
    return {"data": data, "layout": pin_title(layout)}


GLOSSARY_WORDS = ("A *record* is one past position in the store (an earlier request's output token); the key "
                  "keeps the *top-k* (8 by default) records whose state is nearest this one's, among those "
                  "followed by the token just written. *Right* means the token that actually came next here "
                  "(the verifier's own; in a replay, the recording's). *lost:* rows count cycles whose right "
                  "record got no node; *short:* rows, cycles that accepted fewer tokens than the right record held.")


def legend_rows(names: list[str], s: Style) -> int:
    """The rows a horizontal key of ``names`` (after its title "method") takes across the figure:
    each entry its text, swatch and padding (the app's figure taken as :data:`TABLE_WIDTH` wide,
    its narrowest), with a little slack for plotly's own packing."""
    return max(1, key_rows(["method", *names], s, (s.width or TABLE_WIDTH) - 50))


def funnel_glossary() -> str:
    """The funnel's words for a class, as Markdown: what its words mean (:data:`GLOSSARY_WORDS`),
    then each stage and each loss in one line of plain words
    (:data:`oilbird.evaluation.funnel.STAGE_HELP`); the app shows it under the funnel, notebook
    01 beside it."""
    rows = [GLOSSARY_WORDS, "", "| stage | what it counts |", "| --- | --- |"]
    rows += [f"| {name} | {STAGE_HELP[key]} |" for key, name in STAGES]
    rows += [f"| {label} | {why} |" for label, why in zip(LOSSES, LOSS_WHY)]
    return "\n".join(rows)


def _cycles(n: int) -> str:
    return f"{n} cycle{'' if n == 1 else 's'}"


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "-"


def funnel_figure(source: dict | Iterable[RequestTrace], methods: list[str] | None = None,
                  style: Style | None = None, scope: str = "") -> go.Figure:
    """Where the semantic key's reach is lost, per method: the nested stages of
    :data:`oilbird.evaluation.funnel.STAGES` as one bar per method and stage, narrowing stage by
    stage (left), and the cycles whose right record was lost at the floor, to muting, copy depth
    or the budget, or which accepted fewer tokens than it held (right; below the stages in a
    figure narrower than :data:`STACK_BELOW` pixels). Every value is printed beside its bar (a
    printout has no hover); each method has its colour and fill pattern (:func:`method_looks`).
    ``source``: request traces (counted here) or a funnel dict (diagnosis.json's ``funnel``);
    ``methods`` picks and orders them (default: all)."""
    return figure(funnel_spec(source, methods, style, scope), style)
