"""The paper's own pairs (section 6.2): a weak host handed the cross-request pool, with and without the key.

    python scripts/paper_pairs.py replay --data agent-transcripts --cache runs/tcache100 \\
        --methods pld+pool,pld+pool+sem,recycling+pool,recycling+pool+sem,goose,oilbird-plain-suffix:reserved \\
        --out runs/s26-pool12
    python scripts/per_conversation.py runs/s26-pool12/results.json pld+pool+sem pld+pool \\
        recycling+pool+sem recycling+pool oilbird-plain-suffix:reserved goose

The paper measures the key's worth as controlled pairs. In section 6.1 the deployed system
against the same system with the semantic entry budget zeroed (+6.2% of tau on API-Bank). In
section 6.2 three weak training-free drafters, each "already holding the same cross-request pool
under its own exact-match key", with the key added (+23.6% on prompt lookup, +29.4% on Token
Recycling), the pool alone being worth +126% and +94% to them. Here the pool under an exact key
is the suffix source (the store's token index), so this script adds, for one run, four presets
with the paper's reserved fill (their names do not start with ``oilbird``):

| preset                | sources                    |
|-----------------------|----------------------------|
| ``pld+pool``          | suffix, pld                |
| ``pld+pool+sem``      | suffix, pld, semantic      |
| ``recycling+pool``    | suffix, recycling          |
| ``recycling+pool+sem``| suffix, recycling, semantic|

Beside them the registry's own ``pld`` / ``pld+sem`` and ``recycling`` / ``recycling+sem`` (the
key over a host without the pool) and ``goose`` / ``oilbird-plain-suffix:reserved`` (section
6.1's pair: GOOSE's tree with and without the key, reserved fill, no state-weighted suffix).
That last pair adds the rejected-branch pool with the key, as the paper's system has it; the
``+sem`` presets add the key alone. In fast replay the pool proposes nothing (it needs the
model's outputs at rejected nodes), so there the two mean the same; live they differ.
Any ``python -m oilbird`` command line works after the script name (``bench`` decodes live and
audits every request). The library is unchanged. Results: docs/results.md ("The paper's own
pairs on recorded agent traffic").
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oilbird import methods as M  # noqa: E402

PAIRS = {
    "pld+pool": ("suffix", "pld"),
    "pld+pool+sem": ("suffix", "pld", "semantic"),
    "recycling+pool": ("suffix", "recycling"),
    "recycling+pool+sem": ("suffix", "recycling", "semantic"),
}


def _install() -> None:
    M.PRESETS.update(PAIRS)


def main(argv: list[str]) -> int:
    from oilbird.__main__ import main as oilbird_main
    if not argv:
        print("usage: python scripts/paper_pairs.py COMMAND [OPTIONS] (any python -m oilbird command "
              "line), e.g.\n" + "\n".join(__doc__.strip().splitlines()[2:5]), file=sys.stderr)
        return 2
    _install()
    return oilbird_main(list(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
