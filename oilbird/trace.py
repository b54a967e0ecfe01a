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

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable

TRACE_VERSION = 1

# Canonical source names. "bonus" is the verifier's own token at the end of each cycle.
SOURCES = ("pld", "suffix", "recycling", "semantic", "rejected")
BONUS = "bonus"


class TraceError(ValueError):
    """A trace file is missing, corrupt or of an unknown version. The message says which line."""


@dataclass
class Neighbour:
    """One store record the semantic key retrieved in this cycle."""
    record: int                 # index of the record in the store
    request_id: str             # request it came from
    position: int               # its position among that request's generated tokens
    similarity: float           # cosine between the query state and the record's state
    proposed: list[int]         # continuation it proposed (may be empty: below the depth floor)
    proposed_text: list[str]
    context_text: list[str]     # a few generated tokens around the record (for display)
    context_index: int          # index of the matched token inside context_text
    paid_nodes: list[int]       # tree nodes this chain created (its re-walked prefix is free)
    walked_nodes: list[int]     # all tree nodes on its chain (shared + paid)
    accepted: int = 0           # how many of its proposed tokens the verifier accepted
    lexical_reachable: bool = False  # was the same first token proposed by a lexical source?


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
    semantic_muted: bool = False      # self-calibration had muted the semantic source
    drafted: int = 0                  # nodes drafted; more than len(tokens) when cost-aware sizing cut the tree
    timings: dict[str, float] = field(default_factory=dict)  # seconds: draft, verify, commit, update

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
    # optional per-position diagnosis labels (see oilbird.diagnose): one per output token
    gap_labels: list[str] | None = None
    meta: dict = field(default_factory=dict)

    @property
    def forwards(self) -> int:
        return len(self.cycles)

    @property
    def tau(self) -> float:
        return len(self.output_ids) / max(1, len(self.cycles))


def _cycle_to_dict(c: CycleTrace) -> dict:
    d = asdict(c)
    d["kind"] = "cycle"
    return d


def _cycle_from_dict(d: dict) -> CycleTrace:
    d = dict(d)
    d.pop("kind", None)
    d["neighbours"] = [Neighbour(**n) for n in d.get("neighbours", [])]
    names = {f.name for f in fields(CycleTrace)}
    unknown = set(d) - names
    if unknown:
        raise TraceError(f"unknown cycle fields {sorted(unknown)}")
    return CycleTrace(**d)


def request_to_lines(r: RequestTrace) -> list[str]:
    head = {k: v for k, v in asdict(r).items() if k != "cycles"}
    head["kind"] = "request"
    head["version"] = TRACE_VERSION
    lines = [json.dumps(head, ensure_ascii=False)]
    lines += [json.dumps(_cycle_to_dict(c), ensure_ascii=False) for c in r.cycles]
    return lines


def save_traces(traces: Iterable[RequestTrace], path: str | Path) -> Path:
    """Write request traces as JSONL (atomically: a crash never leaves half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in traces:
            for line in request_to_lines(r):
                f.write(line + "\n")
    tmp.replace(path)
    return path


def parse_trace_lines(lines: Iterable[str], origin: str = "<string>") -> list[RequestTrace]:
    """Parse JSONL trace lines; raise TraceError naming the first bad line."""
    out: list[RequestTrace] = []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{origin}:{no}: not valid JSON ({exc.msg})") from None
        if not isinstance(d, dict) or d.get("kind") not in ("request", "cycle"):
            raise TraceError(f"{origin}:{no}: expected an object with kind 'request' or 'cycle'")
        try:
            if d["kind"] == "request":
                if d.get("version") != TRACE_VERSION:
                    raise TraceError(f"trace version {d.get('version')!r}, expected {TRACE_VERSION}")
                d = {k: v for k, v in d.items() if k not in ("kind", "version")}
                out.append(RequestTrace(**d))
            else:
                if not out:
                    raise TraceError("cycle line before any request line")
                c = _cycle_from_dict(d)
                if c.request_id != out[-1].request_id:
                    raise TraceError(f"cycle of request {c.request_id!r} under {out[-1].request_id!r}")
                out[-1].cycles.append(c)
        except TraceError as exc:
            raise TraceError(f"{origin}:{no}: {exc}") from None
        except TypeError as exc:
            raise TraceError(f"{origin}:{no}: wrong fields ({exc})") from None
    if not out:
        raise TraceError(f"{origin}: no request records")
    return out


def load_traces(path: str | Path) -> list[RequestTrace]:
    """Load a JSONL trace file written by :func:`save_traces`."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"trace file '{path}' does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"'{path}' is not a UTF-8 text trace file") from None
    return parse_trace_lines(text.splitlines(), origin=str(path))
