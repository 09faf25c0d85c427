"""Mutants of a canonical solution: small wrong programs that good tests must reject.

`tasks check` runs them to find weakly verified tasks, and the evaluator uses them as known-bad
canaries. Each mutant is a whole program (the task's prefix already applied) that differs from
the canonical one in one place, inside the entry-point function.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Callable, Sequence

import msgspec

from tasks._spec import Task

__all__ = ["Mutant", "canary_tasks", "full_program_task", "mutants"]

_SWAP_CMP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_SWAP_BIN: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.Div: ast.Mult,
}


@dataclasses.dataclass(frozen=True)
class Mutant:
    """`kind` says what changed; `program` is the whole mutated module."""

    kind: str
    program: str


def full_program_task(task: Task) -> Task:
    """`task` with an empty prefix, to verify whole programs such as mutants."""
    return msgspec.structs.replace(task, prefix="")


def _entry(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    return found[-1] if found else None  # the last definition is the one that counts


def _body_nodes(func: ast.FunctionDef) -> list[ast.AST]:
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring is not code to mutate
    return [node for stmt in body for node in ast.walk(stmt)]


def _empty_body(func: ast.FunctionDef) -> bool:
    func.body = [ast.Pass()]
    return True


def _return_none(func: ast.FunctionDef) -> bool:
    code = func.body
    if code and isinstance(code[0], ast.Expr) and isinstance(code[0].value, ast.Constant):
        code = code[1:]
    if len(code) == 1 and isinstance(code[0], ast.Return):
        return False  # the same program as an empty body
    returns = [n for n in _body_nodes(func) if isinstance(n, ast.Return) and n.value is not None]
    for node in returns:
        node.value = ast.Constant(None)
    return bool(returns)


def _changed_constant(func: ast.FunctionDef) -> bool:
    for node in _body_nodes(func):
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and value != 0:
            assert isinstance(node, ast.Constant)
            node.value = value + 1
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
            node.value = node.value + "x"
            return True
    return False


def _swapped_comparison(func: ast.FunctionDef) -> bool:
    for node in _body_nodes(func):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _SWAP_CMP:
            node.ops[0] = _SWAP_CMP[type(node.ops[0])]()
            return True
    return False


def _swapped_operator(func: ast.FunctionDef) -> bool:
    for node in _body_nodes(func):
        if isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
            node.op = _SWAP_BIN[type(node.op)]()
            return True
    return False


def _return_argument(func: ast.FunctionDef) -> bool:
    if not func.args.args:
        return False
    func.body = [ast.Return(ast.Name(func.args.args[0].arg, ast.Load()))]
    return True


_MUTATIONS: dict[str, Callable[[ast.FunctionDef], bool]] = {
    "empty_body": _empty_body,
    "return_none": _return_none,  # only when it differs from an empty body
    "changed_constant": _changed_constant,
    "swapped_comparison": _swapped_comparison,
    "swapped_operator": _swapped_operator,
    "return_argument": _return_argument,
}


def mutants(task: Task, solution: str | None = None) -> list[Mutant]:
    """The mutants of `solution` (default: the canonical one) that differ from it in text.

    :raises ValueError: when there is no solution or it does not parse.
    """
    text = solution if solution is not None else task.canonical_solution
    if text is None:
        raise ValueError(f"{task.id}: no canonical solution to mutate")
    try:
        original = ast.parse(task.program(text))
    except SyntaxError as exc:
        raise ValueError(f"{task.id}: canonical solution does not parse: {exc.msg}") from None
    baseline = ast.unparse(original)
    out: list[Mutant] = []
    seen = {baseline}
    for kind, mutate in _MUTATIONS.items():
        tree = copy.deepcopy(original)
        func = _entry(tree, task.entry_point)
        if func is None or not mutate(func):
            continue
        program = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
        if program not in seen:
            seen.add(program)
            out.append(Mutant(kind, program))
    return out


def canary_tasks(tasks: Sequence[Task], count: int = 4) -> list[Task]:
    """Up to `count` tasks with a canonical solution to use as an evaluator's canaries: one per
    level first, so the self-check covers different shapes of task."""
    usable = [t for t in tasks if t.canonical_solution is not None]
    first: dict[int, Task] = {}
    for task in usable:
        first.setdefault(task.level, task)
    chosen = list(first.values())
    chosen += [t for t in usable if t not in chosen]
    return chosen[:count]
