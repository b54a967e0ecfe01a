"""Compare two trace files record by record: the check that a refactor changed no behaviour.

    python scripts/compare_traces.py BEFORE.jsonl AFTER.jsonl [--prefix]

Every request and cycle record must be equal, field by field, except wall-clock timings and
the fields a newer trace format adds (``version``, ``stop``, ``meta``'s seconds). ``--prefix``:
AFTER may hold fewer records (a run stopped early); the records it holds are compared with
BEFORE's first ones. Exit 0 when equal, 1 with the first differing records named.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys

IGNORE_REQUEST = {"version", "stop", "meta"}
IGNORE_CYCLE = {"timings", "stop"}


def records(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def differences(before: list[dict], after: list[dict]) -> list[str]:
    out = []
    for i, (x, y) in enumerate(zip(before, after), start=1):
        ignore = IGNORE_REQUEST if x.get("kind") == "request" else IGNORE_CYCLE
        keys = (set(x) | set(y)) - ignore
        bad = sorted(k for k in keys if x.get(k) != y.get(k))
        if bad:
            out.append(f"record {i} ({x.get('kind')} {x.get('request_id')} {x.get('method')}): {', '.join(bad)}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--prefix", action="store_true", help="AFTER may be a prefix of BEFORE")
    a = ap.parse_args(argv)
    before, after = records(a.before), records(a.after)
    if len(after) != len(before) and not (a.prefix and len(after) < len(before)):
        print(f"{len(before)} records before, {len(after)} after", file=sys.stderr)
        return 1
    diff = differences(before, after)
    n_req = sum(1 for r in after if r.get("kind") == "request")
    print(f"{len(after)} records ({n_req} request traces) compared, {len(diff)} differ")
    for d in diff[:5]:
        print("  " + d)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
