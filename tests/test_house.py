"""The house rules, checked on the source itself: module and
function sizes, no private name imported across modules, Redis only behind service/eventlog/,
the web framework only in the HTTP packages (the learner and the worker load none), imports
pointing down only (service -> boosters -> learners)."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("boosters", "learners", "service")
#: the two research modules allowed past the module limit
LONG_MODULES = {"boosters/batch/bopl.py", "boosters/batch/sample_efficient.py",
                "boosters/online/template.py"}
MAX_MODULE_LINES = 500
#: benchmarks/ groups: their benchmarks are not named one by one in the README's Layout
GROUPS = {"paper", "speed", "load"}
MAX_FUNCTION_LINES = 80
#: modules that may import redis for types only (the API's lifespan and exception handlers)
REDIS_TYPE_USERS = {"service/api/lifespan.py", "service/api/errors.py"}
#: where FastAPI and Starlette may be imported at module level: the HTTP packages
HTTP_PACKAGES = ("service/api/", "service/personalizer/routes/", "service/personalizer/errors.py")
#: packages that import no FastAPI or Starlette at all, not even inside a function
NO_WEB_PACKAGES = ("service/models/",)
#: a package may import only the packages listed for it
ALLOWED_IMPORTS = {"learners": set(), "boosters": {"learners"}, "service": {"boosters", "learners"}}


def sources(packages=PACKAGES) -> list[Path]:
    return sorted(path for package in packages for path in (ROOT / package).rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def long_modules(paths) -> list[str]:
    found = []
    for path in paths:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES and relative(path) not in LONG_MODULES:
            found.append(f"{relative(path)}: {lines} lines")
    return found


def long_functions(paths) -> list[str]:
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{relative(path)}:{node.lineno} {node.name}: {lines} lines")
    return found


def _imported(tree, path):
    """(module, name) of every import in ``tree``, relative imports resolved."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package[: len(package) - node.level + 1]
                base = ".".join(prefix + ([base] if base else []))
            for alias in node.names:
                yield base, alias.name


def private_imports(paths) -> list[str]:
    """``from a.b import _c`` and imports of another package's private module."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for module, name in _imported(tree, path):
            last = module.rsplit(".", 1)[-1]
            private_name = name and name.startswith("_") and not name.startswith("__")
            private_module = last.startswith("_") and not last.startswith("__")
            if private_module and module.split(".")[0] in PACKAGES:
                owner = module.rsplit(".", 1)[0]
                if not module_name(path).startswith(owner):
                    found.append(f"{relative(path)}: imports private module {module}")
            if private_name and module.split(".")[0] in PACKAGES:
                found.append(f"{relative(path)}: imports {name} from {module}")
    return found


def redis_imports(paths) -> list[str]:
    found = []
    for path in paths:
        rel = relative(path)
        if rel.startswith("service/eventlog/") or rel in REDIS_TYPE_USERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for module, _ in _imported(tree, path):
            if module.split(".")[0] == "redis":
                found.append(f"{rel}: imports {module}")
    return found


def web_imports(paths) -> list[str]:
    """Module-level imports of FastAPI or Starlette outside :data:`HTTP_PACKAGES` (an import
    inside a function loads nothing until it runs)."""
    found = []
    for path in paths:
        rel = relative(path)
        if rel.startswith(HTTP_PACKAGES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{rel}: imports {name}" for name in names
                      if name.split(".")[0] in ("fastapi", "starlette")]
    return found


def lifecycle_web_imports(paths) -> list[str]:
    """Any import of FastAPI or Starlette, even inside a function, in :data:`NO_WEB_PACKAGES`
    (the model lifecycle raises domain errors; the HTTP packages answer them)."""
    found = []
    for path in paths:
        rel = relative(path)
        if not rel.startswith(NO_WEB_PACKAGES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{rel}: imports {module}" for module, _ in _imported(tree, path)
                  if module.split(".")[0] in ("fastapi", "starlette")]
    return found


def upward_imports(paths) -> list[str]:
    found = []
    for path in paths:
        own = relative(path).split("/")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for module, _ in _imported(tree, path):
            top = module.split(".")[0]
            if top in PACKAGES and top != own and top not in ALLOWED_IMPORTS[own]:
                found.append(f"{relative(path)}: imports {module}")
    return found


def _module_imports(paths) -> dict[str, set[str]]:
    """Module -> the project's modules its module-level imports run (a package's ``__init__``
    included: importing ``a.b.c`` runs ``a.b`` first)."""
    names = {module_name(path) for path in paths}
    graph = {}
    for path in paths:
        own = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = ast.Module([n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)], [])
        targets = set()
        for module, name in _imported(top, path):
            full = f"{module}.{name}" if name else module
            target = full if full in names else module
            parts = target.split(".")
            targets |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        graph[own] = {t for t in targets if t in names and not (own + ".").startswith(t + ".")}
    return graph


def import_cycles(paths) -> list[str]:
    """Cycles of module-level imports (each once, as ``a -> b -> a``)."""
    graph = _module_imports(paths)
    found, done = [], set()
    for start in sorted(graph):
        stack, path = [(start, iter(sorted(graph[start])))], [start]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                done.add(node)
                stack.pop()
                path.pop()
            elif child in path:
                cycle = path[path.index(child):]
                if min(cycle) == child:
                    found.append(" -> ".join([*cycle, child]))
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return sorted(set(found))


def test_the_checks_catch_what_they_forbid(tmp_path):
    package = tmp_path / "service"
    package.mkdir()
    module = package / "bad.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    module.write_text(
        "import redis\nfrom service.other import _hidden\nfrom service import _private\n"
        "from fastapi import FastAPI\n"
        f"def long():\n{body}\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        paths = [module]
        assert long_functions(paths) == ["service/bad.py:5 long: 81 lines"]
        assert web_imports(paths) == ["service/bad.py: imports fastapi"]
        assert lifecycle_web_imports(paths) == []
        lazy = package / "models" / "lazy.py"
        lazy.parent.mkdir()
        lazy.write_text("def answer():\n    from starlette.responses import Response\n")
        assert lifecycle_web_imports([lazy]) == [
            "service/models/lazy.py: imports starlette.responses"]
        (package / "a.py").write_text("from service import b\n")
        (package / "b.py").write_text("import service.a\n\ndef later():\n    import service.c\n")
        (package / "c.py").write_text("from service.b import later\n")
        cycles = import_cycles([package / f"{m}.py" for m in "abc"])
        assert cycles == ["service.a -> service.b -> service.a"], cycles
        assert redis_imports(paths) == ["service/bad.py: imports redis"]
        assert private_imports(paths) == [
            "service/bad.py: imports _hidden from service.other",
            "service/bad.py: imports _private from service",
        ]
        assert long_modules(paths) == []
        module.write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
        assert long_modules(paths) == [f"service/bad.py: {MAX_MODULE_LINES + 1} lines"]
    finally:
        ROOT = saved


@pytest.mark.parametrize(
    "check",
    [long_modules, long_functions, private_imports, redis_imports, web_imports,
     lifecycle_web_imports, upward_imports, import_cycles],
    ids=lambda check: check.__name__,
)
def test_the_house_rules_hold(check):
    found = check(sources())
    assert not found, "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("module", ["service.worker", "service.learner"])
def test_the_background_processes_load_no_web_framework(module: str) -> None:
    code = (f"import sys, {module}; "
            "print(sorted(m for m in ('fastapi', 'starlette') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def readme_layout() -> str:
    """The "## Layout" code block, which lives in CONTRIBUTING.md (the README links to it)."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    block = text[text.index("## Layout"):]
    return block[block.index("```") + 3:block.index("```", block.index("```") + 3)]


def test_the_readme_layout_matches_the_tree():
    layout = readme_layout()
    words = set(re.findall(r"[A-Za-z_]+/?", layout))
    # every package and module of the three packages; benchmarks/: its groups and own modules
    benchmarks = [p for p in sources(("benchmarks",)) if len(p.relative_to(ROOT).parts) <= 3]
    packages = [path.parent for path in [*sources(), *benchmarks] if path.name == "__init__.py"]
    missing = [f"{relative(p)}/" for p in packages if f"{p.name}/" not in words]
    modules = [path for path in [*sources(), *benchmarks]
               if not path.name.startswith("__") and path.parent.name not in GROUPS]
    missing += [relative(path) for path in modules if path.stem not in words]
    assert not missing, "README's Layout does not name: " + ", ".join(missing)
    folders = {path.name for path in ROOT.rglob("*") if path.is_dir()}
    named = re.findall(r"(?:^|\s)([a-z_]+)/(?=[\s,;)]|$)", layout, re.MULTILINE)
    unknown = [f"{word}/" for word in named if word not in folders]
    assert not unknown, "README's Layout names folders that do not exist: " + ", ".join(unknown)
