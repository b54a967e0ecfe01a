"""The per-cycle trace record: the contract between the library and every view.

One :class:`CycleTrace` per decoding cycle (one verification forward), grouped under one
:class:`RequestTrace` per request. Views (the app, the notebooks, the exports) read only these
records; they never touch the model, the store or the sources.

On disk a trace file is JSONL: for each request one ``{"kind": "request", ...}`` line followed
by its ``{"kind": "cycle", ...}`` lines. ``save_traces`` / ``load_traces`` round-trip exactly.

Token text: every token id in a record travels with its decoded piece (``*_text``), so a view
never needs the tokenizer.
"""
from __future__ import annotations

import functools
import gzip
import json
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable

from .errors import InputError, shown
from .jsonio import MAX_BYTES, NOT_JSON_LINES, loads, one_document, read_text

# 2: provenance recorded when the cycle runs (CycleTrace.retrieval on every drafting cycle,
# Neighbour.why_no_node on every neighbour) and the stop reason (RequestTrace.stop,
# CycleTrace.stop). A version-1 file that recorded the provenance is converted on load (its stop
# reason stays unknown: None); one written before that is refused with one line saying how to
# write it again, so a view never derives provenance.
TRACE_VERSION = 2

# "bonus" is the verifier's own token at the end of each cycle (the other source names in a trace
# are the sources' own ``name`` attributes, oilbird.sources: "pld", "suffix", "semantic", ...)
BONUS = "bonus"


def recorder_words(recorded_by) -> tuple[str, str]:
    """Who recorded a replay, as a possessive, and the note in brackets its name may carry, for
    words about a replay's outputs; "a recorded model's" where it is not a name.

    >>> recorder_words("gpt-4o")
    ("gpt-4o's", '')
    >>> recorder_words("oilbird scripted agent (rule-based, no language model)")
    ("oilbird scripted agent's", 'rule-based, no language model')
    """
    who = recorded_by if isinstance(recorded_by, str) and recorded_by else "a recorded model"
    name, _, note = who.partition(" (")
    return f"{name}'s", note.removesuffix(")")


def common_prefix(a, b) -> int:
    """How many leading tokens two token sequences share (here, where both the library and the
    views can import it without the model runtime).

    >>> common_prefix([1, 2, 3], [1, 2, 4])
    2
    """
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n

# --------------------------------------------------------------------------- provenance vocabulary
# The one place its words are defined: the drafter and the sources record them, the views say them.

# what the semantic key did in one cycle (CycleTrace.retrieval; oilbird.sources.semantic checks the
# gate, the query, the store, a root-checked match, then the floor and muting)
RETRIEVAL_OUTCOMES = {
    "no-source": "the method drafts without the semantic key",
    "gate-closed": "its gate was closed: no lexical match and no token-adjacency row for the root token; "
                   "the semantic key looks up only after one of them",
    "no-query": "no hidden state to look up with this cycle",
    "empty-store": "an empty store: no earlier request had finished, so there was nothing to retrieve",
    "below-floor": "the best matches were below the similarity floor",
    "no-root-match": "no stored record followed by the root token was found where the key looked (it looks "
                     "only among those: its state is the one before the root, so any other record answers "
                     "another question)",
    "muted": "the semantic source was muted by self-calibration: it looked up, but drafted nothing",
    "retrieved": "found matches and proposed them",
}
# why a retrieved neighbour's chain got no tree node (Neighbour.why_no_node; "" when it got one)
NO_NODE_REASONS = {
    "no-tokens": "copy depth 0: its similarity allowed it no tokens",
    "muted": "the semantic source was muted by self-calibration: looked up, not drafted",
    "below-floor": "the best similarity was below the entry floor: looked up, not drafted",
    "budget": "no node was left for it: more similar neighbours took the semantic budget (under the "
              "expected and open fills, other candidates were worth more)",
}
# "budget" said for the fill a trace records (``meta["tree"]["fill"]``, oilbird.drafter)
BUDGET_BY_FILL = {
    "reserved": "no node was left for it: more similar neighbours took the semantic budget",
    "expected": "no node was left for it: the tree's other candidates were worth more (the fill prices every "
                "node by its learned chance of acceptance)",
}
BUDGET_BY_FILL["open"] = BUDGET_BY_FILL["expected"]
# why a request's output ended (RequestTrace.stop)
STOP_REASONS = {
    "eos": "an end-of-sequence token was committed",
    "limit": "the token limit (max_new_tokens; in replay, the recording's length) was reached",
    "stopped": "the caller stopped decoding early",
}


class TraceError(InputError):
    """A trace file is missing, corrupt or of an unknown version. The message says which line."""


@dataclass
class Neighbour:
    """One store record the semantic key retrieved in this cycle."""
    record: int                 # index of the record in the store
    request_id: str             # request it came from
    position: int               # its position among that request's generated tokens
    similarity: float           # cosine between the query state and the record's state
    proposed: list[int]         # continuation it proposed (may be empty: copy depth 0)
    proposed_text: list[str]
    context_text: list[str]     # a few generated tokens around the record (for display)
    context_index: int          # index of the matched token inside context_text
    paid_nodes: list[int]       # tree nodes this chain created (its re-walked prefix is free)
    walked_nodes: list[int]     # all tree nodes on its chain (shared + paid)
    accepted: int = 0           # how many of its proposed tokens the verifier accepted
    lexical_reachable: bool = False  # was the same first token proposed by a lexical source? (as recorded:
    # read it through lexically_reachable(), which older traces, that counted token recycling, agree with)
    # why its chain got no tree node, as the drafter recorded it: "" (it got one), or a key of
    # NO_NODE_REASONS ("no-tokens", "muted", "below-floor", "budget")
    why_no_node: str = ""
    # the record's continuation past ``proposed`` (up to oilbird.sources.semantic.REACH tokens in
    # all): what the copy-depth or floor cut withheld, so the funnel (oilbird.evaluation.funnel)
    # can tell a cut neighbour from a wrong one; None in traces written before it was recorded
    withheld: list[int] | None = None
    # its context agreement (oilbird.sources.base.Chain.match): how many of our tokens, the root
    # first, equal the record's own read backwards; what the fill prices a neighbour by beside its
    # similarity. None in traces written before it was recorded
    agreement: int | None = None
    # where the expected or open fill cut its chain: what the first token it left out was worth to
    # the fill (the chance it gave that token's path of being accepted; CycleTrace.fill_bar is the
    # last node it took). None: nothing was left out, the fill added nothing (no contest), another
    # fill, or an older trace
    left_out: float | None = None


RIGHT_WINDOW = 64     # output tokens a record's continuation is checked against (the funnel, the views)


def right_run(nb: Neighbour, truth) -> int:
    """How many tokens of a retrieved record's continuation before any cut (``proposed`` then
    ``withheld``; a trace written before ``withheld`` was recorded: ``proposed``) equal ``truth``,
    the output from the cycle on (at most :data:`RIGHT_WINDOW` of it): how far the record was right."""
    return common_prefix(list(nb.proposed) + list(nb.withheld or []), truth)


def cycle_truth(cycle: "CycleTrace", output) -> list[int] | None:
    """What a record retrieved at ``cycle`` is checked against (:func:`right_run`): the output from
    the cycle on, at most :data:`RIGHT_WINDOW` tokens of it, or the cycle's accepted path where the
    request's token limit ended the output inside it (the verifier endorsed all of the path; an
    end-of-sequence token ends it for good); None where the cycle drafted after the output's end."""
    at = cycle.generated_before
    if at >= len(output):
        return None
    truth = list(output[at:at + RIGHT_WINDOW])
    if cycle.stop != "limit":         # (an end-of-sequence token inside the path: nothing follows it)
        return truth
    path = [cycle.tokens[i] for i in cycle.accepted[1:] if i < len(cycle.tokens)]
    return path if len(truth) < len(path) else truth


def committed_drafts(cycle: "CycleTrace") -> int:
    """How many of the cycle's accepted drafts were committed: all of them, unless the output
    ended inside the accepted path. ``accepted`` is the verifier's whole path, but ``committed``
    stops at the token limit or at EOS (``oilbird.decoding._finish``), so on a request's last
    cycle the path can reach past the output."""
    return min(max(0, len(cycle.accepted) - 1), len(cycle.committed))


def bonus_committed(cycle: "CycleTrace") -> bool:
    """Did the verifier's bonus token make it into the output? Only when every accepted draft
    was committed and there was room for one more (always on the prefill cycle)."""
    return cycle.bonus >= 0 and len(cycle.committed) > max(0, len(cycle.accepted) - 1)


@dataclass
class CycleTrace:
    """Everything one draft -> verify -> commit cycle did."""
    request_id: str
    method: str
    cycle: int                        # 0-based; cycle 0 is the prefill forward
    prefix_len: int                   # tokens in the KV cache before this forward
    generated_before: int             # generated tokens committed before this cycle
    # the tree (node 0 = root = newest committed token); empty lists on the prefill cycle
    tokens: list[int] = field(default_factory=list)
    token_text: list[str] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    sources: list[list[str]] = field(default_factory=list)
    scores: list[dict[str, float]] = field(default_factory=list)
    argmax: list[int] = field(default_factory=list)       # verifier argmax at every node
    argmax_text: list[str] = field(default_factory=list)
    # the verdict
    accepted: list[int] = field(default_factory=list)     # node indices, root first
    bonus: int = -1
    committed: list[int] = field(default_factory=list)    # new tokens: accepted drafts + bonus
    committed_text: list[str] = field(default_factory=list)
    committed_sources: list[list[str]] = field(default_factory=list)  # ["bonus"] for the bonus
    neighbours: list[Neighbour] = field(default_factory=list)
    lexical_match_len: int = 0        # longest context suffix the lexical key matched
    # did the token-adjacency table hold a row for the root? It opens the semantic key's gate
    # too (oilbird.drafter); None in traces written before it was recorded
    adjacency_row: bool | None = None
    # records the store held for the semantic key to search (finished requests only); None:
    # a decoder without a store, or a trace written before it was recorded
    store_records: int | None = None
    semantic_muted: bool = False      # self-calibration had muted the semantic source
    # the semantic key's outcome as the drafter recorded it (a key of RETRIEVAL_OUTCOMES) and the
    # similarity floor it applied; None on the prefill cycle (nothing is drafted)
    retrieval: str | None = None
    retrieval_floor: float | None = None
    stop: str | None = None           # the output ended in this cycle: a key of STOP_REASONS
    timings: dict[str, float] = field(default_factory=dict)  # seconds: draft, verify, commit, update
    # a sampled cycle (oilbird.sampling): per tree node, the probability that decided it (its
    # acceptance probability under the residual) and the residual's mass when it was tried
    # (1.0: no sibling rejected before it); None where never tried (all None: nothing was tried);
    # empty when greedy, replayed or written by an older version
    decided_prob: list[float | None] = field(default_factory=list)
    residual_mass: list[float | None] = field(default_factory=list)
    # the expected and open fills' prices (oilbird.drafter.FillPrices): per tree node the chance
    # they gave its path of being accepted; the nodes before ``fill_from`` were placed first, by
    # the exact-match head, and competed with nothing; the last node the fill added (None: it
    # added none). Empty / None under the reserved fill and in older traces
    prices: list[float] = field(default_factory=list)
    fill_from: int | None = None
    fill_bar: float | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.tokens)


@dataclass
class RequestTrace:
    """One request decoded by one method: the prompt, the output and every cycle."""
    request_id: str
    method: str
    model: str
    prompt_ids: list[int]
    prompt_text: str
    output_ids: list[int] = field(default_factory=list)
    output_text: list[str] = field(default_factory=list)  # one piece per output token
    cycles: list[CycleTrace] = field(default_factory=list)
    lossless: bool | None = None      # None = not audited
    # optional per-position diagnosis labels (see oilbird.evaluation.diagnose): one per output token
    gap_labels: list[str] | None = None
    # beside them, one per output token: does the drafter's key (the state one position before the
    # root, records followed by the root) reach the token? (diagnose's ``drafter_reach``)
    drafter_reach: list[bool | None] | None = None      # None at the first token: the prefill gives it
    # what the trace says of itself, e.g. "live": True (decoded live), "replay": {...}, "sampling":
    # {...}, "gap_pool": GAP_POOL_STORE (its labels' pool was its own decoder's store)
    meta: dict = field(default_factory=dict)
    stop: str | None = None           # why the output ended: a key of STOP_REASONS (None: not finished)

    @property
    def forwards(self) -> int:
        return len(self.cycles)

    @property
    def tau(self) -> float:
        return len(self.output_ids) / max(1, len(self.cycles))


# ``meta["gap_pool"]`` of a trace whose gap labels were computed against its own decoder's store
# (the outputs that decoder's earlier runs produced: oilbird.evaluation.labels.RunningLabels), not
# against the requests before it in a trace file
GAP_POOL_STORE = "decoder store"

# the exact-match (lexical) sources: the keys the identifiability gap sets the hidden state against,
# which copy text whose context matches ours (prompt lookup, the suffix index, SuffixDecoding, the
# live outputs of requests decoded together). Token recycling is not one: its table holds the
# verifier's own past guesses, keyed by one token. They are the drafter's spine sources
# (oilbird.drafter, pass 1), and a trace says which it had (``meta["lexical_sources"]``:
# :func:`lexical_sources`); this set is what a trace written before that held.
LEXICAL_SOURCES = frozenset({"pld", "suffix", "suffix-arctic", "live"})


def lexical_sources(trace: "RequestTrace | None") -> frozenset[str]:
    """The exact-match sources of the drafter that wrote ``trace``: its spine sources, which the
    decoder records in ``meta["lexical_sources"]`` (a source of one's own in the spine pass
    counts, as the drafter counts its match), else :data:`LEXICAL_SOURCES` (an older trace, or
    none). Every view and the funnel count these alone."""
    names = trace.meta.get("lexical_sources") if trace is not None else None
    return LEXICAL_SOURCES if names is None else frozenset(names)


def lexical_first_tokens(tokens, parents, sources, lexical: frozenset[str] = LEXICAL_SOURCES) -> set[int]:
    """The tokens a lexical source (``lexical``: :func:`lexical_sources` of the trace) proposed as
    children of the root of a tree (its tokens, parent indices and per-node sources: a
    DraftTree's or a CycleTrace's)."""
    return {tokens[i] for i in range(1, len(tokens)) if parents[i] == 0 and lexical & set(sources[i])}


def lexically_reachable(cycle: "CycleTrace", nb: Neighbour, lexical: frozenset[str] = LEXICAL_SOURCES) -> bool:
    """Did a lexical source (``lexical``: :func:`lexical_sources` of the trace) propose the
    neighbour's first token as a child of the root in ``cycle``'s tree
    (:func:`lexical_first_tokens`)? Read from the tree, so every trace, whatever its version
    recorded in ``Neighbour.lexical_reachable``, answers alike."""
    return bool(nb.proposed) and nb.proposed[0] in lexical_first_tokens(cycle.tokens, cycle.parents, cycle.sources,
                                                                        lexical)


# fields earlier traces carry that this version no longer records: dropped on load, so old files
# still open ("drafted": the node count before cost-aware sizing, which was removed)
RETIRED_CYCLE_FIELDS = ("drafted",)


def _cycle_to_dict(c: CycleTrace) -> dict:
    d = asdict(c)
    d["kind"] = "cycle"
    return d


def _cycle_from_dict(d: dict) -> CycleTrace:
    d = dict(d)
    d.pop("kind", None)
    nbs = d.get("neighbours", [])
    if not isinstance(nbs, list) or not all(isinstance(n, dict) for n in nbs):
        raise TraceError("field 'neighbours' is not a list of objects")
    d["neighbours"] = [record_from(Neighbour, n, "neighbour") for n in nbs]
    for f in RETIRED_CYCLE_FIELDS:     # written by earlier versions; nothing reads them now
        d.pop(f, None)
    return record_from(CycleTrace, d, "cycle")


@functools.cache
def _record_fields(cls) -> tuple[frozenset, frozenset]:
    """A record class's field names, and those without a default: worked out once per class."""
    fs = fields(cls)
    return (frozenset(f.name for f in fs),
            frozenset(f.name for f in fs if f.default is MISSING and f.default_factory is MISSING))


def record_from(cls, d: dict, what: str, also_required: tuple = ()):
    """``cls(**d)`` for a record read from a file, its fields named when wrong: unknown ones,
    and missing ones (those without a default, and ``also_required``) as TraceError."""
    known, required = _record_fields(cls)
    unknown = sorted(set(d) - known)
    if unknown:
        raise TraceError(f"unknown {what} field{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))[:200]}")
    missing = [n for n in sorted(known) if n not in d and (n in also_required or n in required)]
    if missing:
        raise TraceError(f"the {what} has no {', '.join(map(repr, missing))} field{'s' if len(missing) > 1 else ''}")
    return cls(**d)


@functools.cache
def _parts(tp) -> tuple:
    """``tp``'s origin and arguments, worked out once per type, not once per value."""
    return typing.get_origin(tp), typing.get_args(tp)


def _conforms(value, tp) -> bool:
    """Does a JSON value have the annotated type ``tp`` (int, float, str, bool, list[X],
    dict[K, V], X | None, Neighbour)? An int passes for a float."""
    origin, args = _parts(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if tp is type(None):
        return value is None
    if origin is list:
        if args[0] is int:                 # the common case (token ids, node indices), inline
            return isinstance(value, list) and all(type(v) is int for v in value)
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, dict) and (not args or all(_conforms(k, args[0]) and _conforms(v, args[1])
                                                            for k, v in value.items()))
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


_hints = functools.cache(typing.get_type_hints)     # per record class, not per record


def _check_types(obj) -> None:
    for name, tp in _hints(type(obj)).items():
        if not _conforms(getattr(obj, name), tp):
            raise TraceError(f"field '{name}' is {json.dumps(getattr(obj, name), default=str)[:60]}, "
                             f"not {spelled(tp)}")


def spelled(tp) -> str:
    """A record field's type as a trace file's reader says it.

    >>> spelled(list[int]), spelled(dict), spelled(bool | None), spelled(list[float | None])
    ('a list of whole numbers', 'an object', 'true, false or null', 'a list of (a number or null)')
    """
    origin, args = _parts(tp)
    if origin in (typing.Union, types.UnionType):
        kinds = [spelled(a) for a in args if a is not type(None)]
        if kinds == ["true or false"]:
            return "true, false or null"
        return " or ".join(kinds) + (" or null" if type(None) in args else "")
    if origin is list:
        inner = spelled(args[0]) if args else "values"
        plural = {"a whole number": "whole numbers", "a number": "numbers", "text": "texts",
                  "text or null": "texts or nulls", "an object": "objects"}
        return f"a list of {plural.get(inner, f'({inner})')}"
    if origin is dict or tp is dict:
        return "an object"
    return {str: "text", int: "a whole number", float: "a number", bool: "true or false"}.get(
        tp, f"a {getattr(tp, '__name__', tp)} record")


def _check_cycle(c: CycleTrace) -> None:
    """Field types, and a tree the views can draw: per-node lists of one length, node 0 the
    root (parent -1), every other parent an earlier node, accepted nodes inside the tree."""
    _check_types(c)
    for nb in c.neighbours:
        _check_types(nb)
    n = len(c.tokens)
    # a decoder with trace=False keeps the tree and verdict but leaves text, depths and scores empty
    short = [k for k in ("parents", "sources", "argmax") if len(getattr(c, k)) != n]
    short += [k for k in ("token_text", "depths", "scores", "argmax_text", "decided_prob", "residual_mass", "prices")
              if len(getattr(c, k)) not in (0, n)]
    if short:
        raise TraceError(f"cycle {c.cycle}: {', '.join(short)} not one entry per tree node ({n})")
    if n and c.parents[0] != -1:
        raise TraceError(f"cycle {c.cycle}: node 0 must be the root (parent -1)")
    bad = next((i for i in range(1, n) if not 0 <= c.parents[i] < i), None)
    if bad is not None:
        raise TraceError(f"cycle {c.cycle}: node {bad} has parent {c.parents[bad]}, not an earlier node")
    if c.prices and (not all(0 <= p <= 1 for p in c.prices) or c.fill_from is None or not 0 < c.fill_from <= n):
        raise TraceError(f"cycle {c.cycle}: prices are not chances (0 to 1) with the node the fill began at")
    if any(nb.left_out is not None and not (c.fill_bar is not None and 0 <= nb.left_out <= c.fill_bar)
           for nb in c.neighbours):
        raise TraceError(f"cycle {c.cycle}: a neighbour's left_out is not a chance at most the fill's bar")
    if c.fill_bar is not None and not (c.prices and 0 <= c.fill_bar <= 1):
        raise TraceError(f"cycle {c.cycle}: fill_bar {c.fill_bar} without the prices of a tree it ends")
    if any(not 0 <= i < n for i in c.accepted):
        raise TraceError(f"cycle {c.cycle}: accepted nodes {c.accepted} outside the {n}-node tree")
    if len(c.committed_sources) != len(c.committed) or len(c.committed_text) not in (0, len(c.committed)):
        raise TraceError(f"cycle {c.cycle}: committed, committed_text, committed_sources differ in length")


def _check_request(r: RequestTrace) -> None:
    _check_types(r)
    if len(r.output_text) not in (0, len(r.output_ids)):      # empty: decoded with trace=False
        raise TraceError("output_text is not one piece per output token")
    if r.gap_labels is not None and len(r.gap_labels) != len(r.output_ids):
        raise TraceError("gap_labels is not one label per output token")
    if r.drafter_reach is not None and len(r.drafter_reach) != len(r.output_ids):
        raise TraceError("drafter_reach is not one entry per output token")
    names = r.meta.get("lexical_sources")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise TraceError("meta 'lexical_sources' is not a list of source names")
    tree = r.meta.get("tree")
    if tree is not None and not (isinstance(tree, dict) and isinstance(tree.get("budget"), int)
                                 and isinstance(tree.get("fill"), str)):
        raise TraceError("meta 'tree' is not {\"budget\": a whole number, \"fill\": a fill's name}")


def request_to_lines(r: RequestTrace) -> list[str]:
    """One request's JSONL lines; TraceError for a value no reader takes back (NaN, infinity),
    naming the request and cycle, before anything is written."""
    head = {k: v for k, v in asdict(r).items() if k != "cycles"}
    head["kind"] = "request"
    head["version"] = TRACE_VERSION
    records = [("its header", head)] + [(f"cycle {c.cycle}", _cycle_to_dict(c)) for c in r.cycles]
    lines = []
    for where, d in records:
        try:
            lines.append(json.dumps(d, ensure_ascii=False, allow_nan=False))
        except ValueError as exc:
            raise TraceError(f"request {r.request_id!r}, {where}: {exc} (NaN or infinity: a trace holds finite "
                             f"numbers)") from None
    return lines


def save_traces(traces: Iterable[RequestTrace], path: str | Path) -> Path:
    """Write request traces as JSONL, gzipped where ``path`` ends in ``.gz`` (as every reader
    takes it); atomically: a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as raw:
            # gzip without a name or a time in its header: the same traces give the same bytes
            out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if path.suffix == ".gz" else raw
            for r in traces:
                for line in request_to_lines(r):
                    out.write((line + "\n").encode("utf-8"))
            if out is not raw:
                out.close()                 # the gzip trailer; the file itself closes with the block
    except BaseException:
        tmp.unlink(missing_ok=True)         # the file at ``path``, if any, is as it was
        raise
    tmp.replace(path)
    return path


def parse_trace_lines(lines: Iterable[str], origin: str = "<string>") -> list[RequestTrace]:
    """Parse JSONL trace lines; raise TraceError naming ``origin`` and the first bad line."""
    out: list[RequestTrace] = []
    starts: list[int] = []          # the line of each request
    versions: list[int] = []        # the format each request was written in
    for no, line in enumerate(lines, start=1):
        if not line.strip(" \t\r\n"):
            continue
        d = loads(line, TraceError, origin, no)
        try:
            if isinstance(d, dict) and "messages" in d and "kind" not in d:
                raise TraceError("a conversation (replay's input, for --data), not a trace record: traces "
                                 "are what trace, bench --traces and replay --traces write")
            if not isinstance(d, dict) or d.get("kind") not in ("request", "cycle"):
                raise TraceError("expected an object with kind 'request' or 'cycle'")
            if d["kind"] == "request":
                if d.get("version") not in (1, TRACE_VERSION):
                    raise TraceError(f"trace version {shown(d.get('version'))}, expected {TRACE_VERSION}")
                versions.append(d["version"])
                d = {k: v for k, v in d.items() if k not in ("kind", "version")}
                out.append(record_from(RequestTrace, d, "request", ("output_ids", "output_text")))
                starts.append(no)
                _check_request(out[-1])
            else:
                if not out:
                    raise TraceError("cycle line before any request line")
                c = _cycle_from_dict(d)
                _check_cycle(c)
                if versions[-1] == 1 and not _provenance_recorded(c, d):
                    raise TraceError("a trace of format 1 written before the semantic key's outcome was recorded; "
                                     "write it again with this version (python -m oilbird trace / replay --traces)")
                if c.request_id != out[-1].request_id:
                    raise TraceError(f"cycle of request {shown(c.request_id)} under {shown(out[-1].request_id)}")
                out[-1].cycles.append(c)
        except TraceError as exc:
            raise TraceError(exc.reason, origin, no) from None
        except TypeError as exc:
            raise TraceError(f"wrong fields ({str(exc)[:200]})", origin, no) from None
        except RecursionError:
            raise TraceError("nested too deeply to read", origin, no) from None
    if not out:
        raise TraceError("no request records", origin)
    for r, no in zip(out, starts):     # the cycles must add up to the output: every view counts on it
        if [t for c in r.cycles for t in c.committed] != r.output_ids:
            raise TraceError(f"request {shown(r.request_id)} ({shown(r.method)}): its cycles commit "
                             f"{sum(len(c.committed) for c in r.cycles)} tokens, not its "
                             f"{len(r.output_ids)} output tokens", origin, no)
    return out


def _provenance_recorded(c: CycleTrace, raw: dict) -> bool:
    """Does a version-1 cycle hold what version 2 records (then it converts as it is)? ``raw``:
    the line it was read from, which says whether a neighbour wrote ``why_no_node`` (the record
    fills in its default, "got a node", where the line has none)."""
    return (c.cycle == 0 or c.retrieval is not None) and all("why_no_node" in n for n in raw.get("neighbours", []))


def load_traces(path: str | Path, max_bytes: int = MAX_BYTES) -> list[RequestTrace]:
    """Load a JSONL trace file written by :func:`save_traces` (``.gz`` too); any bytes that are
    not one raise :class:`TraceError` naming the file and line. ``max_bytes``: the most text
    taken, decompressed (the app's uploads take less than the default)."""
    text = read_text(path, TraceError, limit=max_bytes)
    try:
        return parse_trace_lines(text.split("\n"), origin=str(path))
    except TraceError:
        if one_document(text):
            raise TraceError(NOT_JSON_LINES, path) from None
        raise
