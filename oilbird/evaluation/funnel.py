"""The conversion funnel: where the semantic key's reach is lost, stage by stage, from traces.

    python -m oilbird.evaluation.report runs/replay-.../traces.jsonl     # prints it
    python -m oilbird replay --data agent-transcripts --limit 10 --methods goose,oilbird --traces --diagnose

Pure and torch-free: it reads :class:`oilbird.trace.RequestTrace` records (and, where a trace
carries them, the per-position gap labels of :mod:`oilbird.evaluation.diagnose`), nothing else.

**The unit is a drafting cycle**: the position right after the cycle's root (output position
``t = cycle.generated_before``), where a tree is drafted and the true next token is
``output[t]``. A position inside an accepted run was decided by the cycle that drafted it, so
counting cycles counts every decision once. The prefill cycle drafts nothing and is left out.

**The stages** (:data:`STAGES`), each a subset of the one above it, for the semantic key:

1. ``cycles``: drafting cycles;
2. ``gate_open``: the key's gate was open (a lexical match or an adjacency row; the drafter's
   ``CycleTrace.retrieval`` is not ``gate-closed`` / ``no-source``);
3. ``looked_up``: it looked up (a query state and a non-empty store);
4. ``right_any``: one of the top-k records it found continues with the next token: the
   record's continuation before any cut (``Neighbour.proposed`` + ``Neighbour.withheld``),
   whatever its similarity;
5. ``right_floor``: ... a right one with the best similarity above the entry floor (else the
   lookup was dropped: ``why_no_node == "below-floor"``);
6. ``right_drafted``: ... not muted by self-calibration;
7. ``right_depth``: ... its copy depth let it propose the token (``proposed`` not cut to
   nothing);
8. ``right_node``: ... its chain got a tree node (not lost to the semantic budget);
9. ``right_accepted``: ... its token was accepted (a right first node always is: kept as a
   check);
10. ``semantic_own``: ... and no lexical source proposed that token (the key's own token).

Beside them: ``top1_right`` (the most similar record is right), ``tree_had`` (the tree held the
next token below the root, from any source: the cycle accepted a draft) and ``lexical_had``
(a lexical source, prompt lookup or suffix, proposed it). Where a trace carries gap labels,
``by_label`` splits the cycles by the label at ``t`` (``absent``: not in the pool;
``lexical_hit``; ``gap_recovered``: the lexical oracle misses and the diagnosis' key reaches
it; ``gap_missed``).

**Depth** (``tokens``): in the ``right_any`` cycles, the longest right prefix a found record
held (capped at the tree's draft nodes) against the tokens the cycle accepted; a cycle where
the prefix was longer is ``short``, and says why by its longest-right record: it got no node
(``no_node``), its copy depth cut the right run (``copy_depth``), or its chain got nodes, too
few (``budget``; the copy depth would have allowed more). ``short_tokens`` sums, per cause, the
tokens the right prefix held past what the cycle accepted.

What it does not know: records beyond the top-k (never looked up), and anything in a trace
written before ``withheld`` was recorded (then the record's continuation is what it proposed,
and a below-floor lookup left no records: those stages read low).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from ..trace import common_prefix, cycle_truth, lexical_sources, right_run

# outcomes of the semantic key that mean no lookup ran (oilbird.sources.base.RETRIEVAL_OUTCOMES)
NO_LOOKUP = ("gate-closed", "no-query", "empty-store")

STAGES = (
    ("cycles", "drafting cycles"),
    ("gate_open", "semantic gate open"),
    ("looked_up", "lookup ran (query, non-empty store)"),
    ("right_any", "a top-k record continues right (any similarity, before cuts)"),
    ("right_floor", "... and cleared the similarity floor"),
    ("right_drafted", "... and was not muted"),
    ("right_depth", "... and its copy depth kept the token"),
    ("right_node", "... and its chain got a node"),
    ("right_accepted", "... and the token was accepted"),
    ("semantic_own", "... and no lexical source had it"),
)
# each stage in plain words, for a class (the glossary under the app's and notebook 01's funnel,
# and its hover); LOST_HELP and SHORT_HELP say the same of the losses
STAGE_HELP = {
    "cycles": "the cycles after the prefill (cycle 0 reads the prompt and drafts nothing); some "
              "drafted no more than the root",
    "gate_open": "the key only asks where a lexical source matched the text just written, or where the "
                 "adjacency table (the verifier's own top guesses after each token, learned while decoding) "
                 "knows the token just written; elsewhere its gate stays shut (the paper's Fig. 2 (ii) runs the "
                 "key only where the lexical match is non-empty; the table, the host's other key in its (i), "
                 "counts as a match here)",
    "looked_up": "it had a state to ask with and a store with something in it",
    "right_any": "one of the past positions it found was followed by the token that came next here",
    "right_floor": "the best match was similar enough for the key to use its lookup at all (the entry floor)",
    "right_drafted": "the key was not muted (it mutes itself while its first guesses keep missing)",
    "right_depth": "the record was similar enough to be allowed to copy this far (its copy depth)",
    "right_node": "the tree had room for it (every source competes for the tree's few nodes)",
    "right_accepted": "the verifier accepted it (a first node with the right token always is)",
    "semantic_own": "no exact-match source had proposed it too: a token only the key delivered",
}
LOST_HELP = {
    "below-floor": "found, but the best match was under the entry floor, so the lookup was dropped",
    "muted": "found while the key was muted",
    "copy-depth": "its similarity allowed too short a copy to reach the token",
    "budget": "the tree's nodes went to other proposals",
}
SHORT_HELP = {
    "no_node": "the record with the longest right run got no node at all",
    "copy_depth": "its copy depth stopped it before its right run ended",
    "budget": "its chain got nodes, fewer than its right run",
}
SIDE = (
    ("top1_right", "the most similar record continues right"),
    ("tree_had", "the tree held the next token (any source)"),
    ("lexical_had", "a lexical source (pld, suffix) had it"),
)
LABELS = ("absent", "lexical_hit", "gap_recovered", "gap_missed")
# what ``by_label`` counts for each label's cycles
LABEL_COUNTS = ("cycles", "tree_had", "lexical_had", "right_any", "right_node", "semantic_own")
# how far a right record got, in stage order (its why_no_node, or the depth cut, or a node)
REACHED = ("below-floor", "muted", "copy-depth", "budget", "node")
SHORT = ("no_node", "copy_depth", "budget")


@dataclass
class CycleFacts:
    """What the funnel needs of one drafting cycle."""
    request_id: str
    t: int                      # output position of the next token
    label: str | None           # gap label at t, where the trace has labels
    retrieval: str | None       # the semantic key's outcome (None: not recorded)
    reached: str | None         # how far the best right record got (REACHED), None: none right
    top1_right: bool
    tree_had: bool
    lexical_had: bool
    right_accepted: bool        # a right record's node was accepted
    semantic_own: bool          # ... and no lexical source had the token
    accepted: int               # draft tokens the cycle accepted
    reach: int                  # longest right prefix of a found record (capped at the tree's draft nodes)
    short: str | None           # SHORT: why the cycle accepted less than ``reach``; None if not short


def _reached(nb, full: int, prop: int) -> str:
    why = nb.why_no_node
    if why in ("below-floor", "muted"):
        return why
    if prop == 0:
        return "copy-depth"
    if why == "budget" or not nb.walked_nodes:
        return "budget"
    return "node"


def cycle_facts(trace, labels: list[str] | None = None) -> list[CycleFacts]:
    """The :class:`CycleFacts` of every drafting cycle of one request trace, labelled by
    ``labels`` (one per output token) or else by the trace's own gap labels."""
    out = []
    output = trace.output_ids
    labels = labels if labels is not None else trace.gap_labels
    lexical = lexical_sources(trace)
    for c in trace.cycles:
        truth = cycle_truth(c, output)
        if not c.tokens or truth is None:
            continue                    # the prefill, or nothing left to draft
        t = c.generated_before
        nxt = truth[0]
        right_child = next((i for i in range(1, len(c.tokens)) if c.parents[i] == 0 and c.tokens[i] == nxt), None)
        srcs = set(c.sources[right_child]) if right_child is not None else set()
        lexical_had = bool(srcs & lexical)
        cap = max(0, len(c.tokens) - 1)
        best_stage, best_full, best_nb, best_prop = -1, 0, None, 0
        top1 = False
        acc = False
        ranked = sorted(c.neighbours, key=lambda nb: -nb.similarity)
        for k, nb in enumerate(ranked):
            full = right_run(nb, truth)
            if full == 0:
                continue
            top1 = top1 or k == 0
            prop = common_prefix(nb.proposed, truth)
            stage = REACHED.index(_reached(nb, full, prop))
            best_stage = max(best_stage, stage)
            acc = acc or (stage == len(REACHED) - 1 and nb.accepted > 0)
            if full > best_full or (full == best_full and stage > REACHED.index(_reached(best_nb, best_full, best_prop))):
                best_full, best_nb, best_prop = full, nb, prop
        accepted = max(0, len(c.accepted) - 1)
        reach = min(best_full, cap)
        short = None
        if best_nb is not None and reach > accepted:
            if not best_nb.walked_nodes:
                short = "no_node"
            elif best_prop < reach:
                short = "copy_depth"
            else:
                short = "budget"
        out.append(CycleFacts(
            request_id=trace.request_id, t=t, label=labels[t] if labels and t < len(labels) else None,
            # a trace older than the outcome's record: a cycle that lists records looked up
            retrieval=c.retrieval if c.retrieval is not None else ("retrieved" if c.neighbours else None),
            reached=REACHED[best_stage] if best_stage >= 0 else None,
            top1_right=top1, tree_had=accepted > 0, lexical_had=lexical_had,
            right_accepted=acc, semantic_own=acc and not lexical_had, accepted=accepted, reach=reach if best_nb is not None else 0, short=short))
    return out


def count(facts: Iterable[CycleFacts]) -> dict:
    """Stage counts of one method's cycles (the JSON diagnosis.json's ``funnel`` holds per method)."""
    st = Counter()
    lost = Counter()
    short = Counter()
    short_tokens = Counter()
    by_label: dict[str, Counter] = {}
    reach = accepted_right = 0
    retrieval = Counter()
    labelled = False
    for f in facts:
        st["cycles"] += 1
        retrieval[f.retrieval or "unrecorded"] += 1
        opened = f.retrieval not in (None, "no-source", "gate-closed")
        looked = f.retrieval not in (None, "no-source") + NO_LOOKUP
        r = REACHED.index(f.reached) if f.reached else -1
        flags = {"gate_open": opened, "looked_up": looked, "right_any": r >= 0,
                 "right_floor": r >= 1, "right_drafted": r >= 2, "right_depth": r >= 3,
                 "right_node": r >= 4, "right_accepted": f.right_accepted,
                 "semantic_own": f.semantic_own,
                 "top1_right": f.top1_right, "tree_had": f.tree_had, "lexical_had": f.lexical_had}
        for k, v in flags.items():
            st[k] += bool(v)
        if f.reached and f.reached != "node":
            lost[f.reached] += 1
        if r >= 0:
            reach += f.reach
            accepted_right += f.accepted
            if f.short:
                short[f.short] += 1
                short_tokens[f.short] += f.reach - f.accepted
        if f.label is not None:
            labelled = True
            b = by_label.setdefault(f.label, Counter())
            b["cycles"] += 1
            for k in LABEL_COUNTS[1:]:
                b[k] += bool(flags[k])
    out = {"stages": {k: st[k] for k, _ in STAGES}, "side": {k: st[k] for k, _ in SIDE},
           "lost": {k: lost[k] for k in REACHED[:-1]}, "retrieval": dict(retrieval),
           "tokens": {"cycles": st["right_any"], "reach": reach, "accepted": accepted_right,
                      "short": {k: short[k] for k in SHORT},
                      "short_tokens": {k: short_tokens[k] for k in SHORT}}}
    if labelled:
        out["by_label"] = {lab: {k: by_label.get(lab, Counter())[k] for k in LABEL_COUNTS} for lab in LABELS}
    return out


def drafts(trace) -> bool:
    """Does ``trace``'s method draft trees (``ar`` does not: its cycles are no drafting cycles)?
    A method name the registry does not know is taken to draft."""
    from ..methods import lookup
    m = lookup(trace.method)
    return m is None or m.drafts_tree


def funnel(traces) -> dict:
    """``{method: count(...)}`` over request traces (in the order their methods first appear),
    methods that draft no tree left out."""
    per: dict[str, list[CycleFacts]] = {}
    for tr in filter(drafts, traces):
        per.setdefault(tr.method, []).extend(cycle_facts(tr))
    return {m: count(fs) for m, fs in per.items()}


def labelled_funnel(traces, labels: dict[str, list[str]]) -> dict:
    """:func:`funnel` with the gap labels of a diagnosis (request id -> one label per output
    token of the greedy output): a trace gets them where its output is that long and not known
    to be lossy (a lossless trace's output is the greedy one); others count unlabelled."""
    per: dict[str, list[CycleFacts]] = {}
    for tr in filter(drafts, traces):
        lab = labels.get(tr.request_id)
        ok = tr.lossless is not False and lab is not None and len(lab) == len(tr.output_ids)
        per.setdefault(tr.method, []).extend(cycle_facts(tr, lab if ok else []))
    return {m: count(fs) for m, fs in per.items()}


class Accumulator:
    """The funnel kept as a run goes (a replay's ``on_request``), without keeping the traces:
    :meth:`add` each trace, :meth:`result` with the gap labels known by then (request id ->
    labels), which replace any the traces had."""

    def __init__(self):
        self.facts: dict[str, list[CycleFacts]] = {}

    def add(self, traces) -> None:
        for tr in filter(drafts, traces):
            self.facts.setdefault(tr.method, []).extend(cycle_facts(tr))

    def result(self, labels: dict[str, list[str]] | None = None) -> dict:
        out = {}
        for m, fs in self.facts.items():
            if labels is not None:
                fs = [_relabel(f, labels) for f in fs]
            out[m] = count(fs)
        return out


def _relabel(f: CycleFacts, labels: dict) -> CycleFacts:
    lab = labels.get(f.request_id)
    f.label = lab[f.t] if lab and f.t < len(lab) else None
    return f


# ------------------------------------------------------------------------------------ the table
def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "-"


def format_funnel(fun: dict) -> str:
    """One Markdown table, a column per method: each stage's cycles and their share of the
    drafting cycles (and, in brackets, of the stage above), then the side rows, the losses, the
    depth block and, with labels, the split by gap label."""
    methods = list(fun)
    if not methods:
        return "(no drafting cycles)"
    head = "| stage | " + " | ".join(methods) + " |"
    rows = [head, "| --- |" + " ---: |" * len(methods)]
    for i, (k, name) in enumerate(STAGES):
        cells = []
        for m in methods:
            s = fun[m]["stages"]
            n, tot = s[k], s["cycles"]
            prev = s[STAGES[i - 1][0]] if i else tot
            cells.append(f"{n}" if i == 0 else f"{n} ({_pct(n, tot)}; {_pct(n, prev)} of above)")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    for k, name in SIDE:
        rows.append(f"| {name} | " + " | ".join(
            f"{fun[m]['side'][k]} ({_pct(fun[m]['side'][k], fun[m]['stages']['cycles'])})" for m in methods) + " |")
    for k in REACHED[:-1]:
        rows.append(f"| right record lost at: {k} | " + " | ".join(
            f"{fun[m]['lost'].get(k, 0)} ({_pct(fun[m]['lost'].get(k, 0), fun[m]['stages']['right_any'])} of right)"
            for m in methods) + " |")
    rows.append("| right cycles: right-prefix tokens / accepted tokens | " + " | ".join(
        f"{fun[m]['tokens']['reach']} / {fun[m]['tokens']['accepted']}" for m in methods) + " |")
    for k in SHORT:
        def cell(m):
            tok = fun[m]["tokens"]
            n = tok["short"].get(k, 0)
            lost = tok.get("short_tokens", {}).get(k)
            return f"{n} ({_pct(n, tok['cycles'])} of right)" + (f", {lost} tokens" if lost is not None else "")
        rows.append(f"| short of the right prefix, by: {k.replace('_', ' ')} | " + " | ".join(map(cell, methods)) + " |")
    if any("by_label" in fun[m] for m in methods):
        for lab in LABELS:
            cells = []
            for m in methods:
                b = fun[m].get("by_label", {}).get(lab, {})
                n = b.get("cycles", 0)
                cells.append(f"{n}: tree {_pct(b.get('tree_had', 0), n)}, right {_pct(b.get('right_any', 0), n)}, "
                             f"node {_pct(b.get('right_node', 0), n)}, own {_pct(b.get('semantic_own', 0), n)}")
            rows.append(f"| at {lab} positions | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def funnel_lines(fun: dict) -> list[str]:
    """What the replay command and ``report`` print: a heading and :func:`format_funnel`."""
    return ["conversion funnel (drafting cycles; oilbird/evaluation/funnel.py says what each stage counts):",
            format_funnel(fun)]
