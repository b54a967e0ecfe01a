"""Gap moments: where in a request the lexical key failed, as a list one can jump from.

A *gap moment* is a run of consecutive output tokens with the same identifiability-gap label
other than ``lexical_hit`` (``gap_recovered``: the exact-match key missed, the hidden-state key
found the true next token; ``gap_missed``: both missed; ``absent``: the token's pair occurs
nowhere in the pool), with the cycle that shows it best (its first contested token's, see
:class:`GapMoment`), so a view can jump there.
The labels are the request's ``gap_labels`` (``python -m oilbird trace|replay ... --diagnose``:
one diagnosis of the output, the same for every method; or a live run's, against its session's
store); the cycle is this method's. A gap run
says how many of its tokens the drafter's own key reaches (``drafter_reach``), where the trace
records it.

:func:`gap_moments` builds the list once; the app (a dropdown) and the notebook stepper (a
select box) show :func:`moment_choices`, and :func:`clearest_moment` picks the one a class
should see first. Knows the trace only: nothing here reads the model, the store or a widget.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from oilbird.trace import LEXICAL_SOURCES, CycleTrace, RequestTrace, lexical_sources

from ..palette import GAP_DESCRIPTIONS, GAP_KINDS
from .base import visible
from .gap import asked_positions, drafter_marks, no_labels_why
from .provenance import token_cycles

MOMENT_LABELS = ("gap_recovered", "gap_missed", "absent")
SHOWN = MOMENT_LABELS        # what a menu lists by default


@dataclass(frozen=True)
class GapMoment:
    label: str           # one of MOMENT_LABELS
    start: int           # first output token of the run
    end: int             # one past its last token
    text: str            # the run's tokens, whitespace made visible
    cycle: int | None    # index into request.cycles of the cycle that shows the run best: the one that
                         # committed its first contested token, else its first token the semantic
                         # source alone delivered, else token ``start``
    semantic: int        # tokens of the run the semantic source alone delivered in this trace
    contested: int = 0   # of those, tokens where a lexical source proposed a different token at the
                         # same place of the tree: the exact-match key wrong, the hidden-state key right
    rivals: int = 0      # the most distinct wrong tokens the lexical sources offered at one contested
                         # place: how ambiguous the exact-match key was where the state chose right
    drafter: int | None = None   # at a gap run: its tokens the drafter's key reaches (drafter_reach; None: unknown)
    drafted: int = 0             # ... of its tokens whose drafter_reach the trace records
    lexical: int = 0     # tokens of the run an exact-match source delivered in this trace: the labels'
                         # pool is earlier outputs only, and the drafters also copy the prompt and this output
    exact_only: int = 0  # ... of those, tokens no other source (the semantic key) delivered too
    unasked: int = 0     # of the tokens the drafter's key reaches, those no cycle's lookup was keyed for
                         # (gap.asked_positions): their mark says what a lookup there would have found

    @property
    def key(self) -> str:
        """A stable value for a menu: the first token's position."""
        return str(self.start)

    def describe(self) -> str:
        where = f"token {self.start}" if self.end - self.start == 1 else f"tokens {self.start}-{self.end - 1}"
        text = self.text if len(self.text) <= 24 else self.text[:23] + "…"
        at = f"cycle {self.cycle}" if self.cycle is not None else "no cycle"
        reach = "" if self.drafter is None else f" · drafter's key reaches {self.drafter} of {self.drafted}" + (
            f" ({self.unasked} where no cycle asked)" if self.unasked else "")
        # a run this method's exact-match source delivered (it copies the prompt and this output too, not
        # only the labels' pool): say so, so the menu does not contradict the tree
        if self.label != "gap_recovered":
            how = [f"{self.lexical} delivered anyway by exact match"] if self.lexical else []
        else:           # the key's reach: which tokens exact match alone delivered, which it shared with the key
            shared = self.lexical - self.exact_only
            how = ([f"{self.exact_only} delivered by exact match alone"] if self.exact_only else []) + \
                  ([f"{shared} by exact match and the key"] if shared else [])
        # (why exact match delivers what the labels call a gap, its copying the prompt and this output,
        # is the gap strip's pool line; on every line of the menu it ran past what a projector shows)
        got = f" · {', '.join(how)}" if how else ""
        # the cycle it jumps to first: a narrow menu (a projector's) cuts the end of the line
        return f"{at} · {where} · {text!r} · {GAP_DESCRIPTIONS.get(self.label, self.label)}{reach}{got}"


def gap_moments(request: RequestTrace | None, labels: tuple[str, ...] = MOMENT_LABELS) -> list[GapMoment]:
    """The request's gap moments of the given kinds, in output order, from the second output
    token on (the first is the prefill's); [] without a trace, without gap labels, or with
    labels that do not match the output's length."""
    if request is None:
        return []
    lab = request.gap_labels
    n = len(request.output_ids)
    if lab is None or len(lab) != n:
        return []
    where = token_cycles(request)
    sources = [s for c in request.cycles for s in c.committed_sources]
    starts = list(accumulate((len(c.committed) for c in request.cycles), initial=0))   # each cycle's first token
    offset = [p - starts[k] for p, k in enumerate(where)]
    marks = drafter_marks(request)
    asked = asked_positions(request)
    lex = lexical_sources(request)       # the exact-match sources of the drafter that wrote it
    out: list[GapMoment] = []
    k = 1             # not the first token: the prefill gives it, no drafter drafts it (no tree shows it)
    while k < n:
        j = k
        while j < n and lab[j] == lab[k]:
            j += 1
        if lab[k] in labels:
            text = "".join(visible(request.output_text[i]) for i in range(k, j) if i < len(request.output_text))
            sem = [i for i in range(k, j) if i < len(sources) and sources[i] == ["semantic"]]
            rivals = {i: len(lexical_rivals(request.cycles[where[i]], offset[i], lex)) for i in sem}
            won = [i for i in sem if rivals[i]]
            shown = (won or sem or [k])[0]
            drafted = [x for x in marks[k:j] if x is not None] if marks is not None else []
            unasked = sum(1 for i in range(k, j) if marks is not None and marks[i] and asked is not None
                          and i not in asked)
            lexical = [set(sources[i]) for i in range(k, j) if i < len(sources) and lex & set(sources[i])]
            out.append(GapMoment(lab[k], k, j, text, where[shown] if shown < len(where) else None, len(sem),
                                 len(won), max(rivals.values(), default=0), sum(drafted) if drafted else None,
                                 len(drafted), len(lexical), sum(s <= lex for s in lexical), unasked))
        k = j
    return out


def lexical_rivals(c: CycleTrace, j: int, lexical: frozenset[str] = LEXICAL_SOURCES) -> set[int]:
    """The tokens other than the one committed ``j``-th in cycle ``c`` that a lexical source
    (``lexical``: the exact-match keys, :func:`oilbird.trace.lexical_sources` of its trace)
    proposed at the same place of the tree (siblings of the accepted node); empty for the bonus
    token (it was not drafted)."""
    if j + 1 >= len(c.accepted):
        return set()
    node, parent = c.accepted[j + 1], c.accepted[j]
    return {c.tokens[n] for n in range(1, len(c.tokens)) if c.parents[n] == parent and n != node
            and c.tokens[n] != c.tokens[node] and any(src in lexical for src in c.sources[n])}


def moment_choices(request: RequestTrace | None, labels: tuple[str, ...] = SHOWN) -> list[tuple[str, str]]:
    """(label, value) pairs for a menu of the moments of ``request`` that have a cycle."""
    if request is None:
        return []
    return [(m.describe(), m.key) for m in gap_moments(request, labels) if m.cycle is not None]


def moment_at(request: RequestTrace | None, cycle: int) -> str | None:
    """The menu value (:func:`moment_choices`) of the moment that shows the gap best
    (:func:`clarity`) among those that jump to ``cycle`` (one cycle can show several), or None:
    a menu follows the cycle on screen, so picking a moment again after stepping away (to any
    other cycle, one its run spans included) jumps back to it."""
    here = [m for m in gap_moments(request, SHOWN) if m.cycle == cycle]
    return max(here, key=clarity).key if here else None


def clarity(m: GapMoment) -> tuple:
    """How well a moment shows the gap (higher first): a recovery over a miss over an absence,
    then contested tokens, how many wrong tokens the exact-match key offered at one of them (the
    ambiguity the state resolved), tokens the semantic source alone delivered, the share of the
    run they are (a run the lexical sources mostly delivered shows their success, not the gap),
    the earlier start."""
    n = max(1, m.end - m.start)
    return (m.label == "gap_recovered", m.label == "gap_missed", m.contested, m.rivals, m.semantic,
            m.semantic / n, -m.start)


def moment_of(request: RequestTrace | None, key: str | int | None) -> GapMoment | None:
    """The moment whose menu value (:attr:`GapMoment.key`) is ``key``; None if unknown."""
    if request is None or key is None:
        return None
    return next((m for m in gap_moments(request) if m.key == str(key)), None)


def moment_kept(request: RequestTrace | None, shown: str | None, cycle: int, same: bool) -> str | None:
    """The moment a menu shows on cycle index ``cycle`` of ``request``, the app's and the
    notebooks' one rule: the one shown so far (``shown``: picked, or the cycle's own) while it
    belongs to this same request (``same``) and its cycle is on screen (two moments may share a
    cycle), else the cycle's own (:func:`moment_at`), else None."""
    if request is None:
        return None
    if same and shown is not None and moment_cycle(request, shown) == cycle:
        return shown
    return moment_at(request, cycle)


def moment_cycle(request: RequestTrace | None, key: str | int | None) -> int | None:
    """The cycle index a moment's menu value (:attr:`GapMoment.key`) jumps to; None if unknown."""
    m = moment_of(request, key)
    return m.cycle if m is not None else None


def moment_span(request: RequestTrace | None, key: str | int | None) -> tuple[int, int] | None:
    """The output tokens ``[start, end)`` of the moment whose menu value is ``key`` (the strips
    mark them: a run may span cycles, and the cycle shown frames only its own); None if unknown."""
    m = moment_of(request, key)
    return (m.start, m.end) if m is not None else None


def clearest_moment(request: RequestTrace) -> GapMoment | None:
    """The moment that shows the gap best in this trace (:func:`clarity`): a ``gap_recovered``
    run where the exact-match key proposed a wrong token and the semantic source alone the right
    one (most such tokens, then most wrong tokens offered at one), then most tokens the semantic
    source alone delivered and the largest share of the run, then the earliest; else the
    ``gap_missed`` one first in the same order."""
    ms = [m for m in gap_moments(request, GAP_KINDS) if m.cycle is not None]
    return max(ms, key=clarity) if ms else None


def moment_summary(request: RequestTrace | None) -> str:
    """One line over the list: how many moments of each kind (or why there are none)."""
    if request is None:
        return "no trace selected"
    if request.gap_labels is None:
        return no_labels_why(request)          # it begins "no gap labels", as this line would
    ms = gap_moments(request)
    count = {lab: sum(m.label == lab for m in ms) for lab in MOMENT_LABELS}
    return (f"moments (runs of tokens after the first, which the prefill gives): {count['gap_recovered']} "
            f"within the semantic key's reach · {count['gap_missed']} missed by exact match and by the key at "
            f"the token's own state · "
            f"{count['absent']} absent from the pool")
