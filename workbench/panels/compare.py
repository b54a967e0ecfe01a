"""The comparison panel: the same request under two methods, side by side (tokens per cycle
by source; the output as a source strip; the first differing token, if any). Reads two
:class:`~oilbird.trace.RequestTrace` of one request.
"""
from __future__ import annotations

import html

import plotly.graph_objects as go

from oilbird.trace import RequestTrace, lexical_sources

from ..palette import BONUS, SOURCE_PATTERNS, Style, area_colour, primary_source, shown_sources
from .base import (BY_PRIMARY_KEY, CHAR_EM, CURSOR, PATTERN, TABLE_WIDTH, axis_key, esc, figure, grid, label_of,
                   panel_layout, pin_title, style_or_default, vline, wrap_html)
from .provenance import REPLAYED, is_replay, live_mark, sampling_note, token_cycles, token_sources


def first_difference(a: list[int], b: list[int]) -> int | None:
    """First position where two token lists differ (or the shorter one ends); None if equal.

    >>> first_difference([1, 2, 3], [1, 5, 3])
    1
    """
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


def outputs_differ_why(a: RequestTrace, b: RequestTrace, diff: int) -> str:
    """Why two traces of one request may hold different outputs without either drafter being
    wrong (a lossless drafter commits what plain decoding of the same model commits), read from
    the traces; "" when nothing in them explains it (then it is worth a look: the audit's
    ``lossless`` says whether each run matched its reference)."""
    if a.model != b.model:
        return f"two models: {a.model}, {b.model}"
    if a.meta.get("sampling") != b.meta.get("sampling"):
        return "decoded " + " and ".join(sampling_note(r) or "greedy" for r in (a, b))
    short = a if len(a.output_ids) <= len(b.output_ids) else b
    if diff == len(short.output_ids) and short.stop == "limit":
        return f"{short.method}'s run stopped at a token limit of {diff}"
    return ""


def _compare_title(r: RequestTrace, s: Style) -> str:
    """A subplot title that fits half the figure: "method: τ 2.50" (the method name cut to
    what fits; the figure's title names both in full), then tokens and forwards on a second,
    smaller line, and what its store held when it began on a third where the trace says
    (:func:`store_at_start`). One line held all of it and ran into its neighbour at 1400 px."""
    half = ((s.width or TABLE_WIDTH) - 50) * 0.47 / (CHAR_EM * s.font_size)
    tau = f": τ {r.tau:.2f}"
    limit = max(8, int(half) - len(tau))
    name = html.escape(r.method if len(r.method) <= limit else r.method[: limit - 1] + "…")
    live = live_mark(r)      # beside a shipped trace, say which is which
    held = store_at_start(r)
    # what each side's cross-request store held: a live run's first request starts empty, a shipped
    # trace's after its file's earlier requests, and the two taus are not alike without it
    store = "" if held is None else "<br>store empty at its start" if held == 0 else \
        f"<br>store at its start: {held:,} earlier tokens"
    return (f"{name}{tau}<br><span style='font-size:{s.font_size - 1}px;color:#555'>"
            f"{len(r.output_ids)} tokens / {r.forwards} forwards{live}{store}</span>")


def _pattern(sources) -> dict:
    """The fill pattern of one source's bars, or per bar of a list (the cue beside the hue:
    :data:`~workbench.palette.SOURCE_PATTERNS`; none for a source it does not know)."""
    shape = ([SOURCE_PATTERNS.get(x, "") for x in sources] if isinstance(sources, list)
             else SOURCE_PATTERNS.get(sources, ""))
    return {"shape": shape, "fgcolor": "#333333", **PATTERN}


def store_at_start(r: RequestTrace) -> int | None:
    """How many earlier output tokens the cross-request store held when ``r`` began (its first
    drafting cycle's ``store_records``); None where the trace does not say."""
    return next((c.store_records for c in r.cycles if c.store_records is not None), None)


def compare_spec(a: RequestTrace, b: RequestTrace, selection: int | None = None,
                 style: Style | None = None) -> dict:
    """Two methods on the same request (see :func:`compare_figure`)."""
    if a.request_id != b.request_id:
        raise ValueError(f"compare needs two traces of the same request, got {a.request_id!r} and {b.request_id!r}")
    s = style_or_default(style)
    titles = tuple(_compare_title(r, s) for r in (a, b))
    axes, ref = grid(2, 2, titles, hspace=0.06, vspace=0.2, row_heights=[0.72, 0.28])
    axes["yaxis2"]["matches"] = "y"
    counts: dict[int, dict[str, list[int]]] = {}     # column -> source -> tokens per cycle
    lexical = {1: lexical_sources(a), 2: lexical_sources(b)}     # each side's exact-match sources
    for col, r in ((1, a), (2, b)):
        counts[col] = {}
        for i, c in enumerate(r.cycles):
            for srcs in c.committed_sources:
                counts[col].setdefault(primary_source(srcs or [BONUS], lexical[col]), [0] * len(r.cycles))[i] += 1
    order = shown_sources(set(counts[1]) | set(counts[2]))
    data, shapes = [], []
    pos = a.cycles[selection].generated_before if selection is not None and 0 <= selection < len(a.cycles) else None
    b_cycles = token_cycles(b)                       # the cycle index of b that committed each token
    for col, r in ((1, a), (2, b)):
        xr, yr = ref[(1, col)]
        cyc = [c.cycle for c in r.cycles]
        for k in order:
            data.append({"type": "bar", "x": cyc, "y": counts[col].get(k, [0] * len(r.cycles)),
                         "name": label_of(k, is_replay(r)), "legendgroup": k,
                         "showlegend": col == 1, "marker": {"color": area_colour(k, s), "pattern": _pattern(k)},
                         "meta": f"{r.method}:{k}",
                         "hovertemplate": f"{html.escape(r.method)} cycle %{{x}}: %{{y}} coloured {k} (one source "
                                          f"per token, exact match first)<extra></extra>",
                         "xaxis": xr, "yaxis": yr})
        srcs = token_sources(r)
        prim = [primary_source(x or [BONUS], lexical[col]) for x in srcs]
        xs, ys = ref[(2, col)]
        data.append({"type": "bar", "x": list(range(len(prim))), "y": [1] * len(prim), "width": 1,
                     "showlegend": False, "marker": {"color": [area_colour(p, s) for p in prim], "line": {"width": 0},
                                                     "pattern": _pattern(prim)},
                     "hovertext": [f"token {k}: {esc(r.output_text[k]) if k < len(r.output_text) else '?'}"
                                   f"<br>{', '.join(x)}" for k, x in enumerate(srcs)],
                     "hoverinfo": "text", "name": f"{r.method} tokens", "meta": f"{r.method}:strip",
                     "xaxis": xs, "yaxis": ys})
        # the cursor marks the same output position in both columns: the selected cycle of ``a``,
        # and the cycle of ``b`` that committed the token where that cycle began (the same cycle
        # number is another place in the output when the two draft differently)
        k = selection if r is a else (b_cycles[pos] if pos is not None and pos < len(b_cycles) else None)
        if k is not None and 0 <= k < len(r.cycles):
            shapes.append(vline(r.cycles[k].cycle, xr, yr, CURSOR))
        if pos is not None:
            shapes.append(vline(pos, xs, ys, CURSOR))
        axes[axis_key(xr)]["title"] = {"text": "cycle"}
        axes[axis_key(xs)]["title"] = {"text": "output token", "standoff": 2}
        axes[axis_key(ys)]["visible"] = False
    axes["yaxis"]["title"] = {"text": "tokens"}
    diff = first_difference(a.output_ids, b.output_ids)
    # the verdict on a second line: at half the page's width one line was cut off before it
    head = wrap_html(f"{a.method} vs {b.method} · {a.request_id}", s, s.font_size + 2)
    if diff is None:
        verdict, said = "identical outputs", ""
    else:
        why = outputs_differ_why(a, b, diff)
        verdict, said = f"outputs differ from token {diff}", f" ({why})" if why else ""
        shapes += [vline(diff - 0.5, *ref[(2, col)], {"width": 2, "color": "#111111"}) for col in (1, 2)]
    # the verdict wrapped to an export's width too (with its reason it ran ~100 characters), its
    # first words bold where the outputs differ
    shown = wrap_html(verdict + said + (REPLAYED if is_replay(a) else ""), s, s.font_size)
    if diff is not None:
        shown = shown.replace(verdict, f"<b>{verdict}</b>", 1)
    title = f"{head}<br><span style='font-size:{s.font_size}px'>{shown}</span>"
    # the title's lines from the top, then the subplot titles' lines (two, or three with a
    # store line) above the plots: at a fixed 115 px a third line ran into the verdict
    lines = max(t.count("<br>") + 1 for t in titles)
    top = 26 + (title.count("<br>") + 1) * (s.font_size + 8) + lines * (s.font_size + 4) + 8
    layout = panel_layout(s, title, height=max(s.height, 485) + top - 115, barmode="stack", bargap=0.15,
                          shapes=shapes, margin={"l": 40, "r": 10, "t": top, "b": 60},
                          legend={"orientation": "h", "y": -0.14, "title": {"text": BY_PRIMARY_KEY, "side": "top"}},
                          **axes)
    return {"data": data, "layout": pin_title(layout)}


def compare_figure(a: RequestTrace, b: RequestTrace, selection: int | None = None,
                   style: Style | None = None) -> go.Figure:
    """Two methods on the same request side by side: tokens per cycle stacked by the source
    that delivered them (top, shared y axis), and the output tokens (x: token position) as a
    strip coloured by delivering source (bottom). Both count each token once, under one
    source, exact match first (:func:`~workbench.palette.primary_source`, as the text does; the metrics'
    share splits it instead), and say so. Subplot titles give each method's tau on a line that
    fits half the figure, tokens and forwards below it. Lossless methods have
    identical outputs; if they differ, the title says from which token and the strips mark it.
    ``selection``: a cycle index of ``a``, marked at the same output position in both
    columns (in ``b``'s, the cycle that committed the token where ``a``'s began) and on both
    token strips."""
    return figure(compare_spec(a, b, selection, style), style)

