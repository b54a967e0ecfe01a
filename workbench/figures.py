"""Figures of the workbench: pure functions of trace records, shared by the app and notebooks.

Every figure comes in two forms with the same arguments ``(trace, selection, style)``:

* ``X_figure(...) -> plotly.graph_objects.Figure``: validated, for notebooks and exports;
* ``X_spec(...) -> dict``: the same figure as a plain plotly JSON dict (``{"data", "layout"}``),
  built without plotly's per-property validation (~100x cheaper), which the app sends to the
  browser as is (:func:`spec_json`). ``X_figure`` is ``figure(X_spec(...))``, so the tests that
  validate the figures also validate what the app shows.

Arguments: ``trace`` is a :class:`~oilbird.trace.CycleTrace` or
:class:`~oilbird.trace.RequestTrace` (read only; never the model, the store or the sources);
``selection`` says what to emphasise (for request-level figures: a cycle index into
``request.cycles``; ``None`` = the whole request); ``style`` is a
:class:`~workbench.palette.Style` (``None``: the default). Nothing global is read or written;
colours, markers and line styles come from :mod:`workbench.palette`. From a notebook::

    from oilbird.trace import load_traces
    from workbench import figures as F
    req = load_traces("assets/traces/builtin.jsonl")[1]
    F.tree_figure(req.cycles[3])
    F.metrics_figure(req, cycle=3)

Every legend lists all sources / statuses / labels even when a view has none of them (legend
entries are carried by data-less traces, ``x=[None]``), so the key never changes between views;
a source the palette does not know gets a grey entry of its own where it appears
(:func:`~workbench.palette.shown_sources`).
Tokens are shown with whitespace made visible (:func:`visible`).
"""
from __future__ import annotations

import html
from collections.abc import Iterable
from itertools import accumulate

import networkx as nx
import plotly.graph_objects as go
import plotly.io as pio

from oilbird.trace import CycleTrace, RequestTrace

from .palette import (ALL_SOURCES, BONUS, DEFAULT_STYLE, GAP_COLOURS, GAP_DESCRIPTIONS, GAP_LABELS,
                      GAP_PATTERNS, MULTI_SOURCE_RING, ROOT, STAGE_COLOURS, STAGE_PATTERNS,
                      STAGES, STATUS_STYLES, Style, primary_source, shown_sources, source_label,
                      source_symbol)

WHITESPACE = {" ": "·", "\n": "⏎", "\t": "→", "\r": "␍"}
CURSOR = {"width": 1.5, "dash": "dot", "color": "#D55E00"}   # the selected-cycle marker line
PATTERN = {"fillmode": "overlay", "size": 8, "solidity": 0.25}  # hatching drawn over the fill colour


# --------------------------------------------------------------------------- text helpers

def visible(token: str) -> str:
    """A token with its whitespace made visible: space '·', newline '⏎', tab '→', CR '␍';
    the empty string (e.g. EOS) becomes '∅'.

    >>> visible(' "a":\\n')
    '·"a":⏎'
    """
    return "".join(WHITESPACE.get(ch, ch) for ch in token) if token else "∅"


def _esc(token: str, limit: int | None = None) -> str:
    """Whitespace made visible, optionally cut, then HTML-escaped (plotly text is HTML-ish)."""
    v = visible(token)
    if limit is not None and len(v) > limit:
        v = v[: max(1, limit - 1)] + "…"
    return html.escape(v, quote=False)


# --------------------------------------------------------------------------- spec plumbing

def figure(spec: dict, style: Style | None = None) -> go.Figure:
    """A validated plotly Figure from a spec, with ``style.template`` applied."""
    return go.Figure({**spec, "layout": {**spec.get("layout", {}), "template": _style(style).template}})


def spec_json(spec: dict) -> str:
    """The spec as plotly JSON, without validation (what the app sends to the browser)."""
    return pio.to_json(spec, validate=False)


def _style(style: Style | None) -> Style:
    return style if style is not None else DEFAULT_STYLE


def _layout(s: Style, title: str, height: int | None = None, **extra) -> dict:
    lay = {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": s.font_size + 2}},
        "height": height or s.height,
        "font": {"family": s.font_family, "size": s.font_size},
        "margin": {"l": 40, "r": 10, "t": 50, "b": 40},
        "hoverlabel": {"font": {"family": s.font_family}},
        "showlegend": True,
        "plot_bgcolor": "white",
        "paper_bgcolor": "white",
    }
    if s.width:
        lay["width"] = s.width
    lay.update(extra)
    return lay


def _legend_marker(source: str, s: Style) -> dict:
    """A data-less trace that only carries a legend entry for ``source``."""
    return {"type": "scatter", "x": [None], "y": [None], "mode": "markers", "name": source_label(source),
            "legendgroup": source, "showlegend": True, "hoverinfo": "skip",
            "marker": {"color": s.colour(source), "symbol": source_symbol(source), "size": 11,
                       "line": {"width": 1, "color": "#222222"}}}


def _note(text: str, y: float = 0.5) -> dict:
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": y, "showarrow": False,
            "font": {"size": 13, "color": "#555555"}}


def _grid(rows: int, cols: int, titles: tuple = (), hspace: float = 0.1, vspace: float = 0.2,
          row_heights: list[float] | None = None) -> tuple[dict, dict]:
    """Axes for a rows x cols grid of subplots (what ``make_subplots`` does, at no cost).

    Returns (layout fragment, ``{(row, col): (xref, yref)}``), rows counted from the top.
    """
    hs = row_heights or [1.0] * rows
    total = sum(hs)
    usable_h, w = 1 - vspace * (rows - 1), (1 - hspace * (cols - 1)) / cols
    layout: dict = {"annotations": []}
    refs: dict = {}
    top, k = 1.0, 0
    for r in range(rows):
        h = hs[r] / total * usable_h
        for c in range(cols):
            k += 1
            suffix = "" if k == 1 else str(k)
            x0 = c * (w + hspace)
            layout[f"xaxis{suffix}"] = {"domain": [_unit(x0), _unit(x0 + w)], "anchor": f"y{suffix}"}
            layout[f"yaxis{suffix}"] = {"domain": [_unit(top - h), _unit(top)], "anchor": f"x{suffix}"}
            refs[(r + 1, c + 1)] = (f"x{suffix}", f"y{suffix}")
            if k <= len(titles) and titles[k - 1]:
                layout["annotations"].append({"text": titles[k - 1], "xref": "paper", "yref": "paper",
                                              "x": x0 + w / 2, "y": top, "xanchor": "center",
                                              "yanchor": "bottom", "showarrow": False})
        top -= h + vspace
    return layout, refs


def _unit(v: float) -> float:
    """Clamp a paper coordinate to [0, 1] (float sums can land a hair outside)."""
    return min(1.0, max(0.0, round(v, 6)))


def _axis(ref: str) -> str:
    """'x3' -> 'xaxis3' (the layout key of an axis reference)."""
    return ref[0] + "axis" + ref[1:]


def _vline(x: float, xref: str, yref: str, line: dict) -> dict:
    return {"type": "line", "x0": x, "x1": x, "y0": 0, "y1": 1, "xref": xref, "yref": f"{yref} domain",
            "line": line}


# --------------------------------------------------------------------------- provenance

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
    proposed its node (the rule of ``oilbird.bench``), so the shares add up to 1.
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


# --------------------------------------------------------------------------- draft tree

def tree_layout(parents: list[int]) -> dict[int, tuple[float, float]]:
    """Tidy layered layout of a draft tree: x = depth, one row per leaf, parents centred.

    Leaves take consecutive rows in depth-first order (children in index order, so the spine,
    usually nodes 1, 2, ..., is on top); an inner node sits midway between its first and last
    child. Returns ``{node: (x, y)}`` with y decreasing downwards.

    >>> tree_layout([-1, 0, 0])
    {0: (0.0, -0.5), 1: (1.0, -0.0), 2: (1.0, -1.0)}
    """
    if not parents:
        return {}
    g = nx.DiGraph()
    g.add_nodes_from(range(len(parents)))
    g.add_edges_from((p, i) for i, p in enumerate(parents) if p >= 0)
    depth = nx.single_source_shortest_path_length(g, 0)
    row: dict[int, float] = {}
    next_row = 0
    for node in nx.dfs_postorder_nodes(g, 0):
        kids = list(g.successors(node))
        if kids:
            row[node] = (row[kids[0]] + row[kids[-1]]) / 2
        else:
            row[node] = next_row
            next_row += 1
    return {i: (float(depth.get(i, 0)), -float(row.get(i, 0))) for i in range(len(parents))}


def _node_hover(c: CycleTrace, i: int, status: str) -> str:
    srcs = c.sources[i] if i < len(c.sources) else []
    scores = c.scores[i] if i < len(c.scores) else {}
    src_txt = (", ".join(f"{s} {scores[s]:.3g}" if s in scores else s for s in srcs)
               or "— (root: newest committed token)")
    lines = [f"<b>node {i}</b> · depth {c.depths[i] if i < len(c.depths) else '?'} · {status}",
             f"token: {_esc(c.token_text[i]) if i < len(c.token_text) else '?'} (id {c.tokens[i]})",
             f"sources: {html.escape(src_txt)}"]
    if i < len(c.argmax):
        am = _esc(c.argmax_text[i]) if i < len(c.argmax_text) else "?"
        lines.append(f"verifier argmax here: {am} (id {c.argmax[i]})")
    return "<br>".join(lines)


def tree_spec(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
              keyed: Iterable[str] = ()) -> dict:
    """The draft tree of one cycle (see :func:`tree_figure`)."""
    s = _style(style)
    n = len(cycle.tokens)
    accepted = set(cycle.accepted)
    pos = tree_layout(cycle.parents)
    status = ["accepted" if i in accepted else "rejected" for i in range(n)]
    data: list[dict] = []

    # edges, one trace per status
    edges: dict[str, tuple[list, list]] = {"accepted": ([], []), "rejected": ([], []), "bonus": ([], [])}
    for i in range(1, n):
        p = cycle.parents[i]
        xs, ys = edges[status[i]]
        xs += [pos[p][0], pos[i][0], None]
        ys += [pos[p][1], pos[i][1], None]
    # the bonus token: a pseudo node after the last accepted node (alone on the prefill cycle)
    bonus_xy = None
    if cycle.bonus >= 0:
        if n:
            last = cycle.accepted[-1] if cycle.accepted else 0
            bx, by = pos[last][0] + 1, pos[last][1]
            if any(abs(x - bx) < 1e-9 and abs(y - by) < 1e-9 for x, y in pos.values()):
                by += 0.5
            bonus_xy = (bx, by)
            edges["bonus"][0].extend([pos[last][0], bx, None])
            edges["bonus"][1].extend([pos[last][1], by, None])
        else:
            bonus_xy = (1.0, 0.0)
    for st, (xs, ys) in edges.items():
        ls = STATUS_STYLES[st]
        data.append({"type": "scatter", "x": xs or [None], "y": ys or [None], "mode": "lines",
                     "name": ls.label, "legendgroup": f"status-{st}", "hoverinfo": "skip",
                     "opacity": ls.opacity, "line": {"width": ls.width, "dash": ls.dash, "color": ls.colour},
                     "meta": f"edges-{st}"})

    # a ring under nodes that several sources proposed
    multi = [i for i in range(1, min(n, len(cycle.sources))) if len(cycle.sources[i]) > 1]
    data.append({"type": "scatter", "x": [pos[i][0] for i in multi] or [None],
                 "y": [pos[i][1] for i in multi] or [None], "mode": "markers", "name": "several sources",
                 "legendgroup": "multi", "hoverinfo": "skip", "meta": "multi-source",
                 "marker": {"symbol": "circle-open", "size": s.node_size + 12, "color": MULTI_SOURCE_RING,
                            "line": {"width": 2}}})

    # nodes, one trace per primary source
    groups: dict[str, list[int]] = {}
    for i in range(n):
        src = ROOT if i == 0 else primary_source(cycle.sources[i] if i < len(cycle.sources) else [])
        groups.setdefault(src, []).append(i)
    mode = "markers+text" if s.show_node_labels else "markers"
    for src in sorted(groups, key=lambda x: ALL_SOURCES.index(x) if x in ALL_SOURCES else 99):
        idx = groups[src]
        data.append({
            "type": "scatter", "x": [pos[i][0] for i in idx], "y": [pos[i][1] for i in idx], "mode": mode,
            "text": [_esc(cycle.token_text[i], s.max_label_chars) if i < len(cycle.token_text) else ""
                     for i in idx],
            "textposition": "top center", "textfont": {"size": s.font_size - 1},
            "hovertext": [_node_hover(cycle, i, status[i]) for i in idx], "hoverinfo": "text",
            "name": source_label(src), "legendgroup": src, "showlegend": False, "customdata": idx,
            "marker": {"color": s.colour(src), "symbol": source_symbol(src), "size": s.node_size,
                       "opacity": [STATUS_STYLES[status[i]].opacity for i in idx],
                       "line": {"width": [3.0 if i == selection else STATUS_STYLES[status[i]].marker_line
                                          for i in idx],
                                "color": ["#D55E00" if i == selection else "#111111" for i in idx]}},
            "meta": src})
    if bonus_xy is not None:
        ls = STATUS_STYLES["bonus"]
        tok = cycle.committed_text[-1] if cycle.committed_text else ""
        data.append({
            "type": "scatter", "x": [bonus_xy[0]], "y": [bonus_xy[1]], "mode": mode,
            "text": [_esc(tok, s.max_label_chars)], "textposition": "top center",
            "textfont": {"size": s.font_size - 1},
            "hovertext": [f"<b>bonus token</b>: {_esc(tok)} (id {cycle.bonus})<br>"
                          "the verifier's own next token after the last accepted node"],
            "hoverinfo": "text", "name": source_label(BONUS), "legendgroup": BONUS, "showlegend": False,
            "marker": {"color": s.colour(BONUS), "symbol": source_symbol(BONUS), "size": s.node_size + 4,
                       "line": {"width": ls.marker_line, "color": "#111111"}},
            "meta": BONUS})
    # a peer's or an unknown source gets a key entry too: where it drew a node, or where the
    # caller keys it (a request's sources, so the key stays the same on every cycle)
    extra = [x for x in shown_sources(set(groups) | set(keyed)) if x not in ALL_SOURCES]
    data.extend(_legend_marker(src, s) for src in list(ALL_SOURCES) + extra)

    head = f"{html.escape(cycle.request_id)} · {html.escape(cycle.method)} · cycle {cycle.cycle}"
    notes = []
    if n:
        title = f"{head}: {max(0, len(cycle.accepted) - 1)} of {n - 1} drafts accepted + bonus"
        flags = ([f"lexical match {cycle.lexical_match_len}"] if cycle.lexical_match_len else []) + \
                (["semantic muted"] if cycle.semantic_muted else []) + \
                ([f"cut from {cycle.drafted - 1} drafts: the rest would not pay for its verify cost"]
                 if cycle.drafted > n else [])
        if flags:
            title += f" <span style='font-size:{s.font_size}px'>({', '.join(flags)})</span>"
    else:
        title = head
        notes.append(_note("cycle 0 is the prefill forward: no draft tree;<br>"
                           "the verifier gives the first token", y=0.85))
    max_depth = max((p[0] for p in pos.values()), default=0) + 1
    rows = -min((p[1] for p in pos.values()), default=0)
    layout = _layout(s, title, annotations=notes, dragmode="pan",
                     legend={"itemsizing": "constant", "tracegroupgap": 2},
                     xaxis={"title": {"text": "depth"}, "dtick": 1, "range": [-0.5, max_depth + 0.7],
                            "zeroline": False, "showgrid": True, "gridcolor": "#EEEEEE"},
                     yaxis={"visible": False, "range": [-rows - 0.6, 0.8]})
    return {"data": data, "layout": layout}


def tree_figure(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
                keyed: Iterable[str] = ()) -> go.Figure:
    """The draft tree of one cycle.

    One marker per draft node at (depth, row) (:func:`tree_layout`), coloured and shaped by its
    most specific source (:func:`workbench.palette.primary_source`; a grey ring marks nodes that
    several sources proposed, and the hover lists them all with their scores and the verifier's
    argmax at the node); the accepted path is drawn bold and opaque, rejected nodes faded with
    dashed edges, and the bonus token (the verifier's own next token) hangs off the last
    accepted node with a dotted edge. ``selection``: a node index to outline. ``keyed``: sources
    to list in the key even where this cycle drew none of their nodes; pass
    :func:`drafted_sources` of the request so that a peer's source (``suffix-arctic``) or an
    unknown one keeps its key entry on every cycle.

    Traces, in order: one edge trace per status (``meta`` "edges-accepted" / "edges-rejected" /
    "edges-bonus"), the several-sources ring ("multi-source"), one node trace per source present
    (``meta`` = the source; root first), the bonus node ("bonus"), then one legend-only trace per
    source in :data:`~workbench.palette.ALL_SOURCES` and per other source in the tree or in ``keyed``.
    """
    return figure(tree_spec(cycle, selection, style, keyed), style)


# --------------------------------------------------------------------------- committed text

def _token_rows(pieces: list[str], line_chars: int) -> list[tuple[int, int, int]]:
    """(row, start column, width) of each token when the text wraps at ``line_chars``
    characters; a token containing a newline ends its row."""
    out, row, col = [], 0, 0
    for p in pieces:
        w = max(1, len(visible(p)))
        if col and col + w > line_chars:
            row, col = row + 1, 0
        out.append((row, col, w))
        col += w
        if "\n" in p:
            row, col = row + 1, 0
    return out


def text_spec(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> dict:
    """The generated text so far (see :func:`text_figure`)."""
    s = _style(style)
    upto = committed_upto(request, cycle)
    pieces = request.output_text[:upto]
    srcs = token_sources(request)
    cyc = token_cycles(request)
    rows = _token_rows(pieces, s.line_chars)
    lines: list[list[int]] = [[] for _ in range((rows[-1][0] + 1) if rows else 0)]
    for k, (r, _, _) in enumerate(rows):
        lines[r].append(k)

    def span(k: int) -> str:
        src = primary_source(srcs[k] if k < len(srcs) else [BONUS])
        t = _esc(pieces[k])
        if cycle is not None and k < len(cyc) and cyc[k] == cycle:
            t = f"<b><u>{t}</u></b>"
        return f"<span style='color:{s.colour(src)}'>{t}</span>"

    def hover(k: int) -> str:
        return (f"{k}: {_esc(pieces[k])} ← {', '.join(srcs[k]) if k < len(srcs) else '?'}"
                f" (cycle {request.cycles[cyc[k]].cycle if k < len(cyc) else '?'})")

    # one text element per line, left-aligned, so the monospace tokens sit edge to edge
    data = [{"type": "scatter", "x": [0] * len(lines), "y": [-r for r in range(len(lines))], "mode": "text",
             "text": ["".join(span(k) for k in ks) for ks in lines], "textposition": "middle right",
             "textfont": {"size": s.font_size + 1}, "hovertext": ["<br>".join(hover(k) for k in ks) for ks in lines],
             "hoverinfo": "text", "showlegend": False, "name": "text", "meta": "text"}]
    data.extend(_legend_marker(src, s) for src in shown_sources(primary_source(x) for x in srcs))
    n_rows = max(1, len(lines))
    title = (f"{html.escape(request.request_id)} · {html.escape(request.method)}: "
             f"{upto} of {len(request.output_ids)} tokens")
    layout = _layout(s, title, height=max(170, 120 + 24 * n_rows),
                     annotations=[] if pieces else [_note("no tokens committed yet")],
                     legend={"orientation": "h", "y": -0.02, "yanchor": "top"},
                     margin={"l": 10, "r": 10, "t": 50, "b": 10},
                     xaxis={"visible": False, "range": [-0.02, 1]},
                     yaxis={"visible": False, "range": [-n_rows + 0.5, 0.7]})
    return {"data": data, "layout": layout}


def text_figure(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> go.Figure:
    """The generated text through cycle index ``cycle``, each token coloured by the source that
    delivered it (``CycleTrace.committed_sources``; ``<span style='color:...'>`` inside one
    text element per line); the tokens committed in that cycle are bold and underlined.
    Whitespace is visible; lines wrap at ``style.line_chars``. Trace 0 holds the lines, then
    one legend-only trace per source."""
    return figure(text_spec(request, cycle, style), style)


def counter_html(request: RequestTrace, cycle: int) -> str:
    """The cycle counter above the tree: "cycle k / n · request · method · tokens so far"."""
    c = cycle_at(request, cycle)
    live = " · live run" if request.meta.get("live") else ""
    if c is None:
        return (f"<b>no cycles</b> · {html.escape(request.request_id)} · {html.escape(request.method)}{live} · "
                f"{len(request.output_ids)} tokens · {NO_CYCLES}")
    return (f"<b>cycle {cycle} / {len(request.cycles) - 1}</b> · {html.escape(request.request_id)} · "
            f"{html.escape(request.method)}{live} · {committed_upto(request, cycle)} of "
            f"{len(request.output_ids)} tokens · {len(c.committed)} committed this cycle")


TEXT_BORDERS = {"semantic": "double", "rejected": "dashed", "suffix": "solid",
                "pld": "solid", "recycling": "dashed", BONUS: "dotted"}


def text_html(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> str:
    """The view of :func:`text_figure` as an HTML fragment (the app's text panel).

    Each token is a ``<span class="tok" data-source=...>`` coloured by its delivering source,
    with a bottom border whose line style also says the source; the tokens of the selected
    cycle get a pale highlight; the ``title`` attribute is the hover text.
    """
    s = _style(style)
    upto = committed_upto(request, cycle)
    srcs = token_sources(request)
    cyc = token_cycles(request)
    parts = []
    for k, piece in enumerate(request.output_text[:upto]):
        ss = srcs[k] if k < len(srcs) else [BONUS]
        src = primary_source(ss)
        now = cycle is not None and k < len(cyc) and cyc[k] == cycle
        css = (f"color:{s.colour(src)};border-bottom:3px {TEXT_BORDERS.get(src, 'solid')} {s.colour(src)};"
               + ("background:#F0E44266;" if now else ""))
        tip = html.escape(f"token {k} (id {request.output_ids[k]}), delivered by {', '.join(ss)}", quote=True)
        parts.append(f'<span class="tok" data-source="{src}" title="{tip}" style="{css}">'
                     f"{html.escape(visible(piece))}</span>")
        if "\n" in piece:
            parts.append("<br>")
    legend = " ".join(
        f'<span style="color:{s.colour(x)};border-bottom:3px {TEXT_BORDERS.get(x, "solid")} {s.colour(x)}">'
        f"{html.escape(source_label(x))}</span>" for x in shown_sources(primary_source(x) for x in srcs))
    body = "".join(parts) or '<span style="color:#777">(no tokens committed yet)</span>'
    return (f'<div class="wb-text" style="font-family:{s.font_family};line-height:1.9;'
            f'word-break:break-all">{body}</div>'
            f'<div class="wb-legend" style="font-size:0.85em;margin-top:4px">{legend}</div>')


# --------------------------------------------------------------------------- neighbours

def _context_html(nb, s: Style) -> str:
    parts = [f"<b><span style='color:{s.colour('semantic')}'>[{_esc(t)}]</span></b>"
             if j == nb.context_index else _esc(t) for j, t in enumerate(nb.context_text)]
    return "".join(parts) or "—"


def _no_neighbours_why(cycle: CycleTrace) -> str:
    """Why a cycle retrieved nothing; on the prefill no lookup runs at all, so the usual
    reasons would mislead."""
    if cycle.cycle == 0 and not cycle.tokens:
        return "cycle 0 is the prefill: nothing is drafted, so nothing is retrieved"
    return ("semantic source muted by self-calibration" if cycle.semantic_muted else
            "no lexical match, no semantic source, or an empty store")


def neighbours_spec(cycle: CycleTrace, selection: int | None = None, style: Style | None = None) -> dict:
    """The nearest-neighbour table of one cycle (see :func:`neighbours_figure`)."""
    s = _style(style)
    order = sorted(range(len(cycle.neighbours)), key=lambda k: -cycle.neighbours[k].similarity)
    header = ["#", "similarity", "from", "context (matched token in [ ])", "proposed", "accepted",
              "lexical key?"]
    if order:
        nbs = [cycle.neighbours[k] for k in order]
        cols = [
            [str(k) for k in order],
            [f"{nb.similarity:.3f}" for nb in nbs],
            [f"{html.escape(nb.request_id)} @ {nb.position}" for nb in nbs],
            [_context_html(nb, s) for nb in nbs],
            ["".join(_esc(t) for t in nb.proposed_text) or "— (below depth floor)" for nb in nbs],
            [f"{nb.accepted} / {len(nb.walked_nodes) or len(nb.proposed)}" for nb in nbs],
            ["yes" if nb.lexical_reachable else "<b>no</b>" for nb in nbs],
        ]
        fill = [["#FBE3D6" if k == selection else ("#F3F3F3" if r % 2 else "white")
                 for r, k in enumerate(order)]]
    else:
        cols = [[""], [""], [""], ["no neighbours this cycle"], [""], [""], [""]]
        fill = [["white"]]
    table = {"type": "table", "columnwidth": [18, 45, 80, 220, 120, 45, 50], "meta": "neighbours",
             "header": {"values": [f"<b>{h}</b>" for h in header], "align": "left", "fill": {"color": "#E8E8E8"},
                        "font": {"size": s.font_size}},
             "cells": {"values": cols, "align": "left", "fill": {"color": fill}, "height": 24,
                       "font": {"size": s.font_size - 1}}}
    title = (f"nearest neighbours · {html.escape(cycle.request_id)} · {html.escape(cycle.method)} · "
             f"cycle {cycle.cycle}: {len(order)} retrieved")
    if not order:
        why = _no_neighbours_why(cycle)
        title += f"<br><span style='font-size:{s.font_size - 1}px;color:#777'>({why})</span>"
    layout = _layout(s, title, height=max(190, 120 + 26 * max(1, len(order))),
                     margin={"l": 10, "r": 10, "t": 60, "b": 10})
    return {"data": [table], "layout": layout}


def neighbours_figure(cycle: CycleTrace, selection: int | None = None, style: Style | None = None) -> go.Figure:
    """A table of the store records the semantic key retrieved in this cycle, most similar
    first: cosine similarity, the request and position it came from, its context with the
    matched token in brackets, the continuation it proposed, how many of its chain's nodes the
    verifier accepted, and whether a lexical source proposed the same first token (the
    "lexical key?" column: "no" is what no lexical source could propose; the rejected-branch
    pool still may have).
    ``selection``: a neighbour index (into ``cycle.neighbours``) to highlight."""
    return figure(neighbours_spec(cycle, selection, style), style)


def neighbours_html(cycle: CycleTrace, selection: int | None = None, style: Style | None = None) -> str:
    """The table of :func:`neighbours_figure` as an HTML fragment (the app's panel: a plain
    table redraws far faster than a plotly one on every step)."""
    s = _style(style)
    order = sorted(range(len(cycle.neighbours)), key=lambda k: -cycle.neighbours[k].similarity)
    head = "".join(f"<th>{h}</th>" for h in ("#", "similarity", "from", "context (matched token in [ ])",
                                              "proposed", "accepted", "lexical key?"))
    rows = []
    for k in order:
        nb = cycle.neighbours[k]
        ctx = "".join(f"<b style='color:{s.colour('semantic')}'>[{_esc(t)}]</b>" if j == nb.context_index
                      else _esc(t) for j, t in enumerate(nb.context_text)) or "—"
        prop = "".join(_esc(t) for t in nb.proposed_text) or "— (below depth floor)"
        bg = " style='background:#FBE3D6'" if k == selection else ""
        rows.append(f"<tr{bg}><td>{k}</td><td>{nb.similarity:.3f}</td><td>{html.escape(nb.request_id)} @ "
                    f"{nb.position}</td><td class='mono'>{ctx}</td><td class='mono'>{prop}</td>"
                    f"<td>{nb.accepted} / {len(nb.walked_nodes) or len(nb.proposed)}</td>"
                    f"<td>{'yes' if nb.lexical_reachable else '<b>no</b>'}</td></tr>")
    if not rows:
        why = _no_neighbours_why(cycle)
        rows.append(f"<tr><td colspan='7' style='color:#777'>no neighbours this cycle ({why})</td></tr>")
    return (f"<div class='wb-neighbours'><b>nearest neighbours</b> · cycle {cycle.cycle}: {len(order)} retrieved"
            f"<table style='font-size:0.85em;width:100%'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


# --------------------------------------------------------------------------- gap strip

GAP_SCOPE = "labels describe the output (the same for every method), not how {method} drafted it"


def gap_strip_spec(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> dict:
    """The per-token gap labels of one request (see :func:`gap_strip_figure`)."""
    s = _style(style)
    labels = request.gap_labels
    n = len(request.output_ids)
    by: dict[str, list[int]] = {g: [] for g in GAP_LABELS}
    for k, lab in enumerate(labels or []):
        by.setdefault(lab, []).append(k)
    data = []
    for lab, ks in by.items():
        count = len(ks) if labels is not None else "–"
        data.append({
            "type": "bar", "x": ks or [None], "y": [1] * len(ks) if ks else [None], "width": 1,
            "name": f"{GAP_DESCRIPTIONS.get(lab, lab)} ({count})", "legendgroup": lab, "showlegend": True,
            "marker": {"color": GAP_COLOURS.get(lab, "#777777"),
                       "pattern": {"shape": GAP_PATTERNS.get(lab, ""), "fgcolor": "#333333", **PATTERN},
                       "line": {"width": 0.5, "color": "white"}},
            "hovertext": [f"token {k}: {_esc(request.output_text[k]) if k < len(request.output_text) else '?'}"
                          f"<br>{GAP_DESCRIPTIONS.get(lab, lab)}" for k in ks] or None,
            "hoverinfo": "text", "meta": lab})
    notes, shapes = [], []
    if labels is None:
        notes.append(_note("no gap labels in this trace: regenerate it with "
                           "python -m oilbird trace ... --diagnose"))
    elif len(labels) != n:
        notes.append(_note(f"{len(labels)} labels for {n} output tokens: the trace is inconsistent", y=1.0))
    if cycle is not None and 0 <= cycle < len(request.cycles):
        lo, hi = committed_upto(request, cycle - 1) if cycle > 0 else 0, committed_upto(request, cycle)
        if hi > lo:
            shapes.append({"type": "rect", "x0": lo - 0.5, "x1": hi - 0.5, "y0": -0.05, "y1": 1.1,
                           "xref": "x", "yref": "y", "line": {"width": 2.5, "color": "#111111"},
                           "fillcolor": "rgba(0,0,0,0)"})
    title = (f"gap strip · {html.escape(request.request_id)} · {html.escape(request.method)}: "
             f"one cell per output token ({n})<br><span style='font-size:{s.font_size - 1}px;color:#777'>"
             f"{GAP_SCOPE.format(method=html.escape(request.method))}</span>")
    layout = _layout(s, title, height=220, annotations=notes, shapes=shapes, barmode="overlay", bargap=0,
                     legend={"orientation": "h", "y": -0.3}, margin={"l": 20, "r": 10, "t": 60, "b": 20},
                     xaxis={"range": [-0.5, max(n, 1) - 0.5], "showgrid": False},
                     yaxis={"visible": False, "range": [0, 1.15]})
    return {"data": data, "layout": layout}


def gap_strip_figure(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> go.Figure:
    """One cell per output token, coloured and patterned by its diagnosis label (lexical hit /
    gap recovered by the semantic key / gap missed / absent from the pool; counts in the
    legend). The labels come from one diagnosis of the output, not from the method's drafting,
    so every method's strip of a request is the same (the title says so). The tokens committed
    in cycle index ``cycle`` are outlined. Without labels
    (``gap_labels is None``) the strip is empty and says how to get them."""
    return figure(gap_strip_spec(request, cycle, style), style)


GAP_BORDERS = {"lexical_hit": "solid", "gap_recovered": "double", "gap_missed": "dashed", "absent": "dotted"}
_CELL = "display:inline-block;width:9px;height:22px;margin:0 1px 2px 0;vertical-align:top;"
_KEY = "display:inline-block;padding:1px 6px;margin:4px 4px 0 0;font-size:0.85em;"


def gap_strip_html(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> str:
    """The strip of :func:`gap_strip_figure` as an HTML fragment: one cell per output token
    (colour plus a border style per label, the token in its ``title``), the cells of cycle
    index ``cycle`` outlined, and the counts per label."""
    labels = request.gap_labels
    n = len(request.output_ids)
    head = (f"<b>gap strip</b> · one cell per output token · <span style='color:#777'>"
            f"{GAP_SCOPE.format(method=html.escape(request.method))}</span>")
    if labels is None:
        key = " ".join(f"<span class='gap-key' style='{_KEY}background:{GAP_COLOURS[g]}'>"
                       f"{GAP_DESCRIPTIONS[g]} (–)</span>" for g in GAP_LABELS)
        return (f"<div class='wb-gap'>{head}<div style='color:#777;padding:6px 0'>no gap labels in this trace: "
                f"regenerate it with <code>python -m oilbird trace ... --diagnose</code></div>{key}</div>")
    lo = committed_upto(request, cycle - 1) if cycle else 0
    hi = committed_upto(request, cycle) if cycle is not None else -1
    cells = []
    for k, lab in enumerate(labels):
        tok = request.output_text[k] if k < len(request.output_text) else "?"
        now = "outline:2px solid #111;outline-offset:-2px;" if lo <= k < hi else ""
        cells.append(f"<span class='gap-cell' data-label='{html.escape(lab)}' title='{k}: "
                     f"{html.escape(visible(tok), quote=True)} · {GAP_DESCRIPTIONS.get(lab, html.escape(lab))}' "
                     f"style='{_CELL}background:{GAP_COLOURS.get(lab, '#777777')};"
                     f"border-bottom:4px {GAP_BORDERS.get(lab, 'solid')} #333;{now}'></span>")
    counts = {g: labels.count(g) for g in dict.fromkeys(list(GAP_LABELS) + list(labels))}
    key = " ".join(f"<span class='gap-key' style='{_KEY}background:{GAP_COLOURS.get(g, '#777777')};"
                   f"border-bottom:4px {GAP_BORDERS.get(g, 'solid')} #333'>"
                   f"{GAP_DESCRIPTIONS.get(g, html.escape(g))} ({c})</span>" for g, c in counts.items())
    warn = (f"<div style='color:#D55E00'>{len(labels)} labels for {n} output tokens: the trace is inconsistent</div>"
            if len(labels) != n else "")
    return f"<div class='wb-gap'>{head}{warn}<div class='gap-row'>{''.join(cells)}</div>{key}</div>"


# --------------------------------------------------------------------------- metrics

def metrics_spec(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> dict:
    """Four metric panels for one request (see :func:`metrics_figure`)."""
    s = _style(style)
    axes, ref = _grid(2, 2, ("tokens per cycle", "cumulative tokens per forward",
                             "accepted share by source", "time per stage (ms)"), hspace=0.1, vspace=0.22)
    cyc = [c.cycle for c in request.cycles]
    per = [len(c.committed) for c in request.cycles]
    cum = list(accumulate(per))
    share = accepted_share(request)
    order = shown_sources(share)

    def at(rc):
        return {"xaxis": ref[rc][0], "yaxis": ref[rc][1]}

    data = [
        {"type": "bar", "x": cyc, "y": per, "name": "tokens / cycle", "marker": {"color": "#777777"},
         "showlegend": False, "meta": "per-cycle", "hoverinfo": "text",
         "hovertext": [f"cycle {c.cycle}: {max(0, len(c.accepted) - 1)} accepted drafts + bonus = "
                       f"{len(c.committed)}" for c in request.cycles], **at((1, 1))},
        {"type": "scatter", "x": cyc, "y": [t / (k + 1) for k, t in enumerate(cum)], "mode": "lines+markers",
         "name": "tokens / forward", "line": {"color": "#222222"}, "showlegend": False, "meta": "cumulative",
         "hovertemplate": "after cycle %{x}: %{y:.2f} tokens per forward<extra></extra>", **at((1, 2))},
        {"type": "bar", "x": order, "y": [share.get(k, 0.0) for k in order],
         "marker": {"color": [s.colour(k) for k in order]}, "showlegend": False, "name": "share",
         "meta": "share", "hovertemplate": "%{x}: %{y:.1%} of output tokens<extra></extra>", **at((2, 1))},
    ]
    for st in STAGES:
        data.append({"type": "bar", "x": cyc, "y": [1000 * c.timings.get(st, 0.0) for c in request.cycles],
                     "name": st, "legendgroup": f"stage-{st}", "meta": f"stage-{st}",
                     "marker": {"color": STAGE_COLOURS[st], "pattern": {"shape": STAGE_PATTERNS[st], **PATTERN}},
                     "hovertemplate": f"cycle %{{x}}: {st} %{{y:.1f}} ms<extra></extra>", **at((2, 2))})
    shapes = []
    if cycle is not None and 0 <= cycle < len(request.cycles):
        x = request.cycles[cycle].cycle
        shapes = [_vline(x, *ref[rc], CURSOR) for rc in ((1, 1), (1, 2), (2, 2))]
    title = (f"metrics · {html.escape(request.request_id)} · {html.escape(request.method)}: τ = "
             f"{request.tau:.2f} ({len(request.output_ids)} tokens / {request.forwards} forwards)")
    layout = _layout(s, title, height=max(s.height, 480), barmode="stack", shapes=shapes,
                     legend={"title": {"text": "stage"}, "x": 1.01, "y": 0.0, "yanchor": "bottom"}, **axes)
    for rc in ((1, 1), (1, 2), (2, 2)):
        layout[_axis(ref[rc][0])]["title"] = {"text": "cycle"}
        if len(cyc) <= 12:
            layout[_axis(ref[rc][0])]["dtick"] = 1
    layout[_axis(ref[(2, 1)][1])]["tickformat"] = ".0%"
    return {"data": data, "layout": layout}


def metrics_figure(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> go.Figure:
    """Four panels for one request: tokens committed per cycle (their mean is tau), the running
    tokens per forward, the share of output tokens each source delivered (split credit, see
    :func:`accepted_share`), and the time per stage of every cycle (from
    ``CycleTrace.timings``). A dotted line marks cycle index ``cycle``."""
    return figure(metrics_spec(request, cycle, style), style)


# --------------------------------------------------------------------------- comparison

def first_difference(a: list[int], b: list[int]) -> int | None:
    """First position where two token lists differ (or the shorter one ends); None if equal.

    >>> first_difference([1, 2, 3], [1, 5, 3])
    1
    """
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_spec(a: RequestTrace, b: RequestTrace, selection: int | None = None,
                 style: Style | None = None) -> dict:
    """Two methods on the same request (see :func:`compare_figure`)."""
    if a.request_id != b.request_id:
        raise ValueError(f"compare needs two traces of the same request, got {a.request_id!r} and {b.request_id!r}")
    s = _style(style)
    titles = tuple(f"{html.escape(r.method)}: τ {r.tau:.2f} ({len(r.output_ids)} tokens / {r.forwards} forwards)"
                   for r in (a, b))
    axes, ref = _grid(2, 2, titles, hspace=0.06, vspace=0.2, row_heights=[0.72, 0.28])
    axes["yaxis2"]["matches"] = "y"
    counts: dict[int, dict[str, list[int]]] = {}     # column -> source -> tokens per cycle
    for col, r in ((1, a), (2, b)):
        counts[col] = {}
        for i, c in enumerate(r.cycles):
            for srcs in c.committed_sources:
                counts[col].setdefault(primary_source(srcs or [BONUS]), [0] * len(r.cycles))[i] += 1
    order = shown_sources(set(counts[1]) | set(counts[2]))
    data, shapes = [], []
    for col, r in ((1, a), (2, b)):
        xr, yr = ref[(1, col)]
        cyc = [c.cycle for c in r.cycles]
        for k in order:
            data.append({"type": "bar", "x": cyc, "y": counts[col].get(k, [0] * len(r.cycles)),
                         "name": source_label(k), "legendgroup": k,
                         "showlegend": col == 1, "marker": {"color": s.colour(k)}, "meta": f"{r.method}:{k}",
                         "hovertemplate": f"{html.escape(r.method)} cycle %{{x}}: %{{y}} from {k}<extra></extra>",
                         "xaxis": xr, "yaxis": yr})
        srcs = token_sources(r)
        prim = [primary_source(x or [BONUS]) for x in srcs]
        xs, ys = ref[(2, col)]
        data.append({"type": "bar", "x": list(range(len(prim))), "y": [1] * len(prim), "width": 1,
                     "showlegend": False, "marker": {"color": [s.colour(p) for p in prim], "line": {"width": 0}},
                     "hovertext": [f"token {k}: {_esc(r.output_text[k]) if k < len(r.output_text) else '?'}"
                                   f"<br>{', '.join(x)}" for k, x in enumerate(srcs)],
                     "hoverinfo": "text", "name": f"{r.method} tokens", "meta": f"{r.method}:strip",
                     "xaxis": xs, "yaxis": ys})
        if selection is not None and 0 <= selection < len(r.cycles):
            shapes.append(_vline(r.cycles[selection].cycle, xr, yr, CURSOR))
        axes[_axis(xr)]["title"] = {"text": "cycle"}
        axes[_axis(ys)]["visible"] = False
    axes["yaxis"]["title"] = {"text": "tokens"}
    diff = first_difference(a.output_ids, b.output_ids)
    title = f"{html.escape(a.method)} vs {html.escape(b.method)} · {html.escape(a.request_id)}"
    if diff is None:
        title += " · identical outputs"
    else:
        title += f" · <b>outputs differ from token {diff}</b>"
        shapes += [_vline(diff - 0.5, *ref[(2, col)], {"width": 2, "color": "#111111"}) for col in (1, 2)]
    layout = _layout(s, title, height=max(s.height, 440), barmode="stack", bargap=0.15, shapes=shapes,
                     legend={"orientation": "h", "y": -0.1}, **axes)
    return {"data": data, "layout": layout}


def compare_figure(a: RequestTrace, b: RequestTrace, selection: int | None = None,
                   style: Style | None = None) -> go.Figure:
    """Two methods on the same request side by side: tokens per cycle stacked by the source
    that delivered them (top, shared y axis), and the output tokens (x: token position) as a
    strip coloured by delivering source (bottom). Subplot titles give each method's tau. Lossless methods have
    identical outputs; if they differ, the title says from which token and the strips mark it.
    ``selection``: a cycle index marked in both columns."""
    return figure(compare_spec(a, b, selection, style), style)


# --------------------------------------------------------------------------- all at once

def message_spec(title: str, text: str, style: Style | None = None) -> dict:
    """An empty figure with a title and a centred message (e.g. "no trace yet")."""
    s = _style(style)
    return {"data": [], "layout": _layout(s, html.escape(title), height=220, annotations=[_note(html.escape(text))],
                                          xaxis={"visible": False}, yaxis={"visible": False})}



def cycle_at(request: RequestTrace, cycle: int) -> CycleTrace | None:
    """``request.cycles[cycle]``, or None for a request without cycle records (drawn as a
    message, like the other no-data cases). Any other index out of range is a ValueError."""
    if not request.cycles:
        return None
    if not 0 <= cycle < len(request.cycles):
        raise ValueError(f"cycle {cycle} is outside 0..{len(request.cycles) - 1} for request "
                         f"{request.request_id!r} ({request.method})")
    return request.cycles[cycle]


NO_CYCLES = "no cycle records in this trace: no draft trees to step through"


def cycle_specs(request: RequestTrace, cycle: int, style: Style | None = None) -> dict[str, dict]:
    """Every per-request spec for cycle index ``cycle`` (what the app shows), by name."""
    c = cycle_at(request, cycle)
    if c is None:
        head = f"{request.request_id} · {request.method}"
        return {"tree": message_spec(f"{head} · draft tree", NO_CYCLES, style),
                "text": message_spec(f"{head} · text", NO_CYCLES, style),
                "neighbours": message_spec(f"{head} · nearest neighbours", NO_CYCLES, style),
                "gap": gap_strip_spec(request, None, style), "metrics": metrics_spec(request, None, style)}
    return {"tree": tree_spec(c, style=style, keyed=drafted_sources(request)), "text": text_spec(request, cycle, style),
            "neighbours": neighbours_spec(c, style=style), "gap": gap_strip_spec(request, cycle, style),
            "metrics": metrics_spec(request, cycle, style)}


def cycle_figures(request: RequestTrace, cycle: int, style: Style | None = None) -> dict[str, go.Figure]:
    """:func:`cycle_specs` as validated Figures (for notebooks and exports)."""
    return {k: figure(v, style) for k, v in cycle_specs(request, cycle, style).items()}
