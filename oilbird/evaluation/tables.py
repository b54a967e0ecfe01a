"""A trace file as three flat tables, for a spreadsheet or pandas: one row per cycle, one per
drafted tree node, one per neighbour the semantic key retrieved.

    python -m oilbird report runs/NAME/traces.jsonl --csv runs/NAME/tables

writes ``cycles.csv``, ``nodes.csv`` and ``neighbours.csv`` there (the app's "Export trace" writes
them beside the trace it exports). In Python, ``pandas.DataFrame(node_rows(traces))`` is the same
table as ``nodes.csv``. Read the files with ``pandas.read_csv(path, keep_default_na=False,
na_values=[""])`` to keep a token's text "NaN" or "null" as text; a spreadsheet may take a text
that begins with ``=``, ``+``, ``-`` or ``@`` for a formula: import the text columns as text.
Every row names its ``request``, ``method`` and ``cycle`` (0 is the prefill forward), which join
the tables.

**cycles.csv**, every cycle, the prefill and those that drafted nothing included, so a
method's tau is ``n_committed.sum() / len(rows)`` (one forward per cycle): ``generated_before``
(tokens committed before it), ``n_nodes`` (drafted nodes, the root aside), ``n_accepted``
(drafted nodes accepted, past the output's end too), ``n_committed`` (tokens it committed: the
accepted drafts and the bonus, cut where the output ended), ``bonus_token`` and ``bonus`` (the
bonus token and its text; empty where none was committed), ``stop`` (``eos``, ``limit``,
``stopped`` on the cycle that ended the output), ``lexical_match_len``, ``retrieval`` (the key's
outcome), ``semantic_muted``,
``store_records`` and ``fill_bar`` (the price of the last node the expected or open fill took;
empty where it took none).

**nodes.csv**, every drafted node of every drafting cycle (the root, the newest committed token,
is no draft and has no row):

- ``node`` (its index in the tree), ``parent``, ``depth`` (the root's children are depth 1),
  ``token``, ``text``;
- ``sources``: who proposed it, ``+``-joined (``semantic`` is the hidden-state key);
  ``neighbours``: the numbers (neighbours.csv's ``neighbour``) of the key's neighbours whose
  chains run through it, ``;``-joined (``nodes.neighbours.str.split(";").explode()`` gives one row per
  pair), and ``best_similarity``, the highest of theirs;
- ``placed_by``: ``exact-match head`` (placed first, before the fill's contest), ``fill`` (chosen
  by the expected or open fill), or empty (a reserved fill, or a trace older than the fill's
  prices); ``price``: the chance the fill gave the node's whole path of being accepted (the
  head's nodes are priced too, though nothing competed with them);
- ``verdict``: ``accepted``; ``accepted past the end`` (accepted, but the output ended before it:
  an end-of-sequence token or the token limit inside the accepted path); ``rejected`` (its
  parent was accepted, it was not: another token was committed there, which may be a sibling's);
  ``not tried`` (sampled decoding only: a sibling was accepted before its turn came); or ``never
  reached`` (its parent was not accepted). ``committed_token`` and ``committed``: where its
  parent was accepted, the token committed in its place and its text (the verifier's own next
  token in a greedy run, its sample under sampling; in a replay, the recording's), the same for
  every sibling; empty where nothing was committed there (an end-of-sequence token's text is
  empty too: its ``committed_token`` says it was one).

**neighbours.csv**, every retrieved neighbour: ``neighbour`` (its number in the cycle's record,
most similar first from 0: the app's and the figures' ``#``), ``similarity``,
``agreement`` (how many of our tokens, the root first, equal the record's own), ``from_request``
and ``position`` (where the record was stored), ``proposed`` (its chain's text as drafted) and
``proposed_tokens`` (how many tokens), ``withheld_tokens`` (its continuation past them that the
copy depth or the similarity floor cut; empty in older traces), ``n_nodes`` (tree nodes on its
chain) and ``n_accepted`` (its tokens the verifier accepted, past the output's end too),
``why_no_node`` (why its chain got no node: ``budget``, ``below-floor``, ``muted``, ``no-tokens``),
``left_out`` (the price the fill gave the first token it cut from the chain; empty where it cut
none; the app shows it as "next p" only where every node of the chain was accepted, where the cut
could have cost a token) and ``right_for``: how many tokens of its continuation, cut or not, equal what followed
(:func:`oilbird.trace.right_run` against :func:`oilbird.trace.cycle_truth`: the output, or, in a
last cycle the token limit cut, the accepted path the verifier endorsed past it; empty where the
cycle drafted past the output's end; in a trace older than ``withheld_tokens``, the drafted
tokens only).

Prices are kept to 4 significant figures, so a ``left_out`` can equal its cycle's ``fill_bar``.
A column of whole numbers with empty cells (``bonus_token``, ``committed_token``,
``store_records``) reads as floats in pandas; ``read_csv(...).convert_dtypes()`` keeps them whole.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterable, Iterator

from ..trace import CycleTrace, RequestTrace, bonus_committed, committed_drafts, cycle_truth, right_run
from ..tree import depths_of

CYCLE_COLUMNS = ("request", "method", "cycle", "generated_before", "n_nodes", "n_accepted", "n_committed",
                 "bonus_token", "bonus", "stop", "lexical_match_len", "retrieval", "semantic_muted", "store_records",
                 "fill_bar")
NODE_COLUMNS = ("request", "method", "cycle", "node", "parent", "depth", "token", "text", "sources",
                "neighbours", "best_similarity", "placed_by", "price", "verdict", "committed_token", "committed")
NEIGHBOUR_COLUMNS = ("request", "method", "cycle", "neighbour", "similarity", "agreement", "from_request", "position",
                     "proposed", "proposed_tokens", "withheld_tokens", "n_nodes", "n_accepted", "why_no_node",
                     "left_out", "right_for")


def _verdict(cycle: CycleTrace, i: int, depth: int, accepted: set[int]) -> str:
    if i in accepted:
        return "accepted" if depth <= committed_drafts(cycle) else "accepted past the end"
    if cycle.parents[i] not in accepted:
        return "never reached"
    sampled = bool(cycle.decided_prob) and i < len(cycle.decided_prob)
    return "not tried" if sampled and cycle.decided_prob[i] is None else "rejected"


def cycle_rows(traces: Iterable[RequestTrace]) -> Iterator[dict]:
    """Every row of ``cycles.csv``: each trace's cycles in order."""
    for tr in traces:
        for c in tr.cycles:
            drafts, bonus = max(len(c.accepted) - 1, 0), bonus_committed(c)
            yield {"request": tr.request_id, "method": tr.method, "cycle": c.cycle,
                   "generated_before": c.generated_before, "n_nodes": max(c.n_nodes - 1, 0), "n_accepted": drafts,
                   "n_committed": len(c.committed),
                   "bonus_token": c.bonus if bonus else None,
                   "bonus": _text(c.committed_text, len(c.committed) - 1) if bonus else None,
                   "stop": c.stop, "lexical_match_len": c.lexical_match_len, "retrieval": c.retrieval,
                   "semantic_muted": c.semantic_muted, "store_records": c.store_records, "fill_bar": c.fill_bar}


def _placed_by(cycle: CycleTrace, i: int) -> str:
    if cycle.fill_from is None:
        return ""
    return "exact-match head" if i < cycle.fill_from else "fill"


def cycle_node_rows(tr: RequestTrace, cycle: CycleTrace) -> Iterator[dict]:
    """The rows of ``nodes.csv`` for one cycle of ``tr`` (none for the prefill's)."""
    accepted = set(cycle.accepted)
    via: dict[int, list[int]] = {}
    for k, nb in enumerate(cycle.neighbours):
        for i in nb.walked_nodes:
            via.setdefault(i, []).append(k)
    depths = cycle.depths or depths_of(cycle.parents)          # (a trace written without text has none)
    for i in range(1, cycle.n_nodes):
        parent, depth = cycle.parents[i], depths[i]
        numbers = via.get(i, [])
        yield {"request": tr.request_id, "method": tr.method, "cycle": cycle.cycle, "node": i, "parent": parent,
               "depth": depth, "token": cycle.tokens[i], "text": _text(cycle.token_text, i),
               "sources": "+".join(cycle.sources[i]), "neighbours": ";".join(map(str, numbers)),
               "best_similarity": max((cycle.neighbours[k].similarity for k in numbers), default=None),
               "placed_by": _placed_by(cycle, i), "price": cycle.prices[i] if cycle.prices else None,
               "verdict": _verdict(cycle, i, depth, accepted), **_committed(cycle, depth, parent in accepted)}


def _text(texts: list[str], i: int) -> str | None:
    return texts[i] if i < len(texts) else None


def _committed(cycle: CycleTrace, depth: int, reached: bool) -> dict:
    """The token committed at a node's place, and its text: where its parent was accepted and the
    output went on that far."""
    j = depth - 1
    if not reached or j >= len(cycle.committed):
        return {"committed_token": None, "committed": None}
    return {"committed_token": cycle.committed[j], "committed": _text(cycle.committed_text, j)}


def node_rows(traces: Iterable[RequestTrace]) -> Iterator[dict]:
    """Every row of ``nodes.csv``: each trace's cycles in order."""
    for tr in traces:
        for cycle in tr.cycles:
            yield from cycle_node_rows(tr, cycle)


def neighbour_rows(traces: Iterable[RequestTrace]) -> Iterator[dict]:
    """Every row of ``neighbours.csv``: each trace's cycles in order, each cycle's neighbours in order."""
    for tr in traces:
        for cycle in tr.cycles:
            truth = cycle_truth(cycle, tr.output_ids)
            for k, nb in enumerate(cycle.neighbours):
                yield {"request": tr.request_id, "method": tr.method, "cycle": cycle.cycle, "neighbour": k,
                       "similarity": nb.similarity, "agreement": nb.agreement, "from_request": nb.request_id,
                       "position": nb.position, "proposed": "".join(nb.proposed_text),
                       "proposed_tokens": len(nb.proposed),
                       "withheld_tokens": None if nb.withheld is None else len(nb.withheld),
                       "n_nodes": len(nb.walked_nodes), "n_accepted": nb.accepted, "why_no_node": nb.why_no_node,
                       "left_out": nb.left_out, "right_for": None if truth is None else right_run(nb, truth)}


def write_rows(rows: Iterable[dict], columns: tuple[str, ...], path: str | Path) -> Path:
    """``rows`` as a CSV file with ``columns`` (None is an empty cell); returns the path."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")   # as the text's own line breaks
        w.writeheader()
        w.writerows(rows)
    return path


TABLES = ("cycles.csv", "nodes.csv", "neighbours.csv")


def write_tables(traces: list[RequestTrace], folder: str | Path, names: tuple[str, str, str] = TABLES) -> list[Path]:
    """``cycles.csv``, ``nodes.csv`` and ``neighbours.csv`` of ``traces`` in ``folder`` (made if
    missing), under ``names``; returns the three paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [write_rows(rows(traces), columns, folder / name) for rows, columns, name in zip(
        (cycle_rows, node_rows, neighbour_rows), (CYCLE_COLUMNS, NODE_COLUMNS, NEIGHBOUR_COLUMNS), names)]
