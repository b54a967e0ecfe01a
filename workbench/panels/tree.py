"""The draft-tree panel: one cycle's tree, as the verifier judged it.

One marker per draft node at (depth, row) (:func:`tree_layout`), coloured and shaped by its
source (exact match first where several proposed it); the accepted path bold, rejected nodes faded, the bonus token hanging
off the last accepted node. Reads one :class:`~oilbird.trace.CycleTrace` (its tokens,
parents, sources, scores, verdict); knows nothing about the request around it except the
sources a caller asks to keep in the key (``keyed``).
"""
from __future__ import annotations

import html
from collections.abc import Iterable

import networkx as nx
import plotly.graph_objects as go

from oilbird.trace import CycleTrace

from ..palette import (ALL_SOURCES, BONUS, MULTI_SOURCE_RING, ROOT, SELECTION_RING, STATUS_STYLES, Style,
                       primary_source, shown_sources, source_label, source_symbol)
from .base import (CHAR_EM, centred_note, esc, figure, key_entry_px, key_rows, label_of, legend_marker, panel_layout,
                   pin_title, price, style_or_default, wrap_html)
from .provenance import LIVE_RUN, REPLAYED, bonus_committed, committed_drafts, verdict_parts


# the several-sources ring: this much wider than a node, so that its label (drawn above it) stays
# clear of the ring of the row above at the row height the layout gives (a node, a label, a gap)
MULTI_RING_PAD = 6
# a square drawn at a node's size reaches past the ring with its corners (half a diagonal, 0.71 of
# the size, against the ring's 0.69), which a faded node's then showed as the ring: a printed
# prompt-lookup square read as a circle. At this share of the size its corners keep inside the
# ring's line (and it covers 90% of what a circle of the node's size covers)
SQUARE_SCALE = 0.84


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


def _node_hover(c: CycleTrace, i: int, status: str, replay: bool, depth: int) -> str:
    srcs = c.sources[i] if i < len(c.sources) else []
    scores = c.scores[i] if i < len(c.scores) else {}
    # named as the key names them (prompt lookup, not pld), with the score each gave
    src_txt = (", ".join(f"{source_label(s)} {scores[s]:.3g}" if s in scores else source_label(s) for s in srcs)
               or "— (root: newest committed token)")
    # ``depth``: as the layout drew it (a trace's own list is empty where it was not recorded)
    lines = [f"<b>node {i}</b> · depth {depth} · {status}",
             f"token: {esc(c.token_text[i]) if i < len(c.token_text) else '?'} (id {c.tokens[i]})",
             f"sources: {html.escape(src_txt)}"]
    if i < len(c.argmax):
        am = esc(c.argmax_text[i]) if i < len(c.argmax_text) else "?"
        if not replay:
            lines.append(f"verifier's next token after it (argmax): {am} (id {c.argmax[i]})")
        elif c.argmax[i] >= 0:      # a replay's verdict is the recording's; this is the local model's guess
            lines.append(f"local model's next token after it (argmax): {am} (id {c.argmax[i]}; the recording decides)")
        else:
            lines.append("local model's next token after it: not computed (fast replay: the recording decides)")
    if 0 < i < len(c.prices):       # (the root is certain)
        lines.append(f"worth {price(c.prices[i])} to the fill: the learned chance its path is accepted" if
                     c.fill_from is None or i >= c.fill_from else
                     f"priced {price(c.prices[i])}, but placed before the fill by the exact-match head (no contest)")
    sampled = sampled_decision(c, i)
    if sampled:
        lines.append(sampled)
    return "<br>".join(lines)


def _sampled_bonus(c: CycleTrace) -> str:
    """Where a sampled cycle's bonus came from: p at the last accepted node, or its residual
    after the children tried there were rejected."""
    # the last accepted node and its merged twins (oilbird.sampling: siblings with one token are one
    # candidate, their children pooled), level by level down the accepted path
    group = {0}
    for a in (c.accepted or [0])[1:]:
        group = {i for i in range(1, len(c.parents)) if c.parents[i] in group and c.tokens[i] == c.tokens[a]}
    tried = [i for i in range(1, len(c.parents)) if c.parents[i] in group and i < len(c.decided_prob)
             and c.decided_prob[i] is not None]
    if not tried:
        return "sampled from the model's distribution after the last accepted node (no child to try)"
    return (f"sampled from the residual after the last accepted node: its {len(tried)} tried "
            f"child{'ren' if len(tried) > 1 else ''} removed and p renormalised")


def sampled_decision(c: CycleTrace, i: int) -> str:
    """A sampled cycle's reason for node ``i`` (oilbird.sampling): the probability that decided
    it under the residual, and the residual's mass then; "" for a greedy cycle or the root."""
    if not c.decided_prob or i == 0 or i >= len(c.decided_prob):
        return ""
    q = c.decided_prob[i]
    if q is None:
        return "sampled: not tried (its parent was not accepted, or a sibling was accepted first)"
    m = c.residual_mass[i] if i < len(c.residual_mass) and c.residual_mass[i] is not None else 1.0
    verdict = "accepted" if i in c.accepted else "rejected"
    rest = ("" if m >= 1.0 - 1e-9 else
            f" (siblings tried before it were rejected: p renormalised over the remaining {m:.3f})")
    return f"sampled: {verdict} with probability {q:.3f} under the residual of mass {m:.3f}{rest}"


def _bonus_text(cycle: CycleTrace) -> str:
    """The bonus token's own text: the last committed token (the bonus is drawn only when it was
    committed). Not the argmax text at the last accepted node: in a replay the recording chose
    the bonus, and a sampled bonus was drawn."""
    return cycle.committed_text[-1] if cycle.committed_text and bonus_committed(cycle) else ""


BONUS_CLEARANCE = 1.5     # rows between the bonus marker and any node of its column


def _free_spot(pos: dict[int, tuple[float, float]], x: float, y: float) -> float:
    """The y nearest ``y`` in column ``x`` that is :data:`BONUS_CLEARANCE` rows from every node
    there: half a row more than the draft nodes of one column keep from each other
    (:func:`tree_layout`), since the bonus's marker is larger than theirs and a node's label is
    drawn above it (a row away, the bonus covered the label of the node below it). The nearest
    such spot is ``y`` itself or that far above or below some node of the column (above on a
    tie). The bonus marker goes there."""
    column = [py for px, py in pos.values() if abs(px - x) < 0.5]
    spots = [y] + [py + d for py in column for d in (BONUS_CLEARANCE, -BONUS_CLEARANCE)]
    free = [c for c in spots if all(abs(py - c) >= BONUS_CLEARANCE - 1e-9 for py in column)]
    return min(free, key=lambda c: (abs(c - y), -c))


# the height a tree's rows close up toward so that a 768-pixel projector shows it whole under the
# app's bar of buttons (a tree of more than ~15 leaves grows past it: its rows never close further
# than a marker and its label)
TREE_MAX_HEIGHT = 600
# the top margin the height allows for, whatever this cycle's title: three lines (head, verdict,
# and flags or the stop); a cycle with both takes its fourth line from the plot, not the height
TITLE_ROOM = 50 + 20 * 2
# the characters of a node label that fit across the tree's plot at the app's width on a 1024-pixel
# screen (about 660 px of plot, 6.6 px a character): a label is cut to its depth column's share
LABEL_CHARS_ACROSS = 100


def tree_spec(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
              keyed: Iterable[str] = (), replay: bool = False, live: bool = False, rows: float = 0,
              lexical: Iterable[str] = ()) -> dict:
    """The draft tree of one cycle (see :func:`tree_figure`)."""
    s = style_or_default(style)
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
    # a row holds a marker and the label above it with a gap, which closes up where that many
    # rows would not fit TREE_MAX_HEIGHT (a projector shows the whole tree); the label never
    # touches the next row's marker, so a tree wider than that still grows taller. The height is
    # the request's (its widest tree's rows), the rows this cycle's: a small tree of a request
    # with a wide one keeps its room. Squeezed, labels move where a row leaves them room
    # (:func:`_label_places`)
    ys_all = [p[1] for p in pos.values()] + ([bonus_xy[1]] if bonus_xy else [])
    own = max(ys_all, default=0) - min(ys_all, default=0) + 1.4
    span = max(own - 1.4, rows) + 1.4
    # the head wrapped to an export's width (at 700 px a replay's was cut), and there the key under
    # the plot (beside it, it left a 13-depth tree's labels 4 characters): the room both take is
    # added, so the rows keep theirs
    head = wrap_html(f"{cycle.request_id} · {cycle.method} · cycle {cycle.cycle}" + (REPLAYED if replay else "")
                     + (LIVE_RUN if live else ""), s, s.font_size + 2)
    groups: dict[str, list[int]] = {}        # each node under its primary source
    for i in range(n):
        src = ROOT if i == 0 else primary_source(cycle.sources[i] if i < len(cycle.sources) else [], lexical)
        groups.setdefault(src, []).append(i)
    # a peer's or an unknown source gets a key entry too: where it drew a node, or where the
    # caller keys it (a request's sources, so the key stays the same on every cycle)
    extra = [x for x in shown_sources(set(groups) | set(keyed)) if x not in ALL_SOURCES]
    keyed_names = [STATUS_STYLES[st].label for st in edges] + ["several sources"] + [
        label_of(x, replay) for x in list(ALL_SOURCES) + extra]
    key_below = _key_below(s, keyed_names)
    room = TITLE_ROOM + 40 + 20 * head.count("<br>") + key_below
    full = s.node_size + s.font_size + 8
    row = min(full, max(s.node_size + s.font_size, (TREE_MAX_HEIGHT - room) / span))
    height = max(s.height, round(room + span * row))
    headroom = 0.8          # rows above the top row: room for its labels
    if row < full:          # closed up for the request's widest tree: this one may need less
        row, closed = min(full, (height - room) / own), row
        span, headroom = (height - room) / row, headroom * closed / row   # (the top row stays where it is)
    place = _label_places(pos, cycle, bonus_xy, squeezed=row < full)
    for st, (xs, ys) in edges.items():
        ls = STATUS_STYLES[st]
        data.append({"type": "scatter", "x": xs or [None], "y": ys or [None], "mode": "lines",
                     "name": ls.label, "legendgroup": f"status-{st}", "hoverinfo": "skip",
                     "opacity": ls.opacity, "line": {"width": ls.width, "dash": ls.dash, "color": ls.colour},
                     "meta": f"edges-{st}"})

    # a ring under nodes that several sources proposed; it carries their labels, above the ring
    # (the node's own label, placed by the smaller marker, ran into the ring)
    multi = [i for i in range(1, min(n, len(cycle.sources))) if len(cycle.sources[i]) > 1]
    mode = "markers+text" if s.show_node_labels else "markers"
    # a label wider than a depth column runs into its neighbours': cut to what a column holds at the
    # app's width (LABEL_CHARS_ACROSS), at most the style's length (the hover has it whole)
    max_depth = max((p[0] for p in pos.values()), default=0) + 1      # the x range: -0.5 to max_depth + 0.7
    cut = min(s.max_label_chars, max(4, int(_chars_across(s, keyed_names, key_below) / (max_depth + 1.2))))
    label = {i: esc(cycle.token_text[i], cut) if i < len(cycle.token_text) else "" for i in range(n)}
    data.append({"type": "scatter", "x": [pos[i][0] for i in multi] or [None],
                 "y": [pos[i][1] for i in multi] or [None], "mode": mode, "name": "several sources",
                 "text": [label[i] for i in multi], "textposition": [place[i] for i in multi] or "top center",
                 "textfont": {"size": s.font_size - 1}, "cliponaxis": False,     # a top row's label stays whole
                 "legendgroup": "multi", "hoverinfo": "skip", "meta": "multi-source",
                 "marker": {"symbol": "circle-open", "size": s.node_size + MULTI_RING_PAD, "color": MULTI_SOURCE_RING,
                            "line": {"width": 2}}})

    # nodes, one trace per primary source
    shown_status = {"accepted": "accepted", "rejected": "rejected",
                    "uncommitted": "accepted, not committed: the output stops before it"}
    for src in sorted(groups, key=lambda x: ALL_SOURCES.index(x) if x in ALL_SOURCES else 99):
        idx = groups[src]
        data.append({
            "type": "scatter", "x": [pos[i][0] for i in idx], "y": [pos[i][1] for i in idx], "mode": mode,
            "text": ["" if i in multi else label[i] for i in idx],
            "textposition": [place[i] for i in idx], "textfont": {"size": s.font_size - 1}, "cliponaxis": False,
            "hovertext": [_node_hover(cycle, i, shown_status[status[i]], replay, int(pos[i][0])) for i in idx], "hoverinfo": "text",
            "name": source_label(src), "legendgroup": src, "showlegend": False, "customdata": idx,
            "marker": {"color": s.colour(src), "symbol": source_symbol(src),
                       "size": round(s.node_size * (SQUARE_SCALE if source_symbol(src) == "square" else 1), 1),
                       "opacity": [STATUS_STYLES[status[i]].opacity for i in idx],
                       "line": {"width": [STATUS_STYLES[status[i]].marker_line for i in idx], "color": "#111111"}},
            "meta": src})
    if selection is not None and 0 <= selection < n:
        # its own trace, over the node: full opacity (a rejected node is faded) in no source's colour
        data.append({"type": "scatter", "x": [pos[selection][0]], "y": [pos[selection][1]], "mode": "markers",
                     "name": "selected", "showlegend": False, "hoverinfo": "skip", "meta": "selection",
                     # outside the several-sources ring, which it would hide
                     "marker": {"symbol": "circle-open", "size": s.node_size + MULTI_RING_PAD + 6,
                                "color": SELECTION_RING,
                                "opacity": 1.0, "line": {"width": 3}}})
    if bonus_xy is not None:
        ls = STATUS_STYLES["bonus"]
        tok = _bonus_text(cycle)
        data.append({
            "type": "scatter", "x": [bonus_xy[0]], "y": [bonus_xy[1]], "mode": mode,
            "text": [esc(tok, cut)], "textposition": "top center",
            "textfont": {"size": s.font_size - 1},
            "hovertext": [f"<b>bonus token</b>: {esc(tok)} (id {cycle.bonus})<br>" + (
                _sampled_bonus(cycle) if cycle.decided_prob else
                "the recording's next token after the last accepted node (replay)" if replay else
                "the verifier's own next token after the last accepted node")],
            "hoverinfo": "text", "name": label_of(BONUS, replay), "legendgroup": BONUS,
            "showlegend": False,
            "marker": {"color": s.colour(BONUS), "symbol": source_symbol(BONUS), "size": s.node_size + 4,
                       "line": {"width": ls.marker_line, "color": "#111111"}},
            "meta": BONUS})
    data.extend(legend_marker(src, s, replay) for src in list(ALL_SOURCES) + extra)

    notes = []
    if n:
        counts, stop = verdict_parts(cycle, replay)
        title = f"{head}<br>{counts}"          # the verdict on a line of its own: a projector's width cut it
        flags = ([f"exact-match key: last {cycle.lexical_match_len} token{'s' if cycle.lexical_match_len > 1 else ''} "
                  "found before"] if cycle.lexical_match_len else []) + \
                (["semantic muted"] if cycle.semantic_muted else [])
        # below the head, each on a line of its own (at the app's width one line was cut off)
        if flags:
            title += f"<br><span style='font-size:{s.font_size}px'>({', '.join(flags)})</span>"
        if stop:
            title += f"<br><span style='font-size:{s.font_size}px;color:#555'>{stop}</span>"
    else:
        title = f"{head}<br>the prefill forward: no draft tree"     # two lines, as a drafting cycle's title
        notes.append(centred_note("the prefill reads the prompt:<br>" + (       # the title says "no draft tree"
            "the recording gives the first token (replay)" if replay else "the verifier gives the first token"),
            y=0.85))
    ys = ys_all
    top = 50 + 20 * title.count("<br>")
    # the y range (``span``, above), in rows from the top row down: this tree's, or as many as the
    # widest tree of its request needs (``rows``), so that stepping through a request the figure
    # keeps one height (``height``, above) and nothing below it moves; room for a three-line title
    # whatever this one's length
    y_top = max(ys, default=0) + headroom
    layout = panel_layout(s, title, height=height, annotations=notes, dragmode="pan",
                     legend={"itemsizing": "constant", "tracegroupgap": 2} if not key_below else {
                         "itemsizing": "constant", "orientation": "h", "x": 0, "xanchor": "left",
                         "yref": "container", "y": 0, "yanchor": "bottom"},
                     margin={"l": 40, "r": 10, "t": top, "b": 40 + key_below},
                     xaxis={"title": {"text": "depth"}, "dtick": 1, "range": [-0.5, max_depth + 0.7],
                            "zeroline": False, "showgrid": True, "gridcolor": "#EEEEEE"},
                     yaxis={"visible": False, "range": [y_top - span, y_top]})
    return {"data": data, "layout": pin_title(layout)}


KEY_BELOW = 1000     # a tree figure narrower than this (pixels) has its key under the plot


def _key_below(s: Style, keyed_names: list[str]) -> int:
    """The pixels a key under the plot takes (0: beside it, as in the app and wide exports): its
    entries' rows across the figure's width, with a little slack for plotly's own packing."""
    if not s.width or s.width >= KEY_BELOW:
        return 0
    return key_rows(keyed_names, s, s.width - 40) * (s.font_size + 10) + 8


def _chars_across(s: Style, keyed_names: list[str], key_below: int = 0) -> float:
    """The characters of a node label that fit across the tree's plot: :data:`LABEL_CHARS_ACROSS`
    in the app (the figure fills its container), else what the style's width leaves beside the
    key, or all of it with the key below (at 700 px, labels cut for the app's width ran into
    each other)."""
    if not s.width:
        return LABEL_CHARS_ACROSS
    key = 0 if key_below else max(key_entry_px(s, x) for x in keyed_names)
    return (s.width - 50 - key) / (CHAR_EM * (s.font_size - 1))


def _label_places(pos: dict, cycle: CycleTrace, bonus_xy, squeezed: bool = True) -> dict[int, str]:
    """Where each node's label goes: a leaf's to its right, where nothing is drawn in its row
    (not the last accepted node's: the bonus may hang there; above it, a leaf's label sat on the
    edge to the sibling above, the accepted path's too). Another's above it, where rows have
    their full room; in a tree whose rows closed up (no room for a label above a marker and the
    several-sources ring of the row above) above it if no marker sits within a row above it in
    its column, else below if none sits within a row below, else to its right if no marker (the
    bonus's included) sits there, else above as where rows do not close up."""
    last = cycle.accepted[-1] if cycle.accepted else 0
    inner = set(cycle.parents)
    marks = list(pos.values()) + ([bonus_xy] if bonus_xy else [])
    column: dict[float, list[float]] = {}
    for x, y in marks:
        column.setdefault(x, []).append(y)
    out = {}
    for i, (x, y) in pos.items():
        if i not in inner and i != last:
            out[i] = "middle right"
            continue
        if not squeezed:
            out[i] = "top center"
            continue
        above = any(0 < oy - y <= 1 for oy in column[x])
        below = any(0 < y - oy <= 1 for oy in column[x])
        beside = any(ox == x + 1 and abs(oy - y) < 0.5 for ox, oy in marks)
        out[i] = ("top center" if not above else "bottom center" if not below
                  else "middle right" if not beside else "top center")
    return out


def tree_figure(cycle: CycleTrace, selection: int | None = None, style: Style | None = None,
                keyed: Iterable[str] = (), replay: bool = False, live: bool = False, rows: float = 0,
                lexical: Iterable[str] = ()) -> go.Figure:
    """The draft tree of one cycle.

    One marker per draft node at (depth, row) (:func:`tree_layout`), coloured and shaped by its
    source (:func:`workbench.palette.primary_source`: exact match first; a grey ring marks nodes that
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
    unknown one keeps its key entry on every cycle. ``replay``: the cycle is a replay's
    (:func:`~workbench.panels.provenance.is_replay` of its request): the hovers call the argmax the local model's and the
    bonus the recording's, which decided the verdict. ``rows``: lay the tree out in at least
    this many rows (:func:`~workbench.panels.provenance.tree_rows` of its request, the widest
    tree's), so that every cycle of a request has one height; a tree that would be taller than
    :data:`TREE_MAX_HEIGHT` closes its rows up instead, and moves its labels where a row leaves
    them room (:func:`_label_places`: a leaf's beside it; above, a label ran into the ring of the
    row above). ``lexical``: the exact-match sources of
    the request (:func:`oilbird.trace.lexical_sources`), so a spine source of one's own colours a
    node before the key. :func:`trace_marks` gives ``replay``, ``live``, ``rows`` and ``lexical``
    of a request: ``F.tree_figure(c, **F.trace_marks(request))``.

    Traces, in order: one edge trace per status (``meta`` "edges-accepted" / "edges-uncommitted"
    (only where it occurs) / "edges-rejected" / "edges-bonus"), the several-sources ring
    ("multi-source"), one node trace per source present (``meta`` = the source; root first), the
    bonus node ("bonus"; only when it was committed), then one legend-only trace per
    source in :data:`~workbench.palette.ALL_SOURCES` and per other source in the tree or in ``keyed``.
    """
    return figure(tree_spec(cycle, selection, style, keyed, replay, live, rows, lexical), style)
