"""The project's packages import one way: nets at the bottom (its errors
module, nets/errors.py, is what every layer raises), backends above it,
compare (the harness) on top; kernels is only imported.  And no module
imports, through others, itself.  Read from the source with ast (imports
inside functions count too), so a stray import fails here."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOOR = {"nets": 0, "backends": 1, "compare": 2}   # a package may import its own floor and those under it
ONLY_IMPORTED = {"kernels"}                        # imports nothing of the project
PACKAGES = set(FLOOR) | ONLY_IMPORTED


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in sorted(PACKAGES) for p in sorted((ROOT / pkg).rglob("*.py"))}


MODULES = _modules()


def _resolve(base: str, names: list[str]) -> set[str]:
    """`from base import names`: each name that is a module of ours, else base itself."""
    found = {f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES}
    return found if len(found) == len(names) else found | {base}


def _imports(name: str) -> set[str]:
    """The project modules that module `name` imports."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            out |= _resolve(base, [a.name for a in node.names])
    return {m for m in out if m.split(".")[0] in PACKAGES}


GRAPH = {name: _imports(name) for name in MODULES}


def test_the_graph_was_read():
    assert "nets.errors" in GRAPH and "compare.cli" in GRAPH
    assert "nets.errors" in GRAPH["backends.opencl.runtime"]   # a module that raises UserError


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_package_imports_one_above_it(package):
    bad = []
    for name, targets in GRAPH.items():
        if name.split(".")[0] != package:
            continue
        for target in sorted(targets):
            top = target.split(".")[0]
            if package in ONLY_IMPORTED and top != package:
                bad.append(f"{name} imports {target}: {package} imports nothing of the project")
            elif top in FLOOR and package in FLOOR and FLOOR[top] > FLOOR[package]:
                bad.append(f"{name} imports {target}, a floor above it")
    assert not bad, "\n".join(bad)


def test_the_errors_module_imports_nothing_of_the_project():
    assert GRAPH["nets.errors"] == set()


def test_no_module_imports_itself_through_others():
    """Depth-first search for a cycle; the first found is shown whole."""
    state: dict[str, int] = {}   # 1: on the path, 2: done

    def visit(name, path):
        state[name] = 1
        for target in sorted(GRAPH.get(name, ())):
            if target == name:
                continue   # a package's __init__ naming its own submodule list
            if state.get(target) == 1:
                return path + [name, target]
            if target not in state:
                found = visit(target, path + [name])
                if found:
                    return found
        state[name] = 2
        return None

    for name in sorted(GRAPH):
        if name not in state:
            cycle = visit(name, [])
            assert cycle is None, " -> ".join(cycle[cycle.index(cycle[-1]):])


def test_every_search_lives_in_tuning_and_no_backend_imports_one():
    """The backends read what a search chose through the store (backends/store/), never the search."""
    bad = [f"{name} imports {target}" for name, targets in GRAPH.items()
           if name.startswith("backends.") and not name.startswith("backends.tuning") for target in sorted(targets)
           if target == "backends.tuning" or target.startswith("backends.tuning.")]
    assert not bad, "\n".join(bad)
    assert not [n for n in MODULES if n.endswith(("_search", "_tune", "_beam_search")) and ".tuning." not in n]
