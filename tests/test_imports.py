"""The house rules of the code base, checked on its imports (module level and inside
functions alike): no import cycle between modules or between packages (imports for type
checkers only included), the layers import downward only, Optuna's internals only through
``vtatune.tuning.optuna_compat``, public modules declare ``__all__``, and tests and scripts
use public names."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simulator", "search_spaces", "vtatune")

#: Whitebox tests that reach a private module of the package their folder mirrors, each to
#: switch off or record one private helper of the code under test.
WHITEBOX = {
    # the cache's pruning and its layout on disk
    "tests/deploy/test_cpu_build.py": {"vtatune.deploy._cpu_build",
                                       "vtatune.deploy.runtime._tvm"},
    "tests/lowering/test_lowering.py": {"vtatune.lowering._rules"},
    "tests/search_spaces/test_search_spaces.py": {"vtatune.lowering._plan",
                                                  "vtatune.lowering._rules"},
    "tests/lowering/test_lowering_speed_equivalence.py": {"vtatune.lowering._emit",
                                                          "vtatune.lowering._skeleton"},
    # TVM's build failing, and a tensor of no static shape: no small model gives either
    "tests/deploy/test_quantizers.py": {"vtatune.deploy._match"},
    # the inner search replaced, to count the designs the outer one tunes without tuning
    "tests/design/test_design.py": {"vtatune.design._search"},
    # the first run's helper process: started or not, made to fail, the scoring it stands in
    "tests/tuning/test_warmup.py": {"vtatune.tuning._search", "vtatune.tuning._study",
                                    "vtatune.tuning._warmup"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


MODULES = _modules()


def _imports(path: Path, typing: bool = False) -> set[str]:
    """Every module ``path`` imports (absolute names), wherever the import statement is;
    with ``typing``, those under ``if TYPE_CHECKING:`` too."""
    name = _module_name(path) if path.is_relative_to(ROOT / "vtatune") or any(
        path.is_relative_to(ROOT / p) for p in PACKAGES) else ""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only and not typing:  # not imported at run time
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # ``from pkg import submodule`` imports the submodule (its package is a parent)
            subs = {f"{module}.{a.name}" for a in node.names} & MODULES.keys()
            out.update(subs)
            if len(subs) < len(node.names):
                out.add(module)
    return out


def _graph(typing: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports. ``typing``: with the imports made for type
    checkers only, but for the package face's (``vtatune/__init__`` names its lazily loaded
    exports so; it imports nothing at run time, as a test below holds it to)."""
    return {m: {t for t in _imports(p, typing and m != "vtatune") if t in MODULES and t != m}
            for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _package(module: str) -> str:
    """The unit of layering: ``simulator``, ``search_spaces``, or a subpackage or top-level
    module of vtatune (``vtatune.tuning``, ``vtatune.errors``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "vtatune" and len(parts) > 1 else parts[0]


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    """Nor one that an ``if TYPE_CHECKING:`` import hides from the interpreter: two modules
    that each need the other's names to be read are one module split in two."""
    assert _cycles(_graph(typing=True)) == []


def test_a_cycle_behind_type_checking_is_a_cycle(tmp_path):
    (tmp_path / "a.py").write_text("from pkg.b import g\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from pkg.a import f\n")
    a, b = (_imports(tmp_path / f"{m}.py", typing=True) for m in "ab")
    assert (a, b) == ({"pkg.b"}, {"typing", "pkg.a"})
    assert _imports(tmp_path / "b.py") == {"typing"}  # what the interpreter imports
    assert _cycles({"pkg.a": a, "pkg.b": b - {"typing"}}) == [["pkg.a", "pkg.b"]]


def test_no_import_cycle_between_packages():
    edges: dict[str, set[str]] = defaultdict(set)
    for m, targets in _graph(typing=True).items():
        if m == "vtatune":
            continue  # the lazy face: it imports nothing (next test)
        for t in targets:
            if _package(t) != _package(m) and t != "vtatune":
                edges[_package(m)].add(_package(t))
    assert _cycles(edges) == []


def test_the_package_face_imports_nothing_of_its_own():
    """``vtatune/__init__`` loads its names on first use (search_spaces sits between
    vtatune's layers), so importing any vtatune module imports no other one."""
    tree = ast.parse((ROOT / "vtatune" / "__init__.py").read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all((n.module or "") in ("__future__", "importlib", "typing") for n in top
               if isinstance(n, ast.ImportFrom)) and all(
        a.name == "importlib" for n in top if isinstance(n, ast.Import) for a in n.names)


@pytest.mark.parametrize("lower, upper", [
    ("simulator", ("vtatune", "search_spaces", "optuna", "tvm")),
    ("search_spaces", ("optuna", "tvm", "vtatune.tuning", "vtatune.scoring", "vtatune.records",
                       "vtatune.networks", "vtatune.design", "vtatune.builds",
                       "vtatune.autotvm", "vtatune.cli")),
    ("vtatune.workloads", ("search_spaces", "vtatune.lowering", "vtatune.scoring",
                           "vtatune.tuning", "optuna")),
    ("vtatune.lowering", ("search_spaces", "vtatune.scoring", "vtatune.tuning", "optuna")),
    ("vtatune.scoring", ("vtatune.records", "vtatune.tuning", "optuna")),
    ("vtatune.records", ("vtatune.tuning", "vtatune.networks", "optuna")),
    ("vtatune.networks", ("vtatune.deploy", "vtatune.cli")),
    ("vtatune.builds", ("vtatune.deploy", "vtatune.cli")),
    ("vtatune.deploy", ("vtatune.design", "vtatune.cli")),
    # a board's part: runs a built or loaded model with numpy and TVM's runtime (tvm_ffi),
    # none of the compiler (vtatune's or TVM's: the tvm package loads its compiler)
    ("vtatune.deploy.runtime", (
        "vtatune.lowering", "vtatune.builds", "vtatune.tuning", "vtatune.records",
        "vtatune.scoring", "vtatune.networks", "vtatune.autotvm", "search_spaces", "optuna",
        "numba", "onnx", "onnxruntime", "tvm")),
])
def test_layers_import_downward_only(lower, upper):
    bad = sorted((m, t) for m, p in MODULES.items() if m == lower or m.startswith(lower + ".")
                 for t in _imports(p) if any(t == u or t.startswith(u + ".") for u in upper))
    assert bad == []


def test_the_runtime_imports_nothing_of_the_compiler():
    """A board's part stands alone, as TVM's runtime never imports its compiler: no module
    of ``vtatune.deploy.runtime`` imports a module of ``vtatune.deploy`` outside the runtime
    (what both need, the errors and the requantization, lives in the runtime)."""
    runtime = "vtatune.deploy.runtime"
    bad = sorted((m, t) for m, p in MODULES.items()
                 if m == runtime or m.startswith(runtime + ".")
                 for t in _imports(p, typing=True)
                 if t.startswith("vtatune.deploy.") and not (t == runtime
                                                             or t.startswith(runtime + ".")))
    assert bad == []
    users = {t for m, p in MODULES.items() if m.startswith(runtime + ".") for t in _imports(p)}
    assert {"vtatune.deploy.runtime._errors", "vtatune.deploy.runtime._requantize"} <= users


def _import_time_modules(path: Path) -> set[str]:
    """The modules ``path`` imports when it is imported: every import statement outside a
    function body (a class body runs at import time too)."""
    found: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and not child.level:
                found.add(child.module or "")
            walk(child)

    walk(ast.parse(path.read_text()))
    return found


def _is_tvm(module: str) -> bool:
    return module == "tvm" or module.startswith("tvm.")


def test_tvm_is_imported_by_the_deploy_package_only_and_lazily():
    """Apache TVM is an extra: only ``vtatune.deploy`` imports it, and only inside the
    functions that need it, so ``import vtatune`` (and ``import vtatune.deploy``) never
    does."""
    outside = [m for m, p in MODULES.items() if not m.startswith("vtatune.deploy")
               and any(_is_tvm(t) for t in _imports(p))]
    assert outside == []
    eager = [m for m, p in MODULES.items() if any(_is_tvm(t) for t in _import_time_modules(p))]
    assert eager == []
    users = [m for m, p in MODULES.items() if any(_is_tvm(t) for t in _imports(p))]
    assert "vtatune.deploy._tvm" in users  # the rule checks something


def test_importing_vtatune_imports_no_tvm():
    import subprocess
    import sys

    code = ("import sys, vtatune, vtatune.deploy, vtatune.cli; "
            "print(sorted(m for m in sys.modules if m == 'tvm' or m.startswith('tvm.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_optuna_internals_only_in_the_compat_module():
    bad = sorted((m, t) for m, p in MODULES.items() if m != "vtatune.tuning.optuna_compat"
                 for t in _imports(p)
                 if t.startswith("optuna.") and any(s.startswith("_") for s in t.split(".")))
    assert bad == []


def test_public_modules_declare_all():
    def declares_all(path: Path) -> bool:
        for n in ast.parse(path.read_text()).body:
            if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__"
                                                 for t in n.targets):
                return True
            if isinstance(n, ast.ImportFrom) and any(a.name == "__all__" for a in n.names):
                return True  # a shim re-exporting its target's
        return False

    missing = [m for m, p in MODULES.items()
               if not any(s.startswith("_") for s in m.split(".")) and not declares_all(p)]
    assert missing == []


def _private_imports(path: Path) -> set[str]:
    """Private modules of ours that ``path`` imports (outside their own package)."""
    return {t for t in _imports(path) if t in MODULES
            and any(s.startswith("_") and s != "__init__" for s in t.split("."))}


def test_tests_and_scripts_use_public_names():
    files = [*(ROOT / "tests").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    found = {str(f.relative_to(ROOT)): _private_imports(f) for f in files}
    bad = {f: sorted(mods - WHITEBOX.get(f, set())) for f, mods in found.items()
           if mods - WHITEBOX.get(f, set())}
    assert bad == {}
    # and the whitebox list holds nothing stale
    assert {f: found.get(f) for f in WHITEBOX} == WHITEBOX


def test_no_module_uses_an_old_import_path():
    """``vtatune.analysis`` (the old path of ``vtatune.records.analysis``) is gone; nothing
    imports it."""
    bad = [m for m, p in MODULES.items() if "vtatune.analysis" in _imports(p)]
    assert bad == []


def test_the_deprecated_analysis_shim_is_gone():
    """Issue 41: one-line re-export modules go unless a public path needs them; the analysis
    tables live at ``vtatune.records.analysis`` only."""
    import importlib.util

    assert importlib.util.find_spec("vtatune.analysis") is None
    assert importlib.util.find_spec("vtatune.records.analysis") is not None
