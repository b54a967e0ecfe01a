"""The generated-text panel: the tokens committed so far, each coloured by the source that
delivered it, the selected cycle's tokens emphasised.

One row list (:func:`text_cells`: one :class:`TokenCell` per committed token) is formatted by
two renderers: :func:`text_spec` (a plotly figure, for notebooks and exports) and
:func:`text_html` (the app's panel). Reads the request's ``output_text``, ``output_ids`` and
each cycle's ``committed_sources``; which source colours a token is the palette's
:func:`~workbench.palette.primary_source` (exact match first).
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import plotly.graph_objects as go

from oilbird.trace import RequestTrace, lexical_sources

from ..palette import BONUS, Style, ink, primary_source, shown_sources
from .base import (BY_PRIMARY, BY_PRIMARY_STATIC, CHAR_EM, centred_note, esc, figure, label_of,
                   legend_marker, panel_layout, pin_title, style_or_default, title_height, visible, wrap_html, wrap_to)
from .provenance import committed_upto, is_replay, replay_note, token_cycles, token_sources

# each token's underline, in its source's colour, by a line style that tells apart the sources
# whose hues draw close under a colour-vision deficiency (the key and the bonus; suffix, prompt
# lookup and recycling; rejected and recycling; suffix and the arctic peer): the pairs that share a
# style differ by more than 15 in CIEDE2000 under deuteranopia, protanopia and tritanopia (and
# the two dashed ones never share a trace). The bonus, the verifier's own token, is not underlined
TEXT_BORDERS = {"suffix": "solid", "live": "solid", "semantic": "double", "pld": "double",
                "recycling": "dashed", "suffix-arctic": "dashed", "rejected": "dotted", BONUS: "none"}


@dataclass(frozen=True)
class TokenCell:
    """One committed output token, as both renderers show it."""
    index: int                 # position in the output
    text: str                  # the token's text, raw
    token_id: int | None       # None where the trace has fewer ids than texts
    delivered_by: str          # its sources as the legend names them; "?" where the trace does not say
    source: str                # the one it is coloured by (primary_source: exact match first)
    cycle: int | str           # the recorded number of the cycle that committed it ("?": unknown)
    now: bool                  # committed in the selected cycle


def text_cells(request: RequestTrace, cycle: int | None = None) -> list[TokenCell]:
    """The tokens committed once cycle index ``cycle`` has run (all of them for None)."""
    srcs, cyc = token_sources(request), token_cycles(request)
    replay, lexical = is_replay(request), lexical_sources(request)
    out = []
    for k, piece in enumerate(request.output_text[:committed_upto(request, cycle)]):
        known = k < len(srcs)
        out.append(TokenCell(
            index=k, text=piece, token_id=request.output_ids[k] if k < len(request.output_ids) else None,
            delivered_by=", ".join(label_of(x, replay) for x in srcs[k]) if known else "?",   # the legend's names
            source=primary_source(srcs[k] if known else [BONUS], lexical),
            cycle=request.cycles[cyc[k]].cycle if k < len(cyc) else "?",
            now=cycle is not None and k < len(cyc) and cyc[k] == cycle))
    return out


def text_key(request: RequestTrace) -> list[str]:
    """The sources the key lists: the colouring source (primary_source) of every output token (so the key
    holds still while one steps through the cycles)."""
    lexical = lexical_sources(request)
    return shown_sources(primary_source(x, lexical) for x in token_sources(request))


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
    s = style_or_default(style)
    cells = text_cells(request, cycle)
    # as many characters as the figure's width holds (80 where it has none, as before): the text of a
    # 1200 px export wrapped at 80, leaving the right 40% empty
    line_chars = s.line_chars or (int((s.width - 30) / (CHAR_EM * (s.font_size + 1))) if s.width else 80)
    rows = _token_rows([t.text for t in cells], line_chars)
    lines: list[list[TokenCell]] = [[] for _ in range((rows[-1][0] + 1) if rows else 0)]
    for t, (r, _, _) in zip(cells, rows):
        lines[r].append(t)

    def span(t: TokenCell) -> str:
        text = esc(t.text)
        if t.now:
            text = f"<b><u>{text}</u></b>"
        if t.source == "semantic":      # the cue beside the hue for the key's tokens (the title says so)
            text = f"<i>{text}</i>"
        return f"<span style='color:{ink(s.colour(t.source))}'>{text}</span>"

    def hover(t: TokenCell) -> str:
        return f"{t.index}: {esc(t.text)} ← {t.delivered_by} (cycle {t.cycle})"

    # one text element per line, left-aligned, so the monospace tokens sit edge to edge
    data = [{"type": "scatter", "x": [0] * len(lines), "y": [-r for r in range(len(lines))], "mode": "text",
             "text": ["".join(span(t) for t in ts) for ts in lines], "textposition": "middle right",
             "textfont": {"size": s.font_size + 1}, "hovertext": ["<br>".join(hover(t) for t in ts) for ts in lines],
             "hoverinfo": "text", "showlegend": False, "name": "text", "meta": "text"}]
    data.extend(legend_marker(src, s, is_replay(request)) for src in text_key(request))
    n_rows = max(1, len(lines))
    # the key on a line of its own (after the counts it was cut at an export's width), and what a
    # static image shows: no hover
    key = (BY_PRIMARY_STATIC + ("; the key's in italics" if any(t.source == "semantic" for t in cells) else "")
           + ("; this cycle's in bold, underlined" if any(t.now for t in cells) else ""))
    # each note on lines of its own, wrapped to an export's width (at 700 px they were cut)
    notes = [line for n in (key, replay_note(request)) if n for line in wrap_to(n, s, s.font_size - 1)]
    small = f"<br><span style='font-size:{s.font_size - 1}px;color:#555'>"
    head = wrap_html(f"{request.request_id} · {request.method}: {committed_upto(request, cycle)} of "
                     f"{len(request.output_ids)} tokens", s, s.font_size + 2)
    title = head + "".join(f"{small}{html.escape(n, quote=False)}</span>" for n in notes)
    # the title's lines pinned to the top and the text below them (plotly spaces a title's lines by
    # its own font: the notes' smaller one sank onto the text once wrapped at 700 px)
    top = round(title_height(title, s) + 8)
    lay = panel_layout(s, title, height=max(170, 120 + 24 * n_rows) + top - 50,
                       annotations=[] if cells else [centred_note("no tokens committed yet")],
                       legend={"orientation": "h", "y": -0.02, "yanchor": "top"},
                       margin={"l": 10, "r": 10, "t": top, "b": 10},
                       xaxis={"visible": False, "range": [-0.02, 1]},
                       yaxis={"visible": False, "range": [-n_rows + 0.5, 0.7]})
    return {"data": data, "layout": pin_title(lay)}


def text_figure(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> go.Figure:
    """The generated text through cycle index ``cycle``, each token coloured by the source that
    delivered it (``CycleTrace.committed_sources``; ``<span style='color:...'>`` inside one
    text element per line), one (exact match first) where several proposed it (the title says
    so; the hover lists them all); the tokens committed in that cycle are bold and underlined.
    Whitespace is visible; lines wrap at ``style.line_chars`` (default: what the width holds, 80
    characters without one). Trace 0 holds the lines, then one legend-only trace per source."""
    return figure(text_spec(request, cycle, style), style)


def _underline(src: str, s: Style) -> str:
    """A source's colour, as text dark enough to read (:func:`~workbench.palette.ink`), and its
    underline in the colour itself, whose line style says the source without hue
    (:data:`TEXT_BORDERS`), set below the text (an underscore must stay visible above the line)."""
    return (f"color:{ink(s.colour(src))};border-bottom:3px {TEXT_BORDERS.get(src, 'solid')} {s.colour(src)};"
            "padding-bottom:2px;")


TEXT_LINES = 4          # the text panel shows this many whole lines; longer output scrolls
TEXT_LINE_EM = 1.9      # its line height: the box is a whole number of lines tall, so the top
TEXT_BOX_EM = TEXT_LINES * TEXT_LINE_EM    # line is never cut in half


def _piece(text: str) -> str:
    """A token's text as the HTML panel shows it: whitespace visible, a line break after a newline."""
    return html.escape(visible(text)) + ("<br>" if "\n" in text else "")


NOW_BACKGROUND = "#F0E44266"      # the selected cycle's tokens: a pale yellow (Okabe-Ito's, at 40%)


def text_html(request: RequestTrace, cycle: int | None = None, style: Style | None = None) -> str:
    """The view of :func:`text_figure` as an HTML fragment (the app's text panel), in a box of
    :data:`TEXT_LINES` whole lines that shows the newest ones and scrolls back to the older ones.

    Each token is a ``<span class="tok" data-source=...>`` coloured by its delivering source,
    with a bottom border whose line style also says the source; the tokens of the selected
    cycle get a pale highlight; the ``title`` attribute is the hover text.
    """
    s = style_or_default(style)
    parts = []
    for t in text_cells(request, cycle):
        css = _underline(t.source, s) + (f"background:{NOW_BACKGROUND};" if t.now else "")
        tip = html.escape(f"token {t.index} (id {'?' if t.token_id is None else t.token_id}), "
                          f"delivered by {t.delivered_by}", quote=True)
        parts.append(f'<span class="tok" data-source="{t.source}" title="{tip}" style="{css}">{_piece(t.text)}</span>')
    # every token of the output, wrapped whole as the shown ones are (.tok is white-space:pre)
    ghost = [f'<span style="white-space:pre;">{_piece(x)}</span>' for x in request.output_text]
    replay = is_replay(request)
    legend = " ".join(f'<span style="{_underline(x, s).rstrip(";")}">{html.escape(label_of(x, replay))}</span>'
                      for x in text_key(request))
    body = "".join(parts) or '<span style="color:#666">(no tokens committed yet)</span>'
    legend = f'<span style="color:#666">{BY_PRIMARY}:</span> {legend}'
    if cycle is not None:        # the highlight is keyed too
        legend += f' · <span style="background:{NOW_BACKGROUND}">this cycle\'s tokens</span>'
    # a box of a few lines that opens scrolled to its end (column-reverse), so the panels below
    # it (the tree) stay where they are: on a projector, Next and the tree stay on one screen.
    # Under it, in the same grid cell, the whole output, invisible: the box is as tall from the
    # first cycle as at the last (up to its lines), so the tree does not slide down as it grows
    font = f"font-family:{s.font_family};line-height:{TEXT_LINE_EM:g}em;word-break:break-all"
    return (f'<div class="wb-text-frame" style="display:grid;max-height:{TEXT_BOX_EM:g}em;overflow:hidden">'
            f'<div class="wb-text-ghost" aria-hidden="true" style="grid-area:1/1;visibility:hidden;{font}">'
            f'{"".join(ghost)}</div>'
            f'<div class="wb-text-box" style="grid-area:1/1;max-height:{TEXT_BOX_EM:g}em;overflow-y:auto;display:flex;'
            f'flex-direction:column-reverse"><div class="wb-text" style="{font}">{body}</div></div></div>'
            f'<div class="wb-legend" style="font-size:0.85em;margin-top:4px">{legend}</div>')
