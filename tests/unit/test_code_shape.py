"""Size limits from STYLE.md: functions of at most 70 lines, modules of at most 600, in the
product, its tests and its benchmarks alike."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("metadata", "ha", "store", "scheduler", "services", "container", "spark_tools", "proto", "tests", "bench")
MAX_FUNCTION_LINES = 70
MAX_MODULE_LINES = 600


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "_pb2" not in path.name:
                yield path


def test_functions_are_short():
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "functions over 70 lines:\n" + "\n".join(long)


def test_modules_are_at_most_600_lines():
    big = [f"{p.relative_to(ROOT)} ({n} lines)" for p in _modules() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert not big, "modules over 600 lines:\n" + "\n".join(big)
