"""The three layers import one way: nets at the bottom, backends above it,
compare (the harness) on top; only compare/errors.py is imported from every
layer.  Read from the source with ast, so a stray import fails here."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED_UP = {"compare.errors"}
# a layer may import only the layers under it (and the errors module)
BELOW = {"nets": set(), "backends": {"nets", "kernels"}, "kernels": set()}
PROJECT = {"nets", "backends", "compare", "kernels"}


def _imports(path: Path, package: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.add(package)   # relative: inside its own package
    return names


@pytest.mark.parametrize("layer", sorted(BELOW))
def test_no_layer_imports_one_above_it(layer):
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for name in _imports(path, layer):
            top = name.split(".")[0]
            if top in PROJECT and top != layer and top not in BELOW[layer] and name not in ALLOWED_UP:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_the_errors_module_imports_nothing_of_the_project():
    assert not {n.split(".")[0] for n in _imports(ROOT / "compare" / "errors.py", "compare")} & PROJECT
