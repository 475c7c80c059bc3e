"""The layering of docs/architecture.md, checked on every import statement of our code."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ("metadata", "ha", "store", "scheduler", "proto", "services", "container", "spark_tools")
ALLOWED = {
    "metadata": {"metadata"},
    "ha": {"ha", "metadata"},
    "store": {"store", "metadata", "ha"},
    "scheduler": {"scheduler", "metadata", "store"},
    "proto": {"proto"},
    "services": {"services", "metadata", "ha", "store", "scheduler", "proto"},
    "container": set(OURS) - {"spark_tools"},
    "spark_tools": {"spark_tools", "metadata"},
}
# Cores decide; drivers do I/O. These modules may not be imported by the pure layers.
FORBIDDEN_IN_CORES = {"asyncio", "grpc", "socket", "threading", "subprocess", "google", "time", "os", "io"}
PURE_LAYERS = ("metadata", "ha")
# decision modules that live beside their drivers in scheduler/ (STYLE.md): pure as well
PURE_MODULES = ("scheduler/pop", "scheduler/timer.py", "scheduler/transaction_check.py")


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _sources(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        if "_pb2" not in path.name:
            yield path


def test_every_package_imports_only_the_layers_below_it():
    violations = []
    for package in OURS:
        for path in _sources(package):
            for line, module in _imports(path):
                top = module.split(".")[0]
                if top in OURS and top not in ALLOWED[package]:
                    violations.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not violations, "layering broken:\n" + "\n".join(violations)


def _pure_sources():
    for package in PURE_LAYERS:
        yield from _sources(package)
    for module in PURE_MODULES:
        target = ROOT / module
        yield from (sorted(target.rglob("*.py")) if target.is_dir() else [target])


def test_pure_cores_do_no_io():
    violations = []
    for path in _pure_sources():
        for line, module in _imports(path):
            if module.split(".")[0] in FORBIDDEN_IN_CORES:
                violations.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not violations, "pure cores must not do I/O:\n" + "\n".join(violations)


def test_nothing_imports_spark_tools():
    violations = []
    for package in OURS:
        if package == "spark_tools":
            continue
        for path in _sources(package):
            for line, module in _imports(path):
                if module.split(".")[0] == "spark_tools":
                    violations.append(f"{path.relative_to(ROOT)}:{line}")
    assert not violations, "spark_tools is imported by nothing:\n" + "\n".join(violations)
