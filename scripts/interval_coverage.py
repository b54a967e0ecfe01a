"""How often the pooled ratio's 95% interval holds the whole run's ratio, for runs of fewer units.

    python scripts/interval_coverage.py runs/s41-w12/results.json oilbird goose --sizes 100,20,10,6,3

Treats the run's units (its conversations: :func:`oilbird.evaluation.intervals.unit_of`) as the
population: draws ``--trials`` runs of n units each (with replacement), computes each one's
interval by :func:`oilbird.evaluation.intervals.pooled_ratio` and counts how often it holds the
population's pooled ratio. Each unit's numbers stay those of the full run (its store had seen
the run's earlier conversations), so this checks the bootstrap's level, not the store's warming.
The reason ``intervals.MIN_UNITS`` exists (docs/results.md, "Figures that print, and the targets'
intervals").
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird.evaluation.intervals import pooled_ratio, unit_of  # noqa: E402


def coverage(results: dict, a: str, b: str, size: int, trials: int, seed: int = 1) -> float:
    """The share of ``trials`` runs of ``size`` units drawn from ``results`` whose interval holds
    the full run's ratio (the intervals' own minimum of units is lifted: this measures it)."""
    replay = bool(results.get("replay"))
    whole = pooled_ratio(results, a, b, seed=0)["ratio"]
    by_unit: dict[str, dict[str, list]] = {}
    for m in (a, b):
        for row in results["methods"][m]["per_request"]:
            by_unit.setdefault(unit_of(row, replay), {a: [], b: []})[m].append(row)
    units = sorted(by_unit)
    rng, held, counted = np.random.default_rng(seed), 0, 0
    for t in range(trials):
        picked = rng.integers(0, len(units), size=size)
        run = {"replay": results.get("replay"), "methods": {m: {"per_request": [
            {**row, "request": f"{k}:{row['request']}", "unit": f"{k}:{units[u]}"}
            for k, u in enumerate(picked) for row in by_unit[units[u]][m]]} for m in (a, b)}}
        r = pooled_ratio(run, a, b, seed=t, min_units=1)
        if r is None or r["low"] is None:
            continue
        counted += 1
        held += r["low"] <= whole <= r["high"]
    return held / counted if counted else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a results.json of bench or replay")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--sizes", default="100,20,10,6,3", help="units per drawn run, comma-separated")
    ap.add_argument("--trials", type=int, default=400)
    args = ap.parse_args(argv)
    res = json.loads(Path(args.results).read_text(encoding="utf-8"))
    for n in (int(x) for x in args.sizes.split(",")):
        print(f"{n:5d} units: the 95% interval held the whole run's ratio in "
              f"{100 * coverage(res, args.a, args.b, n, args.trials):.0f}% of {args.trials} drawn runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
