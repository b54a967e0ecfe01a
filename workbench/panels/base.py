"""Plumbing every panel shares: whitespace made visible, the spec -> Figure step, layouts,
legend-only entries, notes, subplot grids and marker lines.

A panel is built as a plain plotly JSON dict (a *spec*, ``{"data", "layout"}``) without
plotly's per-property validation (~100x cheaper); :func:`figure` validates it into a
``plotly.graph_objects.Figure`` and :func:`spec_json` serialises it unvalidated for the app.
This module knows plotly and the palette's :class:`~workbench.palette.Style`; it knows nothing
about traces.
"""
from __future__ import annotations

import html
import math
import re
import textwrap

import plotly.graph_objects as go
import plotly.io as pio

from ..palette import BONUS, DEFAULT_STYLE, Style, source_label, source_symbol

# (a newline's mark was U+23CE, '⏎', drawn 5 px wide in DejaVu Sans Mono at 11 px: it read as '-')
WHITESPACE = {" ": "·", "\n": "↵", "\t": "→", "\r": "␍"}
# the selected-cycle marker line: black, as the cycle's frame in the strips (vermillion, its colour
# until the thirty-sixth session, is the semantic key's)
CURSOR = {"width": 2, "dash": "dot", "color": "#111111"}
PATTERN = {"fillmode": "overlay", "size": 8, "solidity": 0.25}  # hatching drawn over the fill colour
# plotly's and kaleido's figure width where style.width is not set, and a monospace character's
# width in em (about 0.6, a little slack): what a panel counts to make its text fit
TABLE_WIDTH = 700
CHAR_EM = 0.62
TITLE_LINE = 1.3      # plotly's pitch of a title's lines, in its font's size (a smaller span's lines too)

# two rules of credit, both intended, named where they show so they are not read as a
# contradiction: a token several sources proposed is coloured by one (exact match first) in the
# text, the comparison and the strips, and split evenly among them in the metrics' share (its
# hatched part; the solid part: tokens one source alone proposed, the same in every accounting)
# (a static figure's key: it has no hover)
BY_PRIMARY_STATIC = "colour: one source per token, exact match first (the semantic colour: what the key added)"
BY_PRIMARY = BY_PRIMARY_STATIC + ", hover: all"
SHARE_TITLE = "tokens by source: alone + shared (hatched)"
BY_PRIMARY_KEY = "each token under one source, exact match first:"


def visible(token: str) -> str:
    """A token with its whitespace made visible: space '·', newline '↵', tab '→', CR '␍';
    the empty string (e.g. EOS) becomes '∅'.

    >>> visible(' "a":\\n')
    '·"a":↵'
    """
    return "".join(WHITESPACE.get(ch, ch) for ch in token) if token else "∅"


def esc(token: str, limit: int | None = None) -> str:
    """Whitespace made visible, optionally cut, then HTML-escaped (plotly text is HTML-ish)."""
    v = visible(token)
    if limit is not None and len(v) > limit:
        v = v[: max(1, limit - 1)] + "…"
    return html.escape(v, quote=False)


def price(p: float) -> str:
    """A fill's price (oilbird.drafter.FillPrices) as every view says it, to three figures (a bar
    and a cut chain's price are often close): 0.0625 -> "0.0625", 0.01734 -> "0.0173"."""
    return f"{p:.3g}"


def figure(spec: dict, style: Style | None = None) -> go.Figure:
    """A validated plotly Figure from a spec, with ``style.template`` applied."""
    return go.Figure({**spec, "layout": {**spec.get("layout", {}), "template": style_or_default(style).template}})


def spec_json(spec: dict) -> str:
    """The spec as plotly JSON, without validation (what the app sends to the browser)."""
    return pio.to_json(spec, validate=False)


def wrap_to(text: str, s: Style, font_px: float, fallback: int | None = None, margin: int = 20) -> list[str]:
    """Plain ``text`` (escape it after) in lines that fit a figure ``s.width`` pixels wide, less
    ``margin``, in a ``font_px`` monospace font (no line for blank text). A figure with no width of
    its own fills the app's container, which the figure does not know: there ``text`` is wrapped
    at ``fallback`` characters, or not at all. (Plotly does not wrap a title or a note: at 700 px,
    an export's lines were cut at the right edge.) Lines break after " · ", "; " or ": " where
    they can, else between words."""
    if not text.strip():
        return []          # (a blank line would add a line to a title, and its height)
    chars = int((s.width - margin) / (CHAR_EM * font_px)) if s.width else fallback
    if not chars:
        return [text]
    chars = max(20, chars)
    # whole phrases where they fit: a line breaks after " · ", "; " or ": " first (at a word break
    # a title was cut inside "replayed (the recording decides)", a note inside a command)
    lines: list[str] = []
    for phrase in re.split(r"(?<= · )|(?<=; )|(?<=: )", text):
        if lines and len(lines[-1]) + len(phrase.rstrip()) <= chars:
            lines[-1] += phrase
        else:
            lines.extend(textwrap.wrap(phrase, chars, break_on_hyphens=False, drop_whitespace=False) or [""])
    return [line.strip() for line in lines if line.strip()]


def wrap_html(text: str, s: Style, font_px: float, fallback: int | None = None, margin: int = 20,
              quote: bool = True) -> str:
    """:func:`wrap_to`'s lines, each HTML-escaped (after wrapping: a break inside an escape would
    break it; ``quote`` as :func:`html.escape`'s), joined by line breaks: a title's or a note's
    text ("" for blank text)."""
    return "<br>".join(html.escape(x, quote=quote) for x in wrap_to(text, s, font_px, fallback, margin))


def style_or_default(style: Style | None) -> Style:
    return style if style is not None else DEFAULT_STYLE


def panel_layout(s: Style, title: str, height: int | None = None, **extra) -> dict:
    """The layout every panel starts from: title top left, white, the style's font."""
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


def title_height(title: str, s: Style) -> float:
    """Pixels from a figure's top to the foot of its ``title``'s lines (pinned: :func:`pin_title`):
    plotly spaces them by the title's font, a smaller span's lines too (:data:`TITLE_LINE`)."""
    return 26 + TITLE_LINE * (s.font_size + 2) * (title.count("<br>") + 1)


def key_entry_px(s: Style, name: str) -> float:
    """Pixels one entry of a horizontal key takes: its text, swatch and padding."""
    return len(name) * CHAR_EM * s.font_size + 45


def key_rows(names: list[str], s: Style, across: float) -> int:
    """Rows a horizontal key of ``names`` takes across ``across`` pixels, with a little slack for
    plotly's own packing (it wraps a key that does not fit; a figure must leave room for the rows)."""
    return math.ceil(1.1 * sum(key_entry_px(s, x) for x in names) / across)


def pin_title(layout: dict, top: int = 26) -> dict:
    """Put a panel's title with its first line ``top`` pixels from the figure's top (plotly
    centres a title in the top margin, which grows with its lines: stepping cycles, a title that
    holds still on a projector; and a title of several lines no longer runs into what is below
    the margin). ``layout``'s height must be set; returned for chaining."""
    layout["title"].update(y=1 - top / layout["height"], yref="container", yanchor="top")
    return layout


# in a replay the recording, not the verifier, gives the bonus token
REPLAY_BONUS_LABEL = "bonus (recording)"


def label_of(source: str, replay: bool = False) -> str:
    """A source's name in a key; in a replay (``replay``) the bonus is the recording's."""
    return REPLAY_BONUS_LABEL if replay and source == BONUS else source_label(source)


def legend_marker(source: str, s: Style, replay: bool = False) -> dict:
    """A data-less trace that only carries a legend entry for ``source`` (``replay``: the bonus
    is the recording's)."""
    name = label_of(source, replay)
    return {"type": "scatter", "x": [None], "y": [None], "mode": "markers", "name": name,
            "legendgroup": source, "showlegend": True, "hoverinfo": "skip",
            "marker": {"color": s.colour(source), "symbol": source_symbol(source), "size": 11,
                       "line": {"width": 1, "color": "#222222"}}}


def centred_note(text: str, y: float = 0.5) -> dict:
    """A centred grey annotation (a message where a panel has nothing to draw)."""
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": y, "showarrow": False,
            "font": {"size": 13, "color": "#555555"}}


def message_spec(title: str, text: str, style: Style | None = None) -> dict:
    """An empty figure with a title and a centred message (e.g. "no trace yet")."""
    s = style_or_default(style)
    return {"data": [], "layout": panel_layout(s, html.escape(title), height=220,
                                               annotations=[centred_note(html.escape(text))],
                                               xaxis={"visible": False}, yaxis={"visible": False})}


def grid(rows: int, cols: int, titles: tuple = (), hspace: float = 0.1, vspace: float = 0.2,
         row_heights: list[float] | None = None) -> tuple[dict, dict]:
    """Axes for a rows x cols grid of subplots (what ``make_subplots`` does, at no cost).

    Returns (layout fragment, ``{(row, col): (xref, yref)}``), rows counted from the top.
    """
    hs = row_heights or [1.0] * rows
    total = sum(hs)
    usable_h, w = 1 - vspace * (rows - 1), (1 - hspace * (cols - 1)) / cols
    frag: dict = {"annotations": []}
    refs: dict = {}
    top, k = 1.0, 0
    for r in range(rows):
        h = hs[r] / total * usable_h
        for c in range(cols):
            k += 1
            suffix = "" if k == 1 else str(k)
            x0 = c * (w + hspace)
            frag[f"xaxis{suffix}"] = {"domain": [_unit(x0), _unit(x0 + w)], "anchor": f"y{suffix}"}
            frag[f"yaxis{suffix}"] = {"domain": [_unit(top - h), _unit(top)], "anchor": f"x{suffix}"}
            refs[(r + 1, c + 1)] = (f"x{suffix}", f"y{suffix}")
            if k <= len(titles) and titles[k - 1]:
                frag["annotations"].append({"text": titles[k - 1], "xref": "paper", "yref": "paper",
                                            "x": x0 + w / 2, "y": top, "xanchor": "center",
                                            "yanchor": "bottom", "showarrow": False})
        top -= h + vspace
    return frag, refs


def _unit(v: float) -> float:
    """Clamp a paper coordinate to [0, 1] (float sums can land a hair outside)."""
    return min(1.0, max(0.0, round(v, 6)))


def axis_key(ref: str) -> str:
    """'x3' -> 'xaxis3' (the layout key of an axis reference)."""
    return ref[0] + "axis" + ref[1:]


def vline(x: float, xref: str, yref: str, line: dict) -> dict:
    """A vertical line at ``x`` across the whole height of one subplot."""
    return {"type": "line", "x0": x, "x1": x, "y0": 0, "y1": 1, "xref": xref, "yref": f"{yref} domain",
            "line": line}
