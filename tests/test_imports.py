"""The package's import graph has no circles (issue 19): a module never needs, even lazily, one
that needs it back."""
import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for pkg in ("oilbird", "workbench"):
        for f in (ROOT / pkg).rglob("*.py"):
            mod = ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            g.add_node(mod)
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom):
                    base = mod.split(".")[: -node.level] if node.level else []
                    if node.level and f.name == "__init__.py":
                        base = mod.split(".")[: len(mod.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                    names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                for t in names:
                    if t.split(".")[0] in ("oilbird", "workbench"):
                        g.add_edge(mod, t)
    return g


def test_no_import_circles():
    g = _graph()
    assert "oilbird.methods" in g and "workbench.figures" in g
    cycles = [c for c in nx.simple_cycles(g) if len(c) > 1]
    assert not cycles, f"import circles: {cycles[:3]}"
