"""What the notebooks share besides the figures: the lesson's pickers, tables and one live run.

The classroom notebook (``notebooks/01_identifiability_gap.ipynb``) tells the story of the
paper's Figure 1 on real traces, and these functions find the cycles it shows:

* :func:`exact_match_cycle` — the prompt-lookup source run on a request whose call frame
  recurs with a new value; the gold call plays the verifier. Returns a
  :class:`~oilbird.trace.CycleTrace`, so :func:`workbench.figures.tree_figure` draws it.
* :func:`backoff_keys` — every shorter exact-match key one cycle later, once the new value's first
  token is committed: where it occurs before, and how much of what followed there is right.
* :func:`discarded_frames` — cycles of a real trace where a lexical chain's first wrong token
  threw away correct tokens behind it (the frame that resumes after the value).
* :func:`semantic_finds` — neighbours the semantic key retrieved whose chain the verifier
  accepted although no lexical source proposed their first token.
* :func:`pick_story` — one of each, at the same output position when the traces allow.

Everything above reads trace records (and, for the first, token lists) only. The one function
that touches the model is :func:`decode_live`, which decodes requests with named presets and
attaches the diagnosis labels of :mod:`oilbird.evaluation.diagnose`; it imports the runtime lazily.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import plotly.graph_objects as go

from oilbird.trace import (BONUS, CycleTrace, Neighbour, RequestTrace, common_prefix,  # noqa: F401
                           lexical_sources, lexically_reachable)  # (L.common_prefix: the notebooks')

from .palette import (DEFAULT_STYLE, GAP_COLOURS, GAP_DESCRIPTIONS, GAP_LABELS,
                      GAP_PATTERNS, Style, shown_sources, source_label)
from .panels.provenance import token_cycles
from .session import LIVE_BUDGET, live_decoder


# --------------------------------------------------------------------------- the situation


def exact_match_cycle(prompt_ids: list[int], answer_ids: list[int], at: int,
                      decode: Callable[[int], str], request_id: str = "request",
                      num_tokens: int = 12) -> CycleTrace:
    """One drafting cycle of the prompt-lookup source, verified against a known answer.

    The context is ``prompt_ids + answer_ids[:at]`` (so the tree root is ``answer_ids[at-1]``,
    or the prompt's last token when ``at == 0``). :class:`oilbird.sources.prompt_lookup.
    PromptLookupSource` proposes its best chain; the "verifier" wants ``answer_ids[at + d]`` at
    depth ``d`` (its argmax at node d), and :func:`oilbird.tree.greedy_accept` commits. With
    ``at`` at the first token of a new value whose frame recurs in the prompt, the chain starts
    with the old value: rejected at depth 1, and the correct frame behind it goes too.

    ``decode`` maps one token id to its text. Raises ValueError if the source proposes nothing.
    """
    from oilbird.sources.base import DraftContext
    from oilbird.decoding import recorded_targets
    from oilbird.sources.prompt_lookup import PromptLookupConfig, PromptLookupSource
    from oilbird.tree import DraftTree, greedy_accept

    if not 0 <= at < len(answer_ids):
        raise ValueError(f"at={at} is outside the answer: a cycle needs a next token to verify "
                         f"(0..{len(answer_ids) - 1})")
    context = list(prompt_ids) + list(answer_ids[:at])
    src = PromptLookupSource(PromptLookupConfig(num_tokens=num_tokens, max_chains=1))
    src.start_request(list(prompt_ids), request_id)
    proposal = src.propose(DraftContext(tokens=context, request_id=request_id), num_tokens)
    if not proposal.chains:
        raise ValueError("prompt lookup proposes nothing here: the context's suffix does not recur")
    chain = proposal.chains[0]
    tokens = [context[-1]] + list(chain.tokens)
    n = len(tokens)
    parents = [-1] + list(range(n - 1))
    # node d stands at answer position at - 1 + d, so its argmax is the answer's next token (-1 past it)
    argmax = recorded_targets(DraftTree(tokens, parents), list(answer_ids), at)
    accepted, bonus = greedy_accept(tokens, parents, argmax)
    # where the chain reached the answer's end there is no next token: nothing after the drafts
    bonus_kept = [bonus] if bonus >= 0 else []
    committed = [tokens[i] for i in accepted[1:]] + bonus_kept
    return CycleTrace(
        request_id=request_id, method="pld, gold call as verifier", cycle=1,
        prefix_len=len(context) - 1, generated_before=at,
        tokens=tokens, token_text=[decode(t) for t in tokens], parents=parents,
        depths=list(range(n)), sources=[[]] + [["pld"] for _ in range(n - 1)],
        scores=[{}] + [{"pld": round(float(chain.score), 3)} for _ in range(n - 1)],
        argmax=argmax, argmax_text=[decode(t) if t >= 0 else "" for t in argmax],
        accepted=accepted, bonus=bonus, committed=committed,
        committed_text=[decode(t) for t in committed],
        committed_sources=[["pld"] for _ in accepted[1:]] + [[BONUS] for _ in bonus_kept],
        lexical_match_len=int(proposal.match_len))


def discarded_behind(cycle: CycleTrace, answer_ids: Sequence[int], window: int = 4) -> list[int]:
    """The tokens of ``cycle``'s longest rejected chain that the answer holds just behind the
    rejection (see :func:`discarded_frames`); node indices into ``cycle.tokens``."""
    found = _best_discard(cycle, answer_ids, sources=None, window=window)
    return found[2] if found else []


@dataclass
class KeyMatch:
    """One exact-match key of :func:`backoff_keys`: its last ``length`` tokens, how often they occur
    before, and what followed the most recent occurrence."""
    length: int
    key: str
    occurrences: int
    follows: str             # the text after the most recent occurrence ("" if none)
    right: int               # how many tokens of it, from the first, are the answer's next ones


def backoff_keys(prompt_ids: Sequence[int], answer_ids: Sequence[int], at: int, decode: Callable[[int], str],
                 longest: int = 4, shown: int = 4) -> list[KeyMatch]:
    """The exact-match keys one cycle after the verifier committed the new value's first token.

    The context is ``prompt_ids + answer_ids[:at + 1]``; for every key length 1..``longest`` the key
    is its last that many tokens, looked up in the text before it. ``right`` counts how many of the
    ``shown`` tokens after the key's most recent occurrence match ``answer_ids[at + 1:]``, from the
    first: where the new value has never stood after this frame, a long key occurs nowhere, and a
    short one occurs elsewhere, where what follows parts from the answer soon, if not at once."""
    if not 0 <= at < len(answer_ids) - 1:
        raise ValueError(f"at={at} leaves no next answer token (0..{len(answer_ids) - 2})")
    context = list(prompt_ids) + list(answer_ids[:at + 1])
    want, rows = list(answer_ids[at + 1:at + 1 + shown]), []
    for n in range(1, min(longest, len(context) - 1) + 1):
        key = context[-n:]
        ends = [j for j in range(n - 1, len(context) - 1) if context[j - n + 1:j + 1] == key]
        after = context[ends[-1] + 1:ends[-1] + 1 + shown] if ends else []
        rows.append(KeyMatch(n, "".join(map(decode, key)), len(ends), "".join(map(decode, after)),
                             common_prefix(after, want)))
    return rows


# --------------------------------------------------------------------------- pickers over traces

def chain_paths(cycle: CycleTrace) -> list[list[int]]:
    """Every root-to-leaf path of the cycle's draft tree, as node indices (children in index
    order, so the spine comes first). The prefill cycle (no tree) has none.

    >>> c = CycleTrace("r", "m", 1, 0, 1, tokens=[5, 6, 7, 8], parents=[-1, 0, 1, 0])
    >>> chain_paths(c)
    [[0, 1, 2], [0, 3]]
    """
    n = len(cycle.tokens)
    if not n:
        return []
    kids: dict[int, list[int]] = {}
    for i in range(1, n):
        kids.setdefault(cycle.parents[i], []).append(i)
    out, stack = [], [[0]]
    while stack:
        path = stack.pop()
        ch = kids.get(path[-1], [])
        if not ch:
            out.append(path)
        stack.extend(path + [c] for c in reversed(ch))
    return out


@dataclass
class Discarded:
    """A lexical chain rejected at its first wrong token, with correct tokens behind it."""
    request_id: str
    method: str
    cycle: int                 # index into request.cycles
    position: int              # output index of the wrong token
    node: int                  # the first wrong node
    drafted: str               # its token
    wanted: str                # what the verifier wanted there (the bonus of that cycle)
    behind: list[int] = field(default_factory=list)   # nodes behind it that the output holds next
    behind_text: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # sources of the wrong node

    @property
    def n_behind(self) -> int:
        return len(self.behind)


def _run(a: Sequence[int], b: Sequence[int]) -> int:
    return common_prefix(a, b)


def _best_discard(cycle: CycleTrace, answer: Sequence[int], sources, window: int):
    """(path, wrong node, behind nodes) of the chain with the most correct tokens behind its
    first wrong one; None if no chain of ``sources`` is rejected with >= 1 correct token behind.

    Node d of a tree stands at output index ``generated_before - 1 + d``. The wrong node sits at
    depth a + 1 (a = accepted drafts). Its value may be longer or shorter than the right one, so
    the chain's tokens behind it may skip up to ``window`` tokens (the rest of the old value)
    and the output's may start up to ``window`` tokens later (the rest of the new one).
    """
    if not cycle.tokens:
        return None
    acc = list(cycle.accepted)
    a = len(acc) - 1
    wrong_at = cycle.generated_before + a           # output index of the rejected position
    best = None
    for path in chain_paths(cycle):
        if path[:a + 1] != acc or len(path) <= a + 2:
            continue
        wrong = path[a + 1]
        if sources is not None and not set(cycle.sources[wrong]) & set(sources):
            continue
        behind = path[a + 2:]
        toks = [cycle.tokens[i] for i in behind]
        top = (0, 0)
        for skip in range(min(window, len(toks))):
            for s in range(wrong_at + 1, wrong_at + 2 + window):
                m = _run(toks[skip:], answer[s:])
                if m > top[0]:
                    top = (m, skip)
        if top[0] and (best is None or top[0] > len(best[2])):
            best = (path, wrong, behind[top[1]:top[1] + top[0]])
    return best


def discarded_frames(request: RequestTrace, sources: Iterable[str] | None = None, window: int = 4,
                     min_behind: int = 2) -> list[Discarded]:
    """Cycles where a chain of ``sources`` (by default the trace's exact-match sources,
    :func:`oilbird.trace.lexical_sources`) was rejected at one token although at least
    ``min_behind`` tokens behind it were right: what the verifier's commit-the-prefix rule threw
    away (paper section 3, Figure 1). Most tokens behind first.

    "Right" means the request's output (the greedy output, for a lossless trace) holds them
    just after the rejected position; see :func:`_best_discard` for the alignment.
    """
    out = []
    srcs = tuple(sorted(lexical_sources(request) if sources is None else sources))
    for k, c in enumerate(request.cycles):
        found = _best_discard(c, request.output_ids, srcs, window)
        if not found or len(found[2]) < min_behind:
            continue
        _, wrong, behind = found
        a = len(c.accepted) - 1
        at = c.generated_before + a
        # what this cycle committed there, its bonus (the verifier's choice; in a replay, the
        # recording's: the local model's argmax would be the wrong "wanted")
        wanted = (c.committed_text[a] if a < len(c.committed_text) else
                  c.argmax_text[c.accepted[-1]] if c.argmax_text else "?")
        out.append(Discarded(
            request.request_id, request.method, k, at, wrong,
            c.token_text[wrong] if wrong < len(c.token_text) else "?", wanted,
            behind, [c.token_text[i] for i in behind if i < len(c.token_text)], sorted(c.sources[wrong])))
    return sorted(out, key=lambda d: (-d.n_behind, d.cycle))


@dataclass
class Find:
    """A neighbour whose chain was accepted although no lexical source proposed its start."""
    request_id: str
    method: str
    cycle: int          # index into request.cycles
    neighbour: int      # index into that cycle's neighbours
    position: int       # output index of the cycle's first new token
    item: Neighbour


def semantic_finds(request: RequestTrace, only_unreachable: bool = True) -> list[Find]:
    """Neighbours with at least one accepted node on their chain, most accepted first; with
    ``only_unreachable`` only those whose first proposed token no lexical source proposed
    (:func:`oilbird.trace.lexically_reachable` false): what the lexical key could not propose
    (another non-lexical source, token recycling or the rejected-branch pool, may still have)."""
    out = []
    lexical = lexical_sources(request)
    for k, c in enumerate(request.cycles):
        for j, nb in enumerate(c.neighbours):
            if nb.accepted > 0 and nb.proposed and not (only_unreachable and lexically_reachable(c, nb, lexical)):
                out.append(Find(request.request_id, request.method, k, j, c.generated_before, nb))
    return sorted(out, key=_find_rank)


def _find_rank(f: Find) -> tuple:
    """Best find first: the most accepted nodes, then the most similar neighbour."""
    return -f.item.accepted, -f.item.similarity, f.request_id, f.cycle


def best_find(traces: Iterable[RequestTrace], semantic: str = "oilbird") -> Find | None:
    """The ``semantic`` traces' find (:func:`semantic_finds`) with the most accepted nodes
    (then the most similar neighbour), or None."""
    return min((f for t in traces if t.method == semantic for f in semantic_finds(t)), key=_find_rank, default=None)


@dataclass
class Story:
    """What the lesson shows from real traces; None where the traces hold no example."""
    discarded: Discarded | None
    find: Find | None
    same_place: bool          # both at the same request and output position
    note: str                 # one sentence saying what was found


def pick_story(traces: Iterable[RequestTrace], lexical: str = "goose", semantic: str = "oilbird") -> Story:
    """A discarded frame in a ``lexical`` trace and a semantic find in a ``semantic`` trace,
    at the same request and output position when some pair is (the Figure 1 situation seen
    through both methods), else the best of each."""
    traces = list(traces)
    lex = {t.request_id: t for t in traces if t.method == lexical}
    sem = {t.request_id: t for t in traces if t.method == semantic}
    frames = [d for t in lex.values() for d in discarded_frames(t)]
    finds = [f for t in sem.values() for f in semantic_finds(t)]
    frames.sort(key=lambda d: -d.n_behind)
    committed_by = {rid: token_cycles(t) for rid, t in sem.items()}     # output position -> cycle index
    for d in frames:
        where = committed_by.get(d.request_id, [])
        for f in finds:
            if f.request_id == d.request_id and d.position < len(where) and where[d.position] == f.cycle:
                return Story(d, f, True, f"request {d.request_id}, output token {d.position}: the lexical "
                                         f"chain of {lexical} is rejected there, and {semantic}'s semantic "
                                         "key finds a chain the lexical key could not propose.")
    d = frames[0] if frames else None
    f = min(finds, key=_find_rank, default=None)       # best_find over the finds listed above
    bits = []
    bits.append(f"{lexical}: a lexical chain rejected with {d.n_behind} correct tokens behind it in "
                f"{d.request_id}" if d else f"{lexical}: no rejected lexical chain with a correct frame behind it")
    bits.append(f"{semantic}: a semantic find in {f.request_id}" if f else
                f"{semantic}: no accepted neighbour the lexical key could not propose")
    return Story(d, f, False, "; ".join(bits) + " (not at the same position).")


# --------------------------------------------------------------------------- which data

def api_bank_candidates(root: Path) -> list[Path]:
    """Where API-Bank may be, in order: ``$OILBIRD_DATA/api-bank``, then
    ``../shared/data/api-bank`` beside the checkout at ``root`` (never inside it)."""
    out = []
    if os.environ.get("OILBIRD_DATA"):
        out.append(Path(os.environ["OILBIRD_DATA"]) / "api-bank")
    out.append(Path(root).parent / "shared" / "data" / "api-bank")
    return out


def resolve_data(data: str | os.PathLike | None, root: Path) -> tuple[str | Path, str]:
    """What to pass to :func:`oilbird.data.requests.load_requests`, and a sentence saying what it is.

    ``None`` or ``"api-bank"``: API-Bank from the first of :func:`api_bank_candidates` that
    holds it, else the built-in workload (the sentence says it fell back, and where it looked).
    ``"builtin"`` or another named set: itself. Anything else is a path (relative to ``root``
    unless absolute) to an API-Bank folder or a JSONL file; a missing path raises
    FileNotFoundError rather than silently falling back.
    """
    from oilbird.data.requests import NAMED_SETS, api_bank_available
    if data is None or str(data) == "api-bank":
        for p in api_bank_candidates(root):
            if api_bank_available(p):
                return p, f"API-Bank (level-1 and level-2 API calls) from {_shown(p, root)}"
        looked = " and ".join(_shown(p, root) for p in api_bank_candidates(root))
        return "builtin", (f"API-Bank not found (looked in {looked}): falling back to the built-in "
                           "tool-calling workload (oilbird.data.workload)")
    if str(data) in NAMED_SETS:
        what = "the built-in tool-calling workload (oilbird.data.workload)" if str(data) == "builtin" else str(data)
        return str(data), what
    p = Path(data)
    p = p if p.is_absolute() else Path(root) / p
    if not p.exists():
        raise FileNotFoundError(f"data '{data}' not found (looked at {_shown(p, root)})")
    return p, f"{'the API-Bank folder' if p.is_dir() else 'the requests file'} {_shown(p, root)}"


def _shown(p: Path, root: Path) -> str:
    """A path as the notebooks print it: relative to the checkout when it lies in it or beside it
    (``../shared/data/...``), under ``$OILBIRD_DATA`` when it lies there, else as given."""
    env = os.environ.get("OILBIRD_DATA")
    tries = [(Path(env).expanduser(), "$OILBIRD_DATA")] if env else []
    for base, name in tries + [(root, None), (root.parent, "..")]:
        try:
            rel = Path(os.path.abspath(p)).relative_to(os.path.abspath(base))
        except ValueError:
            continue
        return str(rel) if name is None else f"{name}/{rel}"
    return str(p)


# --------------------------------------------------------------------------- diagnosis tables

def diagnosis_rows(summary: dict, full: dict | None = None) -> list[dict]:
    """The diagnosis table of :func:`oilbird.evaluation.diagnose.format_gap_table` as rows of dicts
    (``measure``, ``ours``, optionally ``full pool``, ``paper (API-Bank)``), values formatted."""
    from oilbird.evaluation.diagnose import PAPER_API_BANK, ROWS

    def fmt(v, kind):
        if v is None:
            return "-"
        return f"{100 * v:.1f}%" if kind == "%" else f"{v:.1f}"
    rows = []
    for key, name, kind in ROWS:
        row = {"measure": name, "ours": fmt(summary.get(key), kind)}
        if full is not None:
            row["full pool"] = fmt(full.get(key), kind)
        row["paper (API-Bank)"] = fmt(PAPER_API_BANK.get(key), kind)
        rows.append(row)
    return rows


RUN_KEYS = ("data", "skip", "n_requests", "max_new_tokens")


def run_differences(results: dict, diagnosis: dict) -> list[str]:
    """How a bench ``results`` dict and a ``diagnosis`` describe different requests or lengths
    (``"skip 40 vs 0"``, ...; empty when they match). The request count alone does not say
    which requests: ``--skip`` and ``--data`` do. A missing skip is 0 (files written before
    ``--skip`` existed).

    >>> run_differences({"data": "api-bank", "skip": 40, "n_requests": 40},
    ...                 {"data": "api-bank", "n_requests": 40})
    ['skip 40 vs 0']
    """
    out = []
    for k in RUN_KEYS:
        a, b = results.get(k), diagnosis.get(k)
        if k == "skip":
            a, b = a or 0, b or 0
        if a != b:
            out.append(f"{k} {a} vs {b}")
    return out


def method_label(method: str, budget: int | None) -> str:
    """A method's name with the draft size it ran at: the tree budget, except ``hf-pld``
    (Hugging Face prompt lookup drafts one chain of a fixed length, no tree)."""
    if method == "hf-pld":
        from oilbird.evaluation.peers import HF_PLD_NUM_TOKENS
        return f"{method} (one chain of {HF_PLD_NUM_TOKENS} tokens, no tree)"
    return method if budget is None else f"{method} (budget {budget})"


def oracle_rows(diagnosis: dict, results: dict | None = None) -> list[dict]:
    """Measured tau beside the tau a perfect verbatim-copy drafter would reach on the same
    outputs (``copy_oracle_tau`` of diagnosis.json, by tree budget). Rows of dicts
    (``what``, ``tau``, ``note``). Methods of ``results`` are compared only when the two
    files describe the same requests and length (:func:`run_differences`); else each row's
    note says how they differ. Empty for a diagnosis.json without ``copy_oracle_tau``.
    """
    rows = [{"what": f"perfect verbatim-copy drafter, {b} nodes", "tau": f"{v:.2f}",
             "note": "upper bound for prompt lookup, suffix and semantic chains"}
            for b, v in (diagnosis.get("copy_oracle_tau") or {}).items() if v is not None]
    if not rows or results is None:
        return rows
    diff = run_differences(results, diagnosis)
    note = f"other requests or length than the diagnosis ({', '.join(diff)})" if diff else ""
    budget = (results.get("tree") or {}).get("budget")
    for m, r in results.get("methods", {}).items():
        if m in ("ar", "hf-greedy"):
            continue
        rows.append({"what": method_label(m, budget), "tau": f"{r['tau']:.2f}", "note": note})
    return rows


def label_counts(labels: dict[str, list[str]]) -> dict[str, dict[str, int]]:
    """``{request_id: {label: count}}`` over :data:`oilbird.evaluation.diagnose.LABELS` (zeros kept)."""
    from oilbird.evaluation.diagnose import LABELS
    return {rid: {lab: labs.count(lab) for lab in LABELS} for rid, labs in labels.items()}


def label_counts_figure(labels: dict[str, list[str]], style: Style | None = None) -> go.Figure:
    """Stacked bars, one per request: how many of its output tokens got each diagnosis label
    (colours and fill patterns of :mod:`workbench.palette`; every label in the legend)."""
    s = style or DEFAULT_STYLE
    counts = label_counts(labels)
    rids = list(counts)
    fig = go.Figure([go.Bar(x=rids or [None], y=[counts[r][lab] for r in rids] or [None],
                            name=GAP_DESCRIPTIONS[lab], marker_color=GAP_COLOURS[lab],
                            marker_pattern_shape=GAP_PATTERNS[lab], marker_line_color="#333333",
                            marker_line_width=0.5, meta=lab,
                            hovertemplate=f"%{{x}}: %{{y}} tokens {GAP_DESCRIPTIONS[lab]}<extra></extra>")
                     for lab in GAP_LABELS])
    fig.update_layout(barmode="stack", template=s.template, height=max(320, s.height - 60),
                      title="diagnosis labels per request (one per output token)",
                      xaxis_title="request", yaxis_title="output tokens",
                      font={"family": s.font_family, "size": s.font_size})
    return fig


def source_share_figure(results: dict, style: Style | None = None) -> go.Figure:
    """Stacked bars, one per traced method of a bench ``results`` dict: the share of its
    committed tokens each draft source delivered (``accepted_by_source``, split credit) and
    the verifier's bonus tokens; methods without cycle traces (``ar``) are left out."""
    s = style or DEFAULT_STYLE
    methods = {m: r for m, r in results["methods"].items() if r.get("accepted_by_source")}
    names = list(methods)
    data = []
    seen = {src for r in methods.values() for src in r["accepted_by_source"]}
    for src in shown_sources(seen):   # a peer's or unknown source too: no token left out
        ys = [methods[m]["accepted_by_source"].get(src, 0.0) / max(1, methods[m].get("tokens", 0))
              for m in names]
        data.append(go.Bar(x=names or [None], y=ys or [None], name=source_label(src), meta=src,
                           marker_color=s.colour(src),
                           hovertemplate=f"%{{x}}: %{{y:.1%}} of tokens from {src}<extra></extra>"))
    fig = go.Figure(data)
    fig.update_layout(barmode="stack", template=s.template, height=max(320, s.height - 60),
                      title="who delivered the committed tokens", yaxis_tickformat=".0%",
                      xaxis_title="method", yaxis_title="share of committed tokens",
                      font={"family": s.font_family, "size": s.font_size})
    return fig


# --------------------------------------------------------------------------- the live run

def greedy_outputs(traces: Iterable[RequestTrace], max_new_tokens: int, eos_ids: Iterable[int]
                   ) -> dict[str, list[int]]:
    """The greedy outputs the traces settle: :func:`oilbird.evaluation.labels.known_outputs`, the rule
    every label attachment uses (imported here lazily: it loads faiss)."""
    from oilbird.evaluation.labels import known_outputs
    return known_outputs(traces, max_new_tokens, eos_ids)


def decode_live(lm, requests, methods: Sequence[str], max_new_tokens: int, diagnose: bool = True,
                progress: bool = False, budget: int = LIVE_BUDGET) -> tuple[list[RequestTrace], dict | None]:
    """Decode ``requests`` in order with each preset in ``methods`` (one decoder, so one store,
    per method, as in serving) and return ``(traces, diagnosis)``. Trees of ``budget`` nodes
    (default: the app's live runs', :data:`workbench.session.LIVE_BUDGET`, the shipped traces'
    size, so what a notebook decodes compares with what it would have read).

    With ``diagnose``, every trace gets the ``gap_labels`` of its greedy output by the rule a
    trace file gets them (:func:`oilbird.evaluation.labels.label_traces`: on the outputs just decoded,
    one teacher-forced forward each); ``diagnosis`` is then the report of
    :func:`oilbird.evaluation.diagnose.build_report`, else None. Decoding is not audited here
    (``python -m oilbird bench`` audits every output against ``transformers``).
    """
    from oilbird.data.requests import encode
    from oilbird.verifier import Verifier

    verifier = Verifier(lm)
    decoders = {m: live_decoder(m, verifier, budget) for m in methods}
    traces: list[RequestTrace] = []
    for req in requests:
        ids = encode(lm.tokenizer, req)
        for m, dec in decoders.items():
            tr = dec.run(req.id, ids, max_new_tokens)
            tr.meta["live"] = True
            traces.append(tr)
    if not diagnose:
        return traces, None
    from oilbird.evaluation.diagnose import build_report
    from oilbird.evaluation.labels import label_traces
    res = label_traces(traces, requests, lm, max_new_tokens, progress=progress)
    report = build_report(res, {"data": "live", "model": lm.name, "max_new_tokens": max_new_tokens,
                                "limit": len(requests)})
    return traces, report


# --------------------------------------------------------------------------- recorded dialogues, replayed

def resolve_dialogues(root: Path) -> tuple[str | Path, str]:
    """What to replay when notebook 02 replays (its default): API-Bank's recorded dialogues
    (``api-bank/lv1-lv2-samples/level-1-given-desc`` in the first of :func:`api_bank_candidates`
    that holds them), else the built-in scripted agent's conversations (``"agent-builtin"``,
    generated here); and a sentence saying which (and, on the fallback, where it looked)."""
    from oilbird.data.api_bank_dialogues import DIALOGUES_DIR
    for p in api_bank_candidates(root):
        d = p.parent / DIALOGUES_DIR
        if d.is_dir():
            return d, (f"API-Bank's recorded dialogues (replayed: each AI turn and API call is a recorded turn, "
                       f"the verdict is the recording) from {_shown(d, root)}")
    looked = " and ".join(_shown(p.parent / DIALOGUES_DIR, root) for p in api_bank_candidates(root))
    return "agent-builtin", (f"API-Bank's dialogues not found (looked in {looked}): falling back to replaying "
                             "the built-in scripted agent's conversations (oilbird.data.agent_workload)")


def replay_conversations(lm, conversations, methods: Sequence[str]) -> list[RequestTrace]:
    """Replay recorded ``conversations`` (:mod:`oilbird.data.conversations`) with each preset in
    ``methods`` as ``python -m oilbird replay --traces --diagnose`` does (fast mode: one
    teacher-forced forward per turn; one decoder, so one store, per method), and return one
    trace per turn and method with the turn's ``gap_labels`` and ``drafter_reach``. Conversations longer than the
    model's context are left out (as replay skips them)."""
    from oilbird.data.conversations import encode_conversation
    from oilbird.evaluation.diagnose import build_report
    from oilbird.evaluation.labels import attach_report
    from oilbird.evaluation.replay import diagnose_turns, fits, replay
    from oilbird.verifier import Verifier

    context = int(getattr(lm.model.config, "max_position_embeddings", 0) or 0) or 10 ** 9
    turns = [t for t in (encode_conversation(lm.tokenizer, c, end_ids=lm.eos_token_ids) for c in conversations)
             if fits(t, context)]
    traces: list[RequestTrace] = []
    replay(turns, list(methods), Verifier(lm), mode="fast", trace=True,
           recorded_by={c.id: c.model for c in conversations},
           on_request=lambda trs, _res: traces.extend(trs))
    attach_report(traces, build_report(diagnose_turns(lm, turns, progress=False), {"data": "notebook", "model": lm.name}))
    return traces
