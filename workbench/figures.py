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
entries are carried by data-less traces, ``x=[None]``), so the key never changes between views
(one exception: the "accepted, not committed" status, which only a request's last cycle can
have, is keyed where it occurs);
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

from oilbird.methods import PEER_TREE_METHODS, PRESETS, has_semantic, semantic_gated
from oilbird.trace import CycleTrace, RequestTrace

from .palette import (ALL_SOURCES, BONUS, DEFAULT_STYLE, GAP_COLOURS, GAP_DESCRIPTIONS, GAP_EXPLANATIONS,
                      GAP_LABELS, GAP_PATTERNS, GAP_POOL, MULTI_SOURCE_RING, ROOT, STAGE_COLOURS, STAGE_PATTERNS,
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


def committed_drafts(cycle: CycleTrace) -> int:
    """How many of the cycle's accepted drafts were committed: all of them, unless the output
    ended inside the accepted path. ``accepted`` is the verifier's whole path, but ``committed``
    stops at the token limit or at EOS (``oilbird.decoding._finish``), so on a request's last
    cycle the path can reach past the output."""
    return min(max(0, len(cycle.accepted) - 1), len(cycle.committed))


def bonus_committed(cycle: CycleTrace) -> bool:
    """Did the verifier's bonus token make it into the output? Only when every accepted draft
    was committed and there was room for one more (always on the prefill cycle)."""
    return cycle.bonus >= 0 and len(cycle.committed) > max(0, len(cycle.accepted) - 1)


def output_stops(cycle: CycleTrace) -> bool:
    """Did the output end inside this cycle's verdict (accepted drafts or bonus cut)? The trace
    cannot tell whether the token limit or EOS cut it: one cycle does not know the limit."""
    return not bonus_committed(cycle) and (cycle.bonus >= 0 or bool(cycle.accepted))


def _verdict_parts(cycle: CycleTrace) -> tuple[str, str]:
    """(the counts, why the output took fewer tokens than the verdict: "" on most cycles)."""
    if not cycle.n_nodes:
        return "prefill: the verifier's first token (bonus)", ""
    of = f"{max(0, len(cycle.accepted) - 1)} of {max(0, cycle.n_nodes - 1)} drafts accepted"
    if not output_stops(cycle):
        return f"{of} + bonus", ""
    return (f"{of}, {len(cycle.committed)} committed",
            "no bonus: the output stops here (token limit or EOS)")


def verdict_text(cycle: CycleTrace) -> str:
    """The verdict in words, agreeing with ``committed``: "2 of 4 drafts accepted + bonus", or
    on a cut last cycle "12 of 23 drafts accepted, 5 committed, no bonus: the output stops
    here (token limit or EOS)"."""
    return ", ".join(x for x in _verdict_parts(cycle) if x)


def _bonus_text(cycle: CycleTrace) -> str:
    """The bonus token's own text: the verifier's argmax at the last accepted node (the prefill
    has no node: its one committed token is the bonus)."""
    last = cycle.accepted[-1] if cycle.accepted else -1
    if 0 <= last < len(cycle.argmax_text):
        return cycle.argmax_text[last]
    return cycle.committed_text[-1] if cycle.committed_text and bonus_committed(cycle) else ""


def _free_spot(pos: dict[int, tuple[float, float]], x: float, y: float) -> float:
    """A y near ``y`` in column ``x`` with no node within half a column and half a row (rows
    of inner nodes are fractional, e.g. 0.25 apart, so an exact-match test misses them):
    ``y``, then y + 0.5, y - 0.5, y + 1, ... The bonus marker goes there."""
    column = [py for px, py in pos.values() if abs(px - x) < 0.5]
    for k in range(2 * len(column) + 2):
        cand = y + (k + 1) // 2 * 0.5 * (1 if k % 2 else -1)
        if all(abs(py - cand) >= 0.5 - 1e-9 for py in column):
            return cand
    return min(column, default=y) - 1.0


def tree_spec(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
              keyed: Iterable[str] = ()) -> dict:
    """The draft tree of one cycle (see :func:`tree_figure`)."""
    s = _style(style)
    n = len(cycle.tokens)
    pos = tree_layout(cycle.parents)
    # the accepted path up to what was committed (the root counts: it was committed before);
    # past the end of the output the path is "uncommitted", drawn apart from rejects
    kept = committed_drafts(cycle)
    status = ["rejected"] * n
    for j, i in enumerate(cycle.accepted):
        status[i] = "accepted" if j <= kept else "uncommitted"
    data: list[dict] = []

    # edges, one trace per status ("uncommitted" only where it occurs: it is keyed only there)
    edges: dict[str, tuple[list, list]] = {st: ([], []) for st in ("accepted", "uncommitted", "rejected", "bonus")
                                           if st != "uncommitted" or st in status}
    for i in range(1, n):
        p = cycle.parents[i]
        xs, ys = edges[status[i]]
        xs += [pos[p][0], pos[i][0], None]
        ys += [pos[p][1], pos[i][1], None]
    # the bonus token: a pseudo node after the last accepted node (alone on the prefill cycle),
    # drawn only when it was committed, on a spot no draft node takes
    bonus_xy = None
    if bonus_committed(cycle):
        if n:
            last = cycle.accepted[-1] if cycle.accepted else 0
            bx = pos[last][0] + 1
            bonus_xy = (bx, _free_spot(pos, bx, pos[last][1]))
            edges["bonus"][0].extend([pos[last][0], bx, None])
            edges["bonus"][1].extend([pos[last][1], bonus_xy[1], None])
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
    shown_status = {"accepted": "accepted", "rejected": "rejected",
                    "uncommitted": "accepted, not committed: the output stops before it"}
    for src in sorted(groups, key=lambda x: ALL_SOURCES.index(x) if x in ALL_SOURCES else 99):
        idx = groups[src]
        data.append({
            "type": "scatter", "x": [pos[i][0] for i in idx], "y": [pos[i][1] for i in idx], "mode": mode,
            "text": [_esc(cycle.token_text[i], s.max_label_chars) if i < len(cycle.token_text) else ""
                     for i in idx],
            "textposition": "top center", "textfont": {"size": s.font_size - 1},
            "hovertext": [_node_hover(cycle, i, shown_status[status[i]]) for i in idx], "hoverinfo": "text",
            "name": source_label(src), "legendgroup": src, "showlegend": False, "customdata": idx,
            "marker": {"color": s.colour(src), "symbol": source_symbol(src), "size": s.node_size,
                       "opacity": [STATUS_STYLES[status[i]].opacity for i in idx],
                       "line": {"width": [3.0 if i == selection else STATUS_STYLES[status[i]].marker_line
                                          for i in idx],
                                "color": ["#D55E00" if i == selection else "#111111" for i in idx]}},
            "meta": src})
    if bonus_xy is not None:
        ls = STATUS_STYLES["bonus"]
        tok = _bonus_text(cycle)
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
        counts, stop = _verdict_parts(cycle)
        title = f"{head}: {counts}"
        flags = ([f"lexical match {cycle.lexical_match_len}"] if cycle.lexical_match_len else []) + \
                (["semantic muted"] if cycle.semantic_muted else []) + \
                ([f"cut from {cycle.drafted - 1} drafts: the rest would not pay for its verify cost"]
                 if cycle.drafted > n else [])
        if flags:
            title += f" <span style='font-size:{s.font_size}px'>({', '.join(flags)})</span>"
        if stop:      # a second line: the title is long already
            title += f"<br><span style='font-size:{s.font_size}px;color:#555'>{stop}</span>"
    else:
        title = head
        notes.append(_note("cycle 0 is the prefill forward: no draft tree;<br>"
                           "the verifier gives the first token", y=0.85))
    ys = [p[1] for p in pos.values()] + ([bonus_xy[1]] if bonus_xy else [])
    max_depth = max((p[0] for p in pos.values()), default=0) + 1
    layout = _layout(s, title, annotations=notes, dragmode="pan",
                     legend={"itemsizing": "constant", "tracegroupgap": 2},
                     margin={"l": 40, "r": 10, "t": 70 if n and output_stops(cycle) else 50, "b": 40},
                     xaxis={"title": {"text": "depth"}, "dtick": 1, "range": [-0.5, max_depth + 0.7],
                            "zeroline": False, "showgrid": True, "gridcolor": "#EEEEEE"},
                     yaxis={"visible": False, "range": [min(ys, default=0) - 0.6, max(ys, default=0) + 0.8]})
    return {"data": data, "layout": layout}


def tree_figure(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
                keyed: Iterable[str] = ()) -> go.Figure:
    """The draft tree of one cycle.

    One marker per draft node at (depth, row) (:func:`tree_layout`), coloured and shaped by its
    most specific source (:func:`workbench.palette.primary_source`; a grey ring marks nodes that
    several sources proposed, and the hover lists them all with their scores and the verifier's
    argmax at the node); the accepted path is drawn bold and opaque, rejected nodes faded with
    dashed edges, and the bonus token (the verifier's own next token) hangs off the last
    accepted node with a dotted edge, on a spot no draft node takes. On a request's last cycle
    the output can end inside the accepted path (token limit or EOS): the accepted nodes past
    it are drawn in the "uncommitted" style (long dashes, keyed only there), the bonus is not
    drawn, and the title says how many tokens were committed (:func:`verdict_text`).
    ``selection``: a node index to outline. ``keyed``: sources
    to list in the key even where this cycle drew none of their nodes; pass
    :func:`drafted_sources` of the request so that a peer's source (``suffix-arctic``) or an
    unknown one keeps its key entry on every cycle.

    Traces, in order: one edge trace per status (``meta`` "edges-accepted" / "edges-uncommitted"
    (only where it occurs) / "edges-rejected" / "edges-bonus"), the several-sources ring
    ("multi-source"), one node trace per source present (``meta`` = the source; root first), the
    bonus node ("bonus"; only when it was committed), then one legend-only trace per
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


# two rules of credit, both intended, named where they show so they are not read as a
# contradiction: a token several sources proposed is coloured by the most specific one in the
# text, the comparison and the strips, and split evenly among them in the metrics' share
BY_PRIMARY = "colour: each token's most specific source, hover: all"
SHARE_TITLE = "share by source (split credit)"
BY_PRIMARY_KEY = "each token under its most specific source:"


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
             f"{upto} of {len(request.output_ids)} tokens <span style='font-size:{s.font_size - 1}px;"
             f"color:#777'>({BY_PRIMARY})</span>")
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
    text element per line), the most specific one where several proposed it (the title says
    so; the hover lists them all); the tokens committed in that cycle are bold and underlined.
    Whitespace is visible; lines wrap at ``style.line_chars``. Trace 0 holds the lines, then
    one legend-only trace per source."""
    return figure(text_spec(request, cycle, style), style)


def counter_html(request: RequestTrace, cycle: int) -> str:
    """The cycle counter above the tree: "cycle k / n · request · method · tokens so far"; on
    a cycle where the output ends inside the verdict it says so, as the tree's title does."""
    c = cycle_at(request, cycle)
    live = " · live run" if request.meta.get("live") else ""
    if c is None:
        return (f"<b>no cycles</b> · {html.escape(request.request_id)} · {html.escape(request.method)}{live} · "
                f"{len(request.output_ids)} tokens · {NO_CYCLES}")
    stop = " (the output stops here)" if output_stops(c) else ""
    return (f"<b>cycle {cycle} / {len(request.cycles) - 1}</b> · {html.escape(request.request_id)} · "
            f"{html.escape(request.method)}{live} · {committed_upto(request, cycle)} of "
            f"{len(request.output_ids)} tokens · {len(c.committed)} committed this cycle{stop}")


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
    legend = f'<span style="color:#777">{BY_PRIMARY}:</span> {legend}'
    return (f'<div class="wb-text" style="font-family:{s.font_family};line-height:1.9;'
            f'word-break:break-all">{body}</div>'
            f'<div class="wb-legend" style="font-size:0.85em;margin-top:4px">{legend}</div>')


# --------------------------------------------------------------------------- neighbours

NB_HEADER = ("#", "similarity", "from", "context (matched token in [ ])", "proposed", "accepted", "lexical key?")
# oilbird.sources.semantic.SemanticConfig.entry_floor, the default (a view never imports the
# runtime; tests/test_figures.py checks it)
SIMILARITY_FLOOR = 0.80
NOT_IN_TREE = "not in the tree"


def _context_text(nb) -> str:
    """The neighbour's context as plain text, the matched token in brackets (no markup: a
    plotly table cell shows a styled span as its raw HTML)."""
    return "".join(f"[{visible(t)}]" if j == nb.context_index else visible(t)
                   for j, t in enumerate(nb.context_text)) or "—"


def _proposed_text(nb) -> str:
    return "".join(visible(t) for t in nb.proposed_text) or "— (below depth floor)"


def chain_result(nb, cycle: CycleTrace) -> tuple[str, str]:
    """The "accepted" cell of a neighbour and why it says so ("" where the cell says it all).

    ``accepted / walked``: of the chain's nodes in the tree, how many the verifier accepted.
    A chain with no node in the tree was never verified, so it is "not in the tree", not
    "0 / its length": the semantic node budget was spent before its turn (the drafter gives
    the most similar neighbours the budget first), or the muted source only looked it up."""
    if not nb.proposed:
        return "—", "below the depth floor: its similarity allowed it no tokens"
    if nb.walked_nodes:
        return f"{nb.accepted} / {len(nb.walked_nodes)}", ""
    if cycle.semantic_muted:
        return NOT_IN_TREE, "the semantic source was muted by self-calibration: looked up, not drafted"
    why = ("no node was left for it: more similar neighbours took the semantic budget (under the "
           "expected fill, other branches were worth more)")
    if cycle.drafted > cycle.n_nodes:
        why += ", or cost-aware sizing cut its nodes"
    return NOT_IN_TREE, why


def _no_neighbours_why(cycle: CycleTrace) -> str:
    """Why a cycle retrieved nothing, from what the record knows: only the reasons that can
    hold. The semantic key looks up only after a lexical match (gated methods), finds only
    finished earlier requests in the store, and uses its hits only if the best reaches the
    similarity floor (``oilbird.sources.semantic``); a muted source still looks up, and its
    hits are listed, so a muted source with none found none above the floor (its earlier
    chains show the store held records). On the prefill no lookup runs at all. Where the cycle
    records the adjacency row and the store's size (``adjacency_row``, ``store_records``), the
    reason is the one that held; an older trace gets the possible ones."""
    if cycle.cycle == 0 and not cycle.tokens:
        return "cycle 0 is the prefill: nothing is drafted, so nothing is retrieved"
    base = cycle.method.split(":")[0]
    semantic = has_semantic(base) or any("semantic" in x for x in cycle.sources)
    if (base in PRESETS or base in PEER_TREE_METHODS) and not semantic:
        return f"{cycle.method} drafts without the semantic key"
    reasons = [] if semantic else [f"no semantic source in {cycle.method}"]
    gated = not cycle.lexical_match_len and semantic_gated(base)
    if gated and cycle.adjacency_row is False:        # recorded: the gate was closed, no lookup ran
        return ("its gate was closed: no lexical match and no token-adjacency row for the root token; "
                "the semantic key looks up only after one of them")
    if gated and cycle.adjacency_row is None:         # an older trace: the adjacency part is unknown
        reasons.append("its gate was closed: no lexical match (recorded) and no token-adjacency row for the "
                       "root (not recorded); the semantic key looks up only after one of them")
    if cycle.store_records == 0:                      # recorded: nothing to search yet
        return "an empty store: no earlier request had finished, so there was nothing to retrieve"
    if not cycle.semantic_muted and cycle.store_records is None:
        reasons.append("an empty store: no earlier request had finished")
    reasons.append(f"the best matches were below the similarity floor ({SIMILARITY_FLOOR:.2f})")
    why = "; or ".join(reasons)
    return f"semantic source muted by self-calibration; {why}" if cycle.semantic_muted else why


def _from_store(cycle: CycleTrace) -> str:
    """The header's ' from N records in the store', where the cycle recorded N (each record a
    past position of a finished request; the key searched them all)."""
    return "" if cycle.store_records is None else f" from {cycle.store_records} records in the store"


def _footnotes(cycle: CycleTrace, nbs) -> list[str]:
    """One line per distinct reason a neighbour is not in the tree."""
    whys = dict.fromkeys(w for cell, w in (chain_result(nb, cycle) for nb in nbs) if cell == NOT_IN_TREE)
    return [f"* {NOT_IN_TREE}: {w}" for w in whys]


# the plotly table (exports, notebooks): plotly wraps cell text only at spaces, and a static
# export draws only the rows that fit its height, so lines are broken here and the height counted
TABLE_WIDTH = 700            # plotly's and kaleido's figure width where style.width is not set
NB_COLUMN_PX = (30, 95, 95, 170, 130, 85, 75)   # relative widths (px at that width)
CHAR_EM = 0.62               # a monospace character is about 0.6 em wide (a little slack)
CELL_PAD = 8                 # plotly's table cell padding, px per side
CELL_HEIGHT = 24             # one line of a cell, px


def _cell_chars(s: Style, col: int, font: int) -> int:
    """Characters that fit on one line of column ``col`` at the figure's width."""
    px = ((s.width or TABLE_WIDTH) - 20) * NB_COLUMN_PX[col] / sum(NB_COLUMN_PX)
    return max(4, int((px - 2 * CELL_PAD) / (CHAR_EM * font)))


def _wrap(text: str, chars: int) -> list[str]:
    """``text`` in lines of at most ``chars`` characters, broken after spaces where it can and
    inside a run without spaces (a token with its spaces shown as '·') only where it must."""
    lines, cur = [], ""
    for word in text.replace(" ", " \0").split("\0"):
        if cur and len(cur) + len(word.rstrip()) > chars:
            lines.append(cur.rstrip())
            cur = ""
        while len(word.rstrip()) > chars:
            lines.append(word[:chars])
            word = word[chars:]
        cur += word
    return lines + [cur.rstrip()] if cur or not lines else lines


def _table_cells(columns: list[list[str]], s: Style, font: int) -> tuple[list[list[str]], list[int]]:
    """Cells broken into lines ('<br>', each line HTML-escaped) and the lines of each row."""
    out, rows = [], [1] * len(columns[0])
    for col, cells in enumerate(columns):
        wrapped = [_wrap(c, _cell_chars(s, col, font)) for c in cells]
        out.append(["<br>".join(html.escape(x, quote=False) for x in w) for w in wrapped])
        rows = [max(r, len(w)) for r, w in zip(rows, wrapped)]
    return out, rows


def neighbours_spec(cycle: CycleTrace, selection: int | None = None, style: Style | None = None) -> dict:
    """The nearest-neighbour table of one cycle (see :func:`neighbours_figure`)."""
    s = _style(style)
    font = s.font_size - 1
    order = sorted(range(len(cycle.neighbours)), key=lambda k: -cycle.neighbours[k].similarity)
    nbs = [cycle.neighbours[k] for k in order]
    if order:
        plain = [
            [str(k) for k in order],
            [f"{nb.similarity:.3f}" for nb in nbs],
            [f"{nb.request_id} @ {nb.position}" for nb in nbs],
            [_context_text(nb) for nb in nbs],
            [_proposed_text(nb) for nb in nbs],
            [cell + ("*" if cell == NOT_IN_TREE else "") for cell, _ in (chain_result(nb, cycle) for nb in nbs)],
            ["yes" if nb.lexical_reachable else "no" for nb in nbs],
        ]
        fill = [["#FBE3D6" if k == selection else ("#F3F3F3" if r % 2 else "white")
                 for r, k in enumerate(order)]]
    else:
        plain = [[""], [""], [""], ["no neighbours this cycle"], [""], [""], [""]]
        fill = [["white"]]
    cols, lines = _table_cells(plain, s, font)
    head, head_lines = _table_cells([[h] for h in NB_HEADER], s, s.font_size)
    line_px = round(1.35 * font) + 1
    table = {"type": "table", "columnwidth": list(NB_COLUMN_PX), "meta": "neighbours",
             "header": {"values": [f"<b>{h[0]}</b>" for h in head], "align": "left", "fill": {"color": "#E8E8E8"},
                        "font": {"size": s.font_size}, "height": CELL_HEIGHT},
             "cells": {"values": cols, "align": "left", "fill": {"color": fill}, "height": CELL_HEIGHT,
                       "font": {"size": font}}}
    title = (f"nearest neighbours · {html.escape(cycle.request_id)} · {html.escape(cycle.method)} · "
             f"cycle {cycle.cycle}: {len(order)} retrieved{_from_store(cycle)}")
    notes = _footnotes(cycle, nbs) if order else [f"({_no_neighbours_why(cycle)})"]
    chars = int(((s.width or TABLE_WIDTH) - 20) / (CHAR_EM * font))
    notes = [line for note in notes for line in _wrap(note, chars)]
    for note in notes:
        title += f"<br><span style='font-size:{font}px;color:#777'>{html.escape(note)}</span>"
    top = 50 + 18 * len(notes)
    body = (CELL_HEIGHT + line_px * (max(head_lines) - 1)
            + sum(CELL_HEIGHT + line_px * (n - 1) for n in lines))
    layout = _layout(s, title, height=top + body + 30, margin={"l": 10, "r": 10, "t": top, "b": 10})
    return {"data": [table], "layout": layout}


def neighbours_figure(cycle: CycleTrace, selection: int | None = None, style: Style | None = None) -> go.Figure:
    """A table of the store records the semantic key retrieved in this cycle, most similar
    first: cosine similarity, the request and position it came from, its context with the
    matched token in brackets, the continuation it proposed, how many of its chain's nodes the
    verifier accepted ("not in the tree" for a chain that got no node; the title says why,
    :func:`chain_result`), and whether a lexical source proposed the same first token (the
    "lexical key?" column: "no" is what no lexical source could propose; the rejected-branch
    pool still may have). Cells are plain text broken into lines that fit their column at the
    figure's width (``style.width``, else plotly's 700 px), and the height holds every row, so
    a static export shows them all.
    ``selection``: a neighbour index (into ``cycle.neighbours``) to highlight."""
    return figure(neighbours_spec(cycle, selection, style), style)


# the HTML table (the app's panel): fixed column shares of the panel's width, and cells that
# wrap anywhere (a token is one long run with its spaces shown as '·'); the div scrolls as a
# last resort, below the table's minimum width
NB_COLUMN_PCT = (4, 10, 13, 27, 22, 13, 11)
_WRAP = "overflow-wrap:anywhere;word-break:break-word;vertical-align:top;"


def neighbours_html(cycle: CycleTrace, selection: int | None = None, style: Style | None = None) -> str:
    """The table of :func:`neighbours_figure` as an HTML fragment (the app's panel: a plain
    table redraws far faster than a plotly one on every step). It fits its panel: fixed
    column shares (context and proposed capped), cells that wrap, and a horizontally
    scrolling div only below a minimum width."""
    s = _style(style)
    order = sorted(range(len(cycle.neighbours)), key=lambda k: -cycle.neighbours[k].similarity)
    head = "".join(f"<th style='{_WRAP}'>{h}</th>" for h in NB_HEADER)
    cols = "".join(f"<col style='width:{w}%'>" for w in NB_COLUMN_PCT)
    rows = []
    for k in order:
        nb = cycle.neighbours[k]
        ctx = "".join(f"<b style='color:{s.colour('semantic')}'>[{_esc(t)}]</b>" if j == nb.context_index
                      else _esc(t) for j, t in enumerate(nb.context_text)) or "—"
        prop = html.escape(_proposed_text(nb), quote=False)
        cell, why = chain_result(nb, cycle)
        acc = (f"<span title='{html.escape(why, quote=True)}'>{cell}" + ("*" if cell == NOT_IN_TREE else "")
               + "</span>" if why else cell)
        bg = " style='background:#FBE3D6'" if k == selection else ""
        td = f"<td style='{_WRAP}'>"
        rows.append(f"<tr{bg}>{td}{k}</td>{td}{nb.similarity:.3f}</td>{td}{html.escape(nb.request_id)} @ "
                    f"{nb.position}</td><td class='mono' style='{_WRAP}'>{ctx}</td>"
                    f"<td class='mono' style='{_WRAP}'>{prop}</td>{td}{acc}</td>"
                    f"{td}{'yes' if nb.lexical_reachable else '<b>no</b>'}</td></tr>")
    if not rows:
        why = html.escape(_no_neighbours_why(cycle), quote=False)
        rows.append(f"<tr><td colspan='7' style='color:#777;{_WRAP}'>no neighbours this cycle ({why})</td></tr>")
    notes = "".join(f"<div style='color:#777;font-size:0.85em'>{html.escape(n)}</div>"
                    for n in _footnotes(cycle, [cycle.neighbours[k] for k in order]))
    return (f"<div class='wb-neighbours' style='max-width:100%;overflow-x:auto'>"
            f"<b>nearest neighbours</b> · cycle {cycle.cycle}: {len(order)} retrieved{_from_store(cycle)}"
            f"<table style='font-size:0.85em;width:100%;min-width:480px;table-layout:fixed'>"
            f"<colgroup>{cols}</colgroup><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>{notes}</div>")


# --------------------------------------------------------------------------- gap strip

GAP_SCOPE = "labels describe the output (the same for every method), not how {method} drafted it"


def _no_labels_why(request: RequestTrace) -> str:
    """Why a request has no gap labels, as plain text. They come from the command-line
    diagnosis of a trace file (``python -m oilbird trace ... --diagnose``); the app's live runs
    (``meta["live"]``) are never diagnosed, so advising that command there would mislead."""
    if request.meta.get("live"):
        return ("no gap labels: they come from the command-line diagnosis of a trace file "
                "and are not computed for live runs")
    return "no gap labels in this trace: regenerate it with python -m oilbird trace ... --diagnose"


def _gap_hover(lab: str) -> str:
    """A label's description, what it means and what the pool is (plain text)."""
    what = GAP_EXPLANATIONS.get(lab)
    return f"{GAP_DESCRIPTIONS.get(lab, lab)}: {what}" if what else GAP_DESCRIPTIONS.get(lab, lab)


def gap_strip_spec(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> dict:
    """The per-token gap labels of one request (see :func:`gap_strip_figure`)."""
    s = _style(style)
    labels = request.gap_labels
    n = len(request.output_ids)
    by: dict[str, list[int]] = {g: [] for g in GAP_LABELS}
    for k, lab in enumerate(labels or []):
        by.setdefault(lab, []).append(k)
    data = []
    pool = html.escape(GAP_POOL, quote=False)
    for lab, ks in by.items():
        count = len(ks) if labels is not None else "–"
        data.append({
            "type": "bar", "x": ks or [None], "y": [1] * len(ks) if ks else [None], "width": 1,
            "name": f"{GAP_DESCRIPTIONS.get(lab, lab)} ({count})", "legendgroup": lab, "showlegend": True,
            "marker": {"color": GAP_COLOURS.get(lab, "#777777"),
                       "pattern": {"shape": GAP_PATTERNS.get(lab, ""), "fgcolor": "#333333", **PATTERN},
                       "line": {"width": 0.5, "color": "white"}},
            "hovertext": [f"token {k}: {_esc(request.output_text[k]) if k < len(request.output_text) else '?'}"
                          f"<br>{html.escape(_gap_hover(lab), quote=False)}<br>{pool}" for k in ks] or None,
            "hoverinfo": "text", "meta": lab})
    notes, shapes = [], []
    if labels is None:
        notes.append(_note(html.escape(_no_labels_why(request))))
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
             f"{GAP_SCOPE.format(method=html.escape(request.method))}<br>{pool}</span>")
    layout = _layout(s, title, height=240, annotations=notes, shapes=shapes, barmode="overlay", bargap=0,
                     legend={"orientation": "h", "y": -0.3}, margin={"l": 20, "r": 10, "t": 80, "b": 20},
                     xaxis={"range": [-0.5, max(n, 1) - 0.5], "showgrid": False},
                     yaxis={"visible": False, "range": [0, 1.15]})
    return {"data": data, "layout": layout}


def gap_strip_figure(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> go.Figure:
    """One cell per output token, coloured and patterned by its diagnosis label (lexical hit /
    gap recovered by the semantic key / gap missed / absent from the pool; counts in the
    legend). The labels come from one diagnosis of the output, not from the method's drafting,
    so every method's strip of a request is the same (the title says so). The tokens committed
    in cycle index ``cycle`` are outlined. The title and every cell's hover say what the pool
    is (:data:`~workbench.palette.GAP_POOL`: earlier requests' outputs, not this request's
    prompt or own output), so "absent from pool" is not read as absent from the prompt. Without
    labels (``gap_labels is None``) the strip is empty and says where they come from (not for
    a live run, which is never diagnosed)."""
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
            f"{GAP_SCOPE.format(method=html.escape(request.method))}<br>"
            f"{html.escape(GAP_POOL, quote=False)}</span>")
    if labels is None:
        key = " ".join(f"<span class='gap-key' title='{html.escape(_gap_hover(g) + '; ' + GAP_POOL, quote=True)}' "
                       f"style='{_KEY}background:{GAP_COLOURS[g]}'>"
                       f"{GAP_DESCRIPTIONS[g]} (–)</span>" for g in GAP_LABELS)
        why = html.escape(_no_labels_why(request)).replace("python -m oilbird trace ... --diagnose",
                                                           "<code>python -m oilbird trace ... --diagnose</code>")
        return f"<div class='wb-gap'>{head}<div style='color:#777;padding:6px 0'>{why}</div>{key}</div>"
    lo = committed_upto(request, cycle - 1) if cycle else 0
    hi = committed_upto(request, cycle) if cycle is not None else -1
    cells = []
    for k, lab in enumerate(labels):
        tok = request.output_text[k] if k < len(request.output_text) else "?"
        now = "outline:2px solid #111;outline-offset:-2px;" if lo <= k < hi else ""
        cells.append(f"<span class='gap-cell' data-label='{html.escape(lab)}' title='{k}: "
                     f"{html.escape(visible(tok), quote=True)} · {html.escape(_gap_hover(lab), quote=True)}' "
                     f"style='{_CELL}background:{GAP_COLOURS.get(lab, '#777777')};"
                     f"border-bottom:4px {GAP_BORDERS.get(lab, 'solid')} #333;{now}'></span>")
    counts = {g: labels.count(g) for g in dict.fromkeys(list(GAP_LABELS) + list(labels))}
    key = " ".join(f"<span class='gap-key' title='{html.escape(_gap_hover(g) + '; ' + GAP_POOL, quote=True)}' "
                   f"style='{_KEY}background:{GAP_COLOURS.get(g, '#777777')};"
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
                             SHARE_TITLE, "time per stage (ms)"), hspace=0.1, vspace=0.22)
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
         "hovertext": [f"cycle {c.cycle}: {verdict_text(c)} · {len(c.committed)} committed"
                       for c in request.cycles], **at((1, 1))},
        {"type": "scatter", "x": cyc, "y": [t / (k + 1) for k, t in enumerate(cum)], "mode": "lines+markers",
         "name": "tokens / forward", "line": {"color": "#222222"}, "showlegend": False, "meta": "cumulative",
         "hovertemplate": "after cycle %{x}: %{y:.2f} tokens per forward<extra></extra>", **at((1, 2))},
        {"type": "bar", "x": order, "y": [share.get(k, 0.0) for k in order],
         "marker": {"color": [s.colour(k) for k in order]}, "showlegend": False, "name": "share",
         "meta": "share", "hovertemplate": "%{x}: %{y:.1%} of output tokens<br>a token several sources "
         "proposed is split evenly among them<br>(the text and comparison colour it by the most specific "
         "one)<extra></extra>", **at((2, 1))},
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
    :func:`accepted_share`; its title and hover say so, since the text and the comparison
    colour a token by its most specific source instead), and the time per stage of every cycle (from
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


def _compare_title(r: RequestTrace, s: Style) -> str:
    """A subplot title that fits half the figure: "method: τ 2.50" (the method name cut to
    what fits; the figure's title names both in full), then tokens and forwards on a second,
    smaller line. One line held all of it and ran into its neighbour at 1400 px."""
    half = ((s.width or TABLE_WIDTH) - 50) * 0.47 / (CHAR_EM * s.font_size)
    tau = f": τ {r.tau:.2f}"
    limit = max(8, int(half) - len(tau))
    name = html.escape(r.method if len(r.method) <= limit else r.method[: limit - 1] + "…")
    return (f"{name}{tau}<br><span style='font-size:{s.font_size - 1}px;color:#555'>"
            f"{len(r.output_ids)} tokens / {r.forwards} forwards</span>")


def compare_spec(a: RequestTrace, b: RequestTrace, selection: int | None = None,
                 style: Style | None = None) -> dict:
    """Two methods on the same request (see :func:`compare_figure`)."""
    if a.request_id != b.request_id:
        raise ValueError(f"compare needs two traces of the same request, got {a.request_id!r} and {b.request_id!r}")
    s = _style(style)
    titles = tuple(_compare_title(r, s) for r in (a, b))
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
                         "hovertemplate": f"{html.escape(r.method)} cycle %{{x}}: %{{y}} with {k} as the most "
                                          f"specific source<extra></extra>",
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
                     legend={"orientation": "h", "y": -0.1, "title": {"text": BY_PRIMARY_KEY, "side": "top"}},
                     margin={"l": 40, "r": 10, "t": 90, "b": 40}, **axes)
    return {"data": data, "layout": layout}


def compare_figure(a: RequestTrace, b: RequestTrace, selection: int | None = None,
                   style: Style | None = None) -> go.Figure:
    """Two methods on the same request side by side: tokens per cycle stacked by the source
    that delivered them (top, shared y axis), and the output tokens (x: token position) as a
    strip coloured by delivering source (bottom). Both count each token once, under its most
    specific source (:func:`~workbench.palette.primary_source`, as the text does; the metrics'
    share splits it instead), and say so. Subplot titles give each method's tau on a line that
    fits half the figure, tokens and forwards below it. Lossless methods have
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
