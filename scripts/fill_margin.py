"""What the expected fill took at its margin and what it left out of the key's chains, priced and
judged (docs/results.md, "The fill's prices at the cut").

    python -m oilbird replay --data agent-transcripts --limit 20 --methods oilbird --cache runs/tcache \\
        --traces --out runs/margin20 --force
    python scripts/fill_margin.py runs/margin20/traces.jsonl

Greedy or replayed traces (a sampled cycle is skipped: its verdict is no greedy truth). Reads a
trace file whose cycles recorded the fill's prices (``CycleTrace.prices``, ``fill_from``,
``fill_bar``, ``Neighbour.left_out``: traces written since the thirty-ninth session). A node's
*price* is the chance the fill gave its whole path of being accepted (the product of its cells'
rates); its *rate* is its price over its parent's, the chance given its parent is accepted.

1. The margin: the last node the fill took in each cycle (its bar), and the tokens it left out
   of the key's chains, each counted once per cycle, parent node and token however many
   neighbours proposed it; and, cycle by cycle, the bar's node against the best-priced of those
   tokens (the swap the fill declined). A token left out *would have been accepted* where its parent was
   accepted and it is the output's next token there (:func:`oilbird.trace.right_run` against
   :func:`oilbird.trace.cycle_truth`); drafting it would have committed one token more. The fill
   chose well where what it took was accepted at least as often as what it left out.
2. Those left-out tokens whose parent was accepted, by rate: how often the rate was right
   (a reliability table), and how well the rate tells right from wrong at each depth of the
   parent (AUC), among the left-out tokens alone (all priced below the fill's bar, a narrow range)
   and with the drafted nodes the key proposed (alone or with others) whose parent was accepted
   (every candidate of the key's that the verdict judged).
3. The nodes the fill chose (not the exact-match head's, placed before it), by who proposed them
   and their price, against how often they were accepted: the prices' calibration.
4. Of those, the key's own nodes whose parent was accepted, by whether another source's token stood
   under the same parent.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird.trace import cycle_truth, load_traces, right_run  # noqa: E402
from oilbird.tree import depths_of  # noqa: E402

PRICE_EDGES = (0.05, 0.1, 0.2, 0.4, 0.7)     # prices, binned
RATE_EDGES = (0.1, 0.2, 0.4, 0.6, 0.8)       # rates, binned
KINDS = ("the key alone", "the key and others", "without the key")


def auc(pos: list[float], neg: list[float]) -> float | None:
    """P(a random right token is priced above a random wrong one), ties counted half."""
    if not pos or not neg:
        return None
    allv = np.concatenate([pos, neg])
    order = allv.argsort(kind="mergesort")
    ranks = np.empty(len(allv))
    ranks[order] = np.arange(1, len(allv) + 1)
    for v in np.unique(allv):               # average ranks over ties
        idx = allv == v
        ranks[idx] = ranks[idx].mean()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def kind(sources) -> str:
    """A node's proposers, as the calibration table groups them (the key: the source named
    "semantic", the presets' retriever)."""
    return KINDS[0] if list(sources) == ["semantic"] else KINDS[1] if "semantic" in sources else KINDS[2]


def _bin(x: float, edges: tuple) -> int:
    return sum(x >= e for e in edges)


def _span(b: int, edges: tuple) -> str:
    low = ("0",) + tuple(str(e) for e in edges)
    return f">= {low[b]}" if b == len(edges) else f"{low[b]}-{low[b + 1]}"


def margins(traces) -> dict:
    """``bar``: (price, accepted) of each cycle's last node the fill took; ``left``: (price,
    accepted-had-it-been-drafted, rate, parent accepted, depth of its parent) of each distinct
    token the fill left out of the key's chains; ``nodes``: (kind, price bin) -> [nodes, sum of
    prices, accepted] over the nodes the fill chose; ``rivals``: (rival?, rate >= 0.3) -> [nodes,
    sum of rates, accepted] over the key's own chosen nodes whose parent was accepted;
    ``drafted``: (rate, accepted, depth of its parent) of every node the fill chose that the key
    proposed (alone or with others), parent accepted; ``swaps``: per cycle, (the bar's price,
    accepted, the best-priced token left out of the key's chains, accepted had it been drafted)."""
    bar, left, nodes, rivals, drafted, swaps = [], [], {}, {}, [], []
    for tr in traces:
        for c in tr.cycles:
            truth = cycle_truth(c, tr.output_ids)
            if not c.prices or c.fill_from is None or truth is None or c.decided_prob:
                continue                         # (a sampled cycle's verdict is no greedy truth)
            acc = set(c.accepted)
            depth = depths_of(c.parents)
            if c.fill_bar is not None:
                bar.append((c.prices[-1], len(c.tokens) - 1 in acc))
            for i in range(c.fill_from, len(c.tokens)):
                seen = nodes.setdefault((kind(c.sources[i]), _bin(c.prices[i], PRICE_EDGES)), [0, 0.0, 0])
                seen[0] += 1
                seen[1] += c.prices[i]
                seen[2] += i in acc
                par = c.parents[i]
                if kind(c.sources[i]) == KINDS[2] or par not in acc or c.prices[par] <= 0:
                    continue
                rate = c.prices[i] / c.prices[par]
                drafted.append((rate, i in acc, depth[par]))           # a candidate of the key's, judged
                if kind(c.sources[i]) == KINDS[0]:
                    rival = any(c.parents[j] == par and j != i and kind(c.sources[j]) != KINDS[0]
                                for j in range(1, len(c.tokens)))
                    got = rivals.setdefault((rival, rate >= 0.3), [0, 0.0, 0])
                    got[0] += 1
                    got[1] += rate
                    got[2] += i in acc
            if c.fill_bar is None:               # the fill added nothing: nothing was left out in a contest
                continue
            taken, best = set(), None
            for nb in c.neighbours:
                k = len(nb.walked_nodes)
                if nb.left_out is None or k >= len(nb.proposed):
                    continue
                parent = nb.walked_nodes[-1] if k else 0        # (the key's chains hang below the root)
                key = (parent, nb.proposed[k])
                if key in taken:
                    continue
                taken.add(key)
                up = parent in acc                  # (then so was the whole chain above it)
                rate = nb.left_out / c.prices[parent] if c.prices[parent] > 0 else 0.0
                left.append((nb.left_out, up and right_run(nb, truth) > k, rate, up, depth[parent]))
                if best is None or nb.left_out > best[0]:
                    best = left[-1][:2]
            if best is not None:                 # the swap the fill declined: its bar for the best of these
                swaps.append((c.prices[-1], len(c.tokens) - 1 in acc) + best)
    return {"bar": bar, "left": left, "nodes": nodes, "rivals": rivals, "drafted": drafted, "swaps": swaps}



def table(m: dict) -> list[str]:
    lines = ["| at the fill's margin | tokens | mean price | accepted (left out: had it been drafted) |",
             "| --- | ---: | ---: | ---: |"]
    for name, rows in (("the last node the fill took, per cycle", [(p, a) for p, a in m["bar"]]),
                       ("a token it left out of the key's chains", [(p, a) for p, a, *_ in m["left"]])):
        if rows:
            p, a = np.array(rows, dtype=float).T
            lines.append(f"| {name} | {len(rows):,} | {p.mean():.3f} | {a.mean():.3f} |")
    if m["swaps"]:
        sw = np.array(m["swaps"], dtype=float)
        lines += ["", "| in the same cycles | cycles | mean price | accepted (left out: had it been drafted) |",
                  "| --- | ---: | ---: | ---: |",
                  f"| the last node the fill took | {len(sw):,} | {sw[:, 0].mean():.3f} | {sw[:, 1].mean():.3f} |",
                  f"| the best-priced token it left out of the key's chains | {len(sw):,} | {sw[:, 2].mean():.3f} | "
                  f"{sw[:, 3].mean():.3f} |"]
    up = [(r, a, d) for _, a, r, ok, d in m["left"] if ok]
    if up:
        said = np.mean([r for r, *_ in up])
        lines += ["", f"Left out with their parent accepted: {len(up):,} tokens, "
                      f"{np.mean([a for _, a, _ in up]):.1%} right, their rates averaging {said:.1%}"]
    lines += ["", "| rate (its chance given its parent) | tokens | mean rate | right |", "| --- | ---: | ---: | ---: |"]
    for b in sorted({_bin(r, RATE_EDGES) for r, _, _ in up}):
        rows = np.array([(r, a) for r, a, _ in up if _bin(r, RATE_EDGES) == b], dtype=float)
        lines.append(f"| {_span(b, RATE_EDGES)} | {len(rows):,} | {rows[:, 0].mean():.3f} | {rows[:, 1].mean():.3f} |")
    every = up + m["drafted"]
    lines += ["", "| depth of its parent | left out: tokens | right | AUC of the rate | with the key's drafted "
                  "nodes: tokens | right | AUC of the rate |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for d in sorted({min(d, 4) for *_, d in every}):
        cells = []
        for rows in ([(r, a) for r, a, dd in up if min(dd, 4) == d], [(r, a) for r, a, dd in every if min(dd, 4) == d]):
            a = auc([r for r, ok in rows if ok], [r for r, ok in rows if not ok])
            cells += [f"{len(rows):,}", f"{np.mean([ok for _, ok in rows]):.1%}" if rows else "-",
                      "-" if a is None else f"{a:.3f}"]
        lines.append(f"| {d if d < 4 else '4 or more'} | " + " | ".join(cells) + " |")
    lines += ["", "| the fill's nodes: proposed by | priced | nodes | mean price | accepted |",
              "| --- | --- | ---: | ---: | ---: |"]
    for k, b in sorted(m["nodes"], key=lambda kb: (KINDS.index(kb[0]), kb[1])):
        n, total, hit = m["nodes"][(k, b)]
        lines.append(f"| {k} | {_span(b, PRICE_EDGES)} | {n:,} | {total / n:.3f} | {hit / n:.3f} |")
    lines += ["", "| the fill's nodes of the key alone, parent accepted | rate | nodes | mean rate | accepted |",
              "| --- | --- | ---: | ---: | ---: |"]
    for (rival, high), (n, total, hit) in sorted(m["rivals"].items()):
        who = "another source's token beside it" if rival else "no other source's token beside it"
        lines.append(f"| {who} | {'>= 0.3' if high else '< 0.3'} | {n:,} | {total / n:.3f} | {hit / n:.3f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", help="a trace file (replay --traces, bench --traces) written with the fill's prices")
    a = ap.parse_args(argv)
    m = margins(load_traces(a.traces))
    if not m["bar"] and not m["nodes"]:
        print(f"{a.traces}: no cycle recorded the fill's prices (a reserved fill, or a trace older than them)",
              file=sys.stderr)
        return 1
    print("\n".join(table(m)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
