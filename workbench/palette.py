"""The one palette of the workbench: draft source -> colour + marker, node status -> line style.

Every figure in :mod:`workbench.figures` (and so the app and the notebooks) takes its colours
from here, so a source looks the same in every view.

Colour-blind safety: the hues are the Okabe-Ito set, and no hue carries meaning alone: each
source also has its own marker shape (the tree), fill pattern (the comparison's bars) and
underline style (the text panel; in the text figure the key's tokens are italic), each status its
own line width and dash, and each gap label its own fill pattern. Text set in a source's colour
uses its :func:`ink`, dark enough to read (WCAG AA); an area filled in the bonus's colour beside
the sources' (the comparison) its paler :func:`area_colour`, which prints lighter in greyscale.

Nodes proposed by several sources (a chain that re-walks nodes another source paid for) are
coloured by one of them, in the order of :data:`PRECEDENCE`, *exact match first*::

    suffix > suffix-arctic > pld > live > semantic > rejected > recycling

i.e. the exact-match (lexical) sources from the most to the least specific match, then the
hidden-state key, the rejected-branch pool, and token adjacency (recycling) last. So the
hidden-state key's colour marks what it added beyond what exact matching already had: the
question this workbench is asked (colouring the key first made every token it shared with
prompt lookup look like its own). Such nodes also get a grey ring ("several sources" in the
legend) and the hover lists every source with its score, so the overlap is never hidden.

``suffix-arctic`` is the source of the published SuffixDecoding peer (:mod:`oilbird.evaluation.peers`),
a light cyan beside the suffix index's sky blue; ``live`` copies what the engine's other running
requests have written so far (the vLLM proposer's exact-match source), in sand. A source this palette does not know is drawn
in :data:`UNKNOWN_COLOUR` under its own name (:func:`shown_sources`), never dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour
# vision deficiencies.
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "black": "#000000",
    "grey": "#999999",
}

ROOT = "root"
BONUS = "bonus"
DRAFT_SOURCES = ("pld", "suffix", "recycling", "semantic", "rejected")
ALL_SOURCES = DRAFT_SOURCES + (BONUS, ROOT)   # in every key, so the key never changes between views
# sources outside the local presets: the peer decoders' (oilbird.evaluation.peers) and the vLLM
# proposer's other running requests (oilbird.sources.live): coloured, keyed only in views that hold them
PEER_SOURCES = ("suffix-arctic", "live")

# exact match first (every name of oilbird.trace.LEXICAL_SOURCES), then the hidden-state key; see the
# module docstring
PRECEDENCE = ("suffix", "suffix-arctic", "pld", "live", "semantic", "rejected", "recycling")

SOURCE_COLOURS = {
    "semantic": OKABE_ITO["vermillion"],
    "rejected": OKABE_ITO["reddish_purple"],
    "suffix": OKABE_ITO["sky_blue"],
    "suffix-arctic": "#88CCEE",   # Paul Tol's colour-blind-safe cyan: next to, but not, sky blue
    "live": "#DDCC77",            # Paul Tol's sand
    "pld": OKABE_ITO["blue"],
    "recycling": OKABE_ITO["bluish_green"],
    BONUS: OKABE_ITO["orange"],
    ROOT: OKABE_ITO["black"],
}
UNKNOWN_COLOUR = OKABE_ITO["grey"]
# a source this palette does not know (one of a researcher's own): a shape no other entry of a key
# has (an open circle, its shape until the thirty-sixth session, read as the "several sources" ring)
UNKNOWN_SYMBOL = "x"

SOURCE_SYMBOLS = {
    "semantic": "star",
    "rejected": "pentagon",
    "suffix": "diamond",
    "suffix-arctic": "diamond-tall",
    "live": "triangle-down",
    "pld": "square",
    "recycling": "triangle-up",
    BONUS: "hexagram",
    ROOT: "circle",
}

# A second cue beside the hue wherever a source fills an area (the comparison's bars): a fill
# pattern. The pairs that draw close under a colour-vision deficiency differ here (the key and the
# bonus; suffix, prompt lookup and recycling; rejected and recycling); the bonus, the verifier's
# own token and no draft, is plain, as in the text's underlines (workbench.panels.text)
SOURCE_PATTERNS = {
    "semantic": "/",
    "rejected": "\\",
    "suffix": "",
    "suffix-arctic": "-",
    "live": "|",
    "pld": ".",
    "recycling": "x",
    BONUS: "",
}

SOURCE_LABELS = {
    "semantic": "semantic key",
    "rejected": "rejected-branch pool",
    "suffix": "suffix index",
    "suffix-arctic": "arctic suffix (peer)",
    "live": "other running requests",
    "pld": "prompt lookup",
    "recycling": "token recycling",
    BONUS: "bonus (verifier)",
    ROOT: "root (last committed)",
}

# Gap labels, one per output token (see oilbird.evaluation.diagnose): colour + bar fill pattern.
GAP_LABELS = ("lexical_hit", "gap_recovered", "gap_missed", "absent")
GAP_KINDS = ("gap_recovered", "gap_missed")     # the gap itself: in the pool, missed by exact matching
# One colour, one meaning on a screen that shows the strip beside the tree and the text: the key's
# reach in the semantic key's vermillion, an exact match's in the sky blue of the exact-match
# sources' family, and what no key reaches in greys (orange, the gap missed's colour until the
# thirty-fifth session, is the bonus token's in the tree and the text)
GAP_COLOURS = {
    "lexical_hit": OKABE_ITO["sky_blue"],
    "gap_recovered": OKABE_ITO["vermillion"],
    "gap_missed": "#8C8C8C",
    "absent": "#DDDDDD",
}
GAP_PATTERNS = {"lexical_hit": "", "gap_recovered": "/", "gap_missed": "x", "absent": "."}
GAP_DESCRIPTIONS = {
    "lexical_hit": "lexical hit",
    "gap_recovered": "gap: semantic key reaches",
    "gap_missed": "gap missed",
    "absent": "absent from pool (as a pair)",
}
# What "the pool" of the diagnosis is (oilbird.evaluation.diagnose, pool="generated", the labels' pool):
# said wherever a label is, so "absent from pool" is not read as "absent from the prompt".
GAP_POOL = "pool = the generated outputs of earlier requests only (no prompts; not this request's own output)"
# ... in a replay: the pool holds the recording's outputs, which the local model did not generate
GAP_POOL_RECORDED = ("pool = the recorded outputs of earlier turns only (no prompts; not this turn's own output); "
                     "the key's states are {model} states")
GAP_EXPLANATIONS = {
    "lexical_hit": "the next 2 tokens occur in the pool and an exact match of the context finds the true next token",
    "gap_recovered": ("in the pool, missed by exact matching, within the hidden-state key's reach (a top-8 "
                      "neighbour continues right when queried with this position's own state, which the drafter "
                      "does not have yet when it drafts: its own key is one token behind and reaches less)"),
    "gap_missed": ("in the pool, missed by exact matching and by the hidden-state key queried with this position's "
                   "own state (the drafter's key, one token behind and a lookup of its own, may still reach it)"),
    "absent": ("the next 2 tokens occur nowhere in the pool as a pair (either alone may: a source can still copy "
               "this token)"),
}
# Beside the labels, at gap positions (trace ``drafter_reach``): whether the key the drafter can ask
# when it drafts reaches the token too. The diagnosis' key reads the state whose head emits the
# token; the drafter has it only after this cycle's forward, so it asks with the one before.
DRAFTER_MARK = "drafter's key reaches it"
DRAFTER_UNMARKED = "drafter's key does not reach it"     # (the words under the strip, beside DRAFTER_MARK)
DRAFTER_EXPLANATION = ("the hidden-state key as the drafter must ask it, one token behind (the state of the token "
                       "before, among the records followed by the root token), has a top-8 record that continues right")
# a position is *asked* when it is the first token after a drafting cycle's root: that cycle's
# lookup (its neighbour table) was keyed for it. A token accepted deeper in a tree, or the bonus
# after a path, had no lookup keyed for it; its mark says what one would have found (a chain
# retrieved at the root may still reach it, copied further)
DRAFTER_UNASKED = ("had a cycle asked here; none did: a cycle asks only for the token after its root, and this "
                   "token came later in its cycle")
DRAFTER_NOT = "the drafter's own key (one token behind) does not reach it"
DRAFTER_TOO = "the drafter's own key (one token behind) reaches it too"
DRAFTER_LEGEND = "the drafter's own key (the hidden-state key one token behind, as it must ask) reaches the token"
DRAFTER_MISSING = "this trace does not say where the drafter's key reaches (made before it recorded drafter_reach)"

# Timing stages of a cycle, in the order they run.
STAGES = ("draft", "verify", "commit", "update")
# greys: a stage shares its figure with bars coloured by source, so it takes no source's colour
STAGE_COLOURS = {
    "draft": "#333333",
    "verify": "#777777",
    "commit": "#AAAAAA",
    "update": "#D0D0D0",
}
STAGE_PATTERNS = {"draft": "", "verify": "/", "commit": ".", "update": "x"}


@dataclass(frozen=True)
class LineStyle:
    """How an edge into a node (and the node itself) is drawn for one status."""
    width: float
    dash: str            # plotly dash name
    colour: str
    opacity: float       # node and edge opacity
    marker_line: float   # outline width of the node marker
    label: str


STATUS_STYLES = {
    "accepted": LineStyle(4.0, "solid", "#222222", 1.0, 2.0, "accepted path"),
    "rejected": LineStyle(1.2, "dash", "#999999", 0.4, 0.5, "rejected"),
    "bonus": LineStyle(2.5, "dot", OKABE_ITO["orange"], 1.0, 2.0, "bonus token"),
    # accepted by the verifier but past the end of the output (its token limit or EOS), so never
    # committed: its own dash and a mid opacity, neither the bold path nor the faded rejects
    "uncommitted": LineStyle(2.5, "longdash", "#222222", 0.7, 1.0, "accepted, not committed (output ended)"),
}
MULTI_SOURCE_RING = "#555555"
# a warning inside a panel or a notebook's widget, as the app's banner shows one: dark text and a
# grey bar, no source's colour (vermillion, its colour until the thirty-sixth session, is the key's);
# assets/workbench.css draws the banner (#wb-error) with the same bar and padding
WARNING_CSS = "color:#222;border-left:4px solid #555;padding-left:8px"
SELECTION_RING = "#000000"       # the node a view points at: no source's colour, never faded


def primary_source(sources, lexical: Iterable[str] = ()) -> str:
    """The source a node (or committed token) is coloured by: the first in :data:`PRECEDENCE`
    (an exact-match source where one proposed it, else the hidden-state key, ...). ``lexical``:
    the exact-match sources of its trace (:func:`oilbird.trace.lexical_sources`); one the
    palette does not rank, a spine source of one's own, comes before the key too.

    >>> primary_source(["pld", "semantic"])
    'pld'
    >>> primary_source(["semantic", "recycling"])
    'semantic'
    >>> primary_source(["mine", "semantic"]), primary_source(["mine", "semantic"], lexical={"mine", "pld"})
    ('semantic', 'mine')
    >>> primary_source([])
    'root'
    """
    srcs = list(sources or ())
    if not srcs:
        return ROOT
    own = sorted(s for s in srcs if s in lexical and s not in PRECEDENCE)
    for s in PRECEDENCE:
        if s == "semantic" and own:
            return own[0]
        if s in srcs:
            return s
    if own:
        return own[0]
    if BONUS in srcs:
        return BONUS
    return sorted(srcs)[0]


OWN_SOURCES = [s for s in PRECEDENCE if s in DRAFT_SOURCES]   # every key lists these


def shown_sources(seen=()) -> list[str]:
    """The sources a key or a share lists: this project's draft sources always (in
    :data:`PRECEDENCE` order), then the names in ``seen`` that are not among them, a peer's
    (``suffix-arctic``) or one this palette does not know, then bonus; so no token is dropped.

    >>> shown_sources(["pld", "mystery", "bonus"])[-2:]
    ['mystery', 'bonus']
    >>> "suffix-arctic" in shown_sources(["pld"])
    False
    """
    others = {s for s in seen if s not in DRAFT_SOURCES and s not in (BONUS, ROOT)}
    return OWN_SOURCES + sorted(others, key=lambda s: (s not in PRECEDENCE, s)) + [BONUS]


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#RRGGBB``."""
    lin = [(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
           for c in (int(colour.lstrip("#")[k:k + 2], 16) / 255 for k in (0, 2, 4))]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def area_colour(source: str, style: "Style | None" = None) -> str:
    """``source``'s colour where it fills an area beside the others (the comparison's stacked bars
    and token strip): its own, but the bonus's (the verifier's token, no draft) half mixed with
    white. Its orange and the suffix index's sky blue print the same grey (luminance 0.42 and
    0.41; neither has a fill pattern), and at 700 px the bars are too thin for a pattern to show:
    paler, the bonus prints lighter than every drafted source.

    >>> area_colour("bonus")
    '#F2CF80'
    """
    colour = (style or DEFAULT_STYLE).colour(source)
    if source != BONUS:
        return colour
    return "#" + "".join(f"{round((int(colour[k:k + 2], 16) + 255) / 2):02X}" for k in (1, 3, 5))


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two ``#RRGGBB`` colours (1 to 21; text wants 4.5).

    >>> round(contrast("#000000", "#FFFFFF"))
    21
    """
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def on_colour(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (a value printed inside a bar)."""
    return "#000000" if contrast("#000000", fill) >= contrast("#FFFFFF", fill) else "#FFFFFF"


# the text panel's lightest background under a token: the selected cycle's pale yellow highlight
# (workbench.panels.text.NOW_BACKGROUND, 40% over white)
TEXT_HIGHLIGHT = "#F9F4B3"


@lru_cache(maxsize=256)       # a handful of colours, asked once per token of every step's text
def ink(colour: str, background: str = TEXT_HIGHLIGHT, ratio: float = 4.5) -> str:
    """``colour`` darkened toward black until text in it reads on ``background`` (WCAG AA,
    ``ratio``): the hue of a source, dark enough for the letters of the text panel (the sky
    blue of the suffix index reads at 2.3:1 on white; its ink at 4.5:1).

    >>> ink("#0072B2")                   # prompt lookup's blue reads as it is
    '#0072B2'
    >>> contrast(ink("#56B4E9"), TEXT_HIGHLIGHT) >= 4.5
    True
    """
    rgb = [int(colour.lstrip("#")[k:k + 2], 16) for k in (0, 2, 4)]
    out = colour
    for step in range(21):
        out = "#" + "".join(f"{round(c * (1 - step / 20)):02X}" for c in rgb)
        if contrast(out, background) >= ratio:
            break
    return out


def source_symbol(source: str) -> str:
    return SOURCE_SYMBOLS.get(source, UNKNOWN_SYMBOL)


def source_label(source: str) -> str:
    return SOURCE_LABELS.get(source, source)


@dataclass(frozen=True)
class Style:
    """Figure styling knobs shared by every figure function. ``Style()`` is the default."""
    height: int = 420
    width: int | None = None          # None: fill the container
    font_size: int = 12
    font_family: str = "DejaVu Sans Mono, Menlo, Consolas, monospace"
    node_size: int = 16
    max_label_chars: int = 10         # token labels on tree nodes are cut to this many chars
    show_node_labels: bool = True
    template: str = "plotly_white"   # applied by the ``*_figure`` wrappers (not to raw specs)
    line_chars: int | None = None     # committed-text figure: characters per line (None: what the width holds)
    colours: dict = field(default_factory=lambda: dict(SOURCE_COLOURS))

    def colour(self, source: str) -> str:
        return self.colours.get(source, UNKNOWN_COLOUR)


DEFAULT_STYLE = Style()
