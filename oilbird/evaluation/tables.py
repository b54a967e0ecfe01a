"""A trace file as two flat tables, for a spreadsheet or pandas: one row per drafted tree node,
one row per neighbour the semantic key retrieved.

    python -m oilbird report runs/NAME/traces.jsonl --csv runs/NAME/tables

writes ``nodes.csv`` and ``neighbours.csv`` there (the app's "Export trace" writes both beside the
trace it exports). In Python, ``pandas.DataFrame(node_rows(traces))`` is the same table.

**nodes.csv**, every drafted node of every drafting cycle (the root, the newest committed token,
is no draft and has no row):

- ``request``, ``method``, ``cycle``, ``node`` (its index in the tree), ``parent``, ``depth``
  (the root's children are depth 1), ``token``, ``text``;
- ``sources``: who proposed it, ``+``-joined (``semantic`` is the hidden-state key);
  ``neighbours``: the ranks (1 = most similar) of the key's neighbours whose chains run through
  it, ``;``-joined, and ``similarity``, the best of theirs;
- ``placed_by``: ``exact-match head`` (placed first, contested by nothing), ``fill`` (chosen by
  the expected or open fill, at ``price``), or empty (a reserved fill, or a trace older than the
  fill's prices); ``price``: the chance the fill gave the node's whole path of being accepted;
- ``verdict``: ``accepted``, ``rejected`` (its parent was accepted, it was not), or ``never
  reached`` (its parent was not accepted); ``committed``: where its parent was accepted, the
  token committed in its place (the verifier's own next token in a live run; in a replay, the
  recording's), the same for every sibling; empty where the output ended before that place (an
  end-of-sequence token or the token limit inside the accepted path).

**neighbours.csv**, every retrieved neighbour: ``request``, ``method``, ``cycle``, ``rank``,
``similarity``, ``agreement`` (how many of our tokens, the root first, equal the record's own),
``from_request`` and ``position`` (where the record was stored), ``proposed`` (its chain's text
as drafted), ``nodes`` (tree nodes on its chain) and ``accepted`` (its tokens the verifier
accepted), ``why_no_node`` (why its chain got no node: ``budget``, ``below-floor``, ``muted``,
``no-tokens``), ``left_out`` (what the fill priced the first token it cut from the chain; the
cycle's ``fill_bar`` beside it is the last node the fill took) and ``right_for``: how many tokens of
its continuation, cut or not, the output really continued with (:func:`oilbird.trace.right_run`;
empty where the cycle drafted past the output's end).
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterable, Iterator

from ..trace import CycleTrace, RequestTrace, cycle_truth, right_run

NODE_COLUMNS = ("request", "method", "cycle", "node", "parent", "depth", "token", "text", "sources",
                "neighbours", "similarity", "placed_by", "price", "verdict", "committed")
NEIGHBOUR_COLUMNS = ("request", "method", "cycle", "rank", "similarity", "agreement", "from_request", "position",
                     "proposed", "nodes", "accepted", "why_no_node", "left_out", "fill_bar", "right_for")


def _verdict(cycle: CycleTrace, i: int, accepted: set[int]) -> str:
    return "accepted" if i in accepted else "rejected" if cycle.parents[i] in accepted else "never reached"


def _placed_by(cycle: CycleTrace, i: int) -> str:
    if cycle.fill_from is None:
        return ""
    return "exact-match head" if i < cycle.fill_from else "fill"


def cycle_node_rows(tr: RequestTrace, cycle: CycleTrace) -> Iterator[dict]:
    """The rows of ``nodes.csv`` for one cycle of ``tr`` (none for the prefill's)."""
    accepted = set(cycle.accepted)
    via: dict[int, list[int]] = {}
    for rank, nb in enumerate(cycle.neighbours, 1):
        for i in nb.walked_nodes:
            via.setdefault(i, []).append(rank)
    for i in range(1, cycle.n_nodes):
        parent, depth = cycle.parents[i], cycle.depths[i]
        ranks = via.get(i, [])
        yield {"request": tr.request_id, "method": tr.method, "cycle": cycle.cycle, "node": i, "parent": parent,
               "depth": depth, "token": cycle.tokens[i], "text": cycle.token_text[i],
               "sources": "+".join(cycle.sources[i]), "neighbours": ";".join(map(str, ranks)),
               "similarity": max((cycle.neighbours[r - 1].similarity for r in ranks), default=None),
               "placed_by": _placed_by(cycle, i), "price": cycle.prices[i] if cycle.prices else None,
               "verdict": _verdict(cycle, i, accepted),
               "committed": cycle.committed_text[depth - 1]
               if parent in accepted and depth <= len(cycle.committed_text) else None}


def node_rows(traces: Iterable[RequestTrace]) -> Iterator[dict]:
    """Every row of ``nodes.csv``: each trace's cycles in order."""
    for tr in traces:
        for cycle in tr.cycles:
            yield from cycle_node_rows(tr, cycle)


def neighbour_rows(traces: Iterable[RequestTrace]) -> Iterator[dict]:
    """Every row of ``neighbours.csv``: each trace's cycles in order, each cycle's neighbours by rank."""
    for tr in traces:
        for cycle in tr.cycles:
            truth = cycle_truth(cycle, tr.output_ids)
            for rank, nb in enumerate(cycle.neighbours, 1):
                yield {"request": tr.request_id, "method": tr.method, "cycle": cycle.cycle, "rank": rank,
                       "similarity": nb.similarity, "agreement": nb.agreement, "from_request": nb.request_id,
                       "position": nb.position, "proposed": "".join(nb.proposed_text),
                       "nodes": len(nb.walked_nodes), "accepted": nb.accepted, "why_no_node": nb.why_no_node,
                       "left_out": nb.left_out, "fill_bar": cycle.fill_bar,
                       "right_for": None if truth is None else right_run(nb, truth)}


def write_rows(rows: Iterable[dict], columns: tuple[str, ...], path: str | Path) -> Path:
    """``rows`` as a CSV file with ``columns`` (None is an empty cell); returns the path."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    return path


def write_tables(traces: list[RequestTrace], folder: str | Path,
                 names: tuple[str, str] = ("nodes.csv", "neighbours.csv")) -> list[Path]:
    """``nodes.csv`` and ``neighbours.csv`` of ``traces`` in ``folder`` (made if missing), under
    ``names``; returns the two paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [write_rows(node_rows(traces), NODE_COLUMNS, folder / names[0]),
            write_rows(neighbour_rows(traces), NEIGHBOUR_COLUMNS, folder / names[1])]
