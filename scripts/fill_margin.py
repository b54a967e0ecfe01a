"""Where the expected fill cut a retrieved neighbour's chain, was the token it left out right, and
what had the fill priced it at? (docs/results.md, "The fill's prices at the cut").

    python -m oilbird replay --data agent-transcripts --limit 20 --methods oilbird --cache runs/tcache \\
        --traces --out runs/margin20 --force
    python scripts/fill_margin.py runs/margin20/traces.jsonl

Reads a trace file whose cycles recorded the fill's prices (``CycleTrace.prices``,
``CycleTrace.fill_bar``, ``Neighbour.left_out``: traces written since the thirty-ninth session).
Every neighbour whose chain the fill cut (it left a token out) is one row: its next token is
*right* where the record's continuation equals the output past the chain's nodes in the tree
(:func:`oilbird.trace.right_run` against :func:`oilbird.trace.cycle_truth`). The table compares
the prices of right and wrong next tokens, against the bar each cycle's fill drew (the last node
it added), and gives the AUC of the price as a test of right against wrong: how well what the
fill knew at the cut told the two apart. The *rate* is the price over its parent's: the chance the
fill's cell gave the token once its chain so far was accepted, which every row's was (a chain
rejected inside the tree lost nothing to the cut and is left out), so the share of right tokens
is what those rates should average if the cells are calibrated. Then every drafted node, by who
proposed it and its price (the chance the fill gave its whole path), against how often the verifier
(or the recording) accepted it: the prices' calibration. Last, the nodes of the key alone whose
parent was accepted, by whether a node of another source (a token the key did not propose) stood
under the same parent, against the rate their cell gave them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird.trace import cycle_truth, load_traces, right_run  # noqa: E402

PRICE_EDGES = (0.05, 0.1, 0.2, 0.4, 0.7)    # the drafted nodes, binned by price


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


KINDS = ("the key alone", "the key and others", "without the key")


def kind(sources) -> str:
    """A node's proposers, as the calibration table groups them."""
    return KINDS[0] if list(sources) == ["semantic"] else KINDS[1] if "semantic" in sources else KINDS[2]


def margins(traces) -> dict:
    """The rows (right / wrong next token, its price, the cycle's bar) and the fill's nodes by price."""
    right, wrong = [], []
    nodes = {}                                   # (kind, price bin) -> [nodes, sum of prices, accepted]
    rivals = {}                                  # (rival?, rate >= 0.3?) -> [tested, sum of rates, accepted]
    for tr in traces:
        for c in tr.cycles:
            truth = cycle_truth(c, tr.output_ids)
            if not c.prices or truth is None:
                continue
            acc = set(c.accepted)
            for i in range(1, len(c.tokens)):
                seen = nodes.setdefault((kind(c.sources[i]), sum(c.prices[i] >= e for e in PRICE_EDGES)), [0, 0.0, 0])
                seen[0] += 1
                seen[1] += c.prices[i]
                seen[2] += i in acc
                par = c.parents[i]
                if kind(c.sources[i]) == KINDS[0] and par in acc and c.prices[par] > 0:
                    rate = c.prices[i] / c.prices[par]
                    rival = any(c.parents[j] == par and j != i and kind(c.sources[j]) != KINDS[0]
                                for j in range(1, len(c.tokens)))
                    got = rivals.setdefault((rival, rate >= 0.3), [0, 0.0, 0])
                    got[0] += 1
                    got[1] += rate
                    got[2] += i in acc
            for nb in c.neighbours:
                if nb.left_out is None or c.fill_bar is None:
                    continue
                k = len(nb.walked_nodes)
                if nb.accepted < k:              # its chain was rejected inside the tree: the cut cost nothing
                    continue
                parent = c.prices[nb.walked_nodes[-1]] if k else 1.0       # (its chain hangs below the root)
                rate = nb.left_out / parent if parent > 0 else 0.0
                (right if right_run(nb, truth) > k else wrong).append((nb.left_out, c.fill_bar, rate))
    return {"right": right, "wrong": wrong, "nodes": nodes, "rivals": rivals}


def table(m: dict) -> list[str]:
    lines = ["| next token left out | neighbours | median price | median bar | price >= bar / 2 | mean rate |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name in ("right", "wrong"):
        rows = m[name]
        if not rows:
            lines.append(f"| {name} | 0 | - | - | - | - |")
            continue
        p, bar, rate = np.array(rows).T
        lines.append(f"| {name} | {len(rows):,} | {np.median(p):.3f} | {np.median(bar):.3f} | "
                     f"{np.mean(p >= bar / 2):.1%} | {rate.mean():.3f} |")
    every = m["right"] + m["wrong"]
    if every:
        lines += ["", f"right: {len(m['right']) / len(every):.1%} of the tokens left out; the fill's rate for them "
                      f"(price / its parent's) said {np.mean([r for *_, r in every]):.1%} on average"]
    for what, col in (("price", 0), ("rate", 2)):
        a = auc([r[col] for r in m["right"]], [r[col] for r in m["wrong"]])
        lines.append(f"AUC of the {what}, right against wrong: {'-' if a is None else f'{a:.3f}'}")
    lines += ["", "| every drafted node: proposed by | priced | nodes | mean price | accepted |",
              "| --- | --- | ---: | ---: | ---: |"]
    edges = ("0",) + tuple(str(e) for e in PRICE_EDGES)
    for k, b in sorted(m["nodes"], key=lambda kb: (KINDS.index(kb[0]), kb[1])):
        n, total, hit = m["nodes"][(k, b)]
        span = f">= {edges[b]}" if b == len(PRICE_EDGES) else f"{edges[b]}-{edges[b + 1]}"
        lines.append(f"| {k} | {span} | {n:,} | {total / n:.3f} | {hit / n:.3f} |")
    lines += ["", "| tested nodes of the key alone | its cell's rate | nodes | mean rate | accepted |",
              "| --- | --- | ---: | ---: | ---: |"]
    for (rival, high), (n, total, hit) in sorted(m["rivals"].items()):
        who = "another source offered another token beside it" if rival else "no other source's token beside it"
        lines.append(f"| {who} | {'>= 0.3' if high else '< 0.3'} | {n:,} | {total / n:.3f} | {hit / n:.3f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", help="a trace file (replay --traces, bench --traces) written with the fill's prices")
    a = ap.parse_args(argv)
    m = margins(load_traces(a.traces))
    if not m["right"] and not m["wrong"] and not m["nodes"]:
        print(f"{a.traces}: no cycle recorded the fill's prices (a reserved fill, or a trace older than them)",
              file=sys.stderr)
        return 1
    print("\n".join(table(m)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
