"""Imports point one way (style.md §1): no import circle between benchflow's modules, and no
edge from a lower layer of `design.md` up to a higher one. Function-local imports count (a
local import that dodges a circle marks a misplaced dependency); imports under
`if TYPE_CHECKING:` do not (they never run)."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import benchflow

PACKAGE = Path(benchflow.__file__).resolve().parent

# Top to bottom: a unit (a subpackage or a top-level module of benchflow) may import units in
# lower layers and its own modules, never a unit of its own layer or of a higher one.
LAYERS: list[set[str]] = [
    {"cli"},
    {"view", "train", "hosted"},
    {"study", "qa"},
    {"job"},
    {"traces", "telemetry"},
    {"rollout"},
    {"users"},
    {"verify"},
    {"agents"},
    {"acp"},
    {"trajectory"},
    {"model_server"},
    {"models", "roles", "steps"},
    {"task"},
    {"config"},
    {"tools"},
    {"sandbox", "skills", "tracing"},
    {"mcp", "_config_files", "_lenient", "bounds", "paths", "trace_ids"},
    {"_models", "_extras", "settings", "_suggest", "_version", "_service"},
    {"errors"},
]


def module_files() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("benchflow", *path.relative_to(PACKAGE).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool,
             mods: dict[str, Path]) -> list[str]:
    def longest(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    if isinstance(node, ast.Import):
        return [t for a in node.names if (t := longest(a.name))]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_pkg else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    out = []
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        target = submodule if submodule in mods else longest(base)
        if target:
            out.append(target)
    return out


@functools.cache
def import_graph() -> dict[str, dict[str, int]]:
    """module -> {imported benchflow module: line}."""
    mods = module_files()
    graph: dict[str, dict[str, int]] = defaultdict(dict)

    for module, path in mods.items():
        is_pkg = path.name == "__init__.py"

        def visit(node: ast.AST) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    for other in child.orelse:
                        visit_node(other)
                    continue
                visit_node(child)

        def visit_node(node: ast.AST) -> None:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(node, module, is_pkg, mods):
                    if target != module and target.startswith("benchflow"):
                        graph[module].setdefault(target, node.lineno)
            else:
                visit(node)

        visit(ast.parse(path.read_text(), str(path)))
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(set(graph) | {t for ts in graph.values() for t in ts}):
        if v not in index:
            strongconnect(v)
    return found


def unit(module: str) -> str:
    return module.split(".")[1] if module != "benchflow" else "benchflow"


def test_the_graph_sees_imports() -> None:
    graph = import_graph()
    assert "benchflow.errors" in graph["benchflow.config"]
    assert "benchflow.rollout.rollout" in graph["benchflow.job.job"]  # a function-local one


def test_no_import_circle() -> None:
    graph = import_graph()
    found = cycles(graph)
    described = [
        " ; ".join(f"{a} -> {b} (line {graph[a][b]})" for a in c for b in graph[a] if b in c)
        for c in found
    ]
    assert not found, "import circles:\n" + "\n".join(described)


def test_every_unit_has_a_layer() -> None:
    units = {unit(m) for m in module_files()} - {"benchflow"}
    layered = set().union(*LAYERS)
    assert units <= layered, f"add these to LAYERS: {sorted(units - layered)}"
    assert layered <= units, f"gone from benchflow/: {sorted(layered - units)}"


def test_no_back_edge() -> None:
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    bad = []
    for module, targets in import_graph().items():
        for target, line in targets.items():
            a, b = unit(module), unit(target)
            if a == b or "benchflow" in (a, b):
                continue
            if rank[b] <= rank[a]:
                bad.append(f"{module} -> {target} (line {line})")
    assert not bad, "imports up or across a layer:\n" + "\n".join(sorted(bad))


def test_the_package_itself_is_not_imported() -> None:
    """`import benchflow` from inside benchflow closes a circle through the lazy public API."""
    bad = [f"{m} (line {ts['benchflow']})" for m, ts in import_graph().items()
           if "benchflow" in ts and m != "benchflow"]
    assert not bad, bad


def test_backend_neutral_sandbox_modules_import_no_sdk() -> None:
    """Image helpers and the cloud backends' modules load without the Docker SDK (and the
    cloud SDKs load only when a sandbox is made)."""
    import subprocess
    import sys

    modules = ["benchflow.sandbox.images", "benchflow.sandbox.cloud_sandbox",
               "benchflow.sandbox.daytona.sandbox", "benchflow.sandbox.modal.sandbox"]
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(' '.join(k for k in ('docker', 'daytona', 'modal') if k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == []


def test_only_the_sandbox_package_imports_the_docker_backend() -> None:
    """Nothing outside `benchflow/sandbox/` knows which backend runs (design.md)."""
    bad = [f"{m} -> {t} (line {line})" for m, ts in import_graph().items()
           for t, line in ts.items()
           if t.startswith("benchflow.sandbox.docker") and not m.startswith("benchflow.sandbox")]
    assert not bad, bad
