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


OUTER = ("oilbird.evaluation", "oilbird.data", "oilbird.serving", "oilbird.__main__", "oilbird.cli_options")


def _is_outer(mod: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in OUTER)


def test_the_core_imports_no_evaluation_data_or_serving_code():
    """The decoder core (tree, verifier, decoding, drafter, sources, store, trace, methods,
    presets, model) reads alone: it never imports, even lazily, the packages built on it."""
    g = _graph()
    core = [m for m in g if m.startswith("oilbird") and not _is_outer(m)]
    assert "oilbird.decoding" in core and "oilbird.sources.semantic" in core
    bad = [(m, t) for m in core for t in g.successors(m) if _is_outer(t)]
    assert not bad, f"core modules importing outer packages: {bad}"
    # and the outer packages really are used the other way round
    assert any(_is_outer(m) and not _is_outer(t) for m, t in g.edges if m.startswith("oilbird"))


def test_no_module_is_over_600_lines():
    long = {str(f.relative_to(ROOT)): n for pkg in ("oilbird", "workbench")
            for f in (ROOT / pkg).rglob("*.py") if (n := len(f.read_text().splitlines())) > 600}
    assert not long, f"split these modules: {long}"
