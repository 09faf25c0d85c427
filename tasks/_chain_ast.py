"""Read a function body as a chain of the procedural tasks' integer operations.

`parse_chain("    return max(x * 3, 2) - 7\\n")` is `[("mul", 3), ("max", 2), ("sub", 7)]`,
innermost first. Only Python's own parser reads the text (nothing is run), and only a closed
grammar is accepted: one `return` of an expression built from the variable by `e + k`, `e - k`,
`e * k`, `e ** 2`, `e % k`, `e // k`, `-e`, `abs(e)`, `max(e, k)` and `min(e, k)` (either
argument order for the last two), each `k` an integer literal; or steps, each `x = e` over
`x` in that grammar, then `return e` (`x = x * 3`, `return max(x, 2)`: the chain in order).
The syntax tree is the program's meaning, so a chain read here computes what the body
computes: precedence is Python's (`-x ** 2` is the square, then the negation).
"""

from __future__ import annotations

import ast
import textwrap
import warnings

__all__ = ["parse_chain"]

_BINARY: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Pow: "square",
    ast.Mod: "mod",
    ast.FloorDiv: "div",
}


def parse_chain(body: str, var: str = "x") -> list[tuple[str, int]] | None:
    """The (kind, constant) steps `body` applies to `var`, innermost first (constant 0 for
    `neg` and `abs`), or None when the body is anything else."""
    try:
        # A model's text can be odd Python (`3x`): its SyntaxWarning is not the caller's.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(textwrap.dedent(body))
    except (SyntaxError, ValueError):  # ValueError: a null byte
        return None
    *assignments, last = tree.body or [ast.Pass()]
    if not isinstance(last, ast.Return) or last.value is None:
        return None
    chain: list[tuple[str, int]] = []
    for statement in assignments:
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id == var
        ):
            return None
        steps = _expression_chain(statement.value, var)
        if steps is None:
            return None
        chain += steps
    steps = _expression_chain(last.value, var)
    return None if steps is None else chain + steps


def _expression_chain(node: ast.expr, var: str) -> list[tuple[str, int]] | None:
    """The steps the expression `node` applies to `var`, innermost first, or None."""
    steps: list[tuple[str, int]] = []
    while not (isinstance(node, ast.Name) and node.id == var):
        step = _outer_step(node)
        if step is None:
            return None
        kind, k, node = step
        steps.append((kind, k))
    return steps[::-1]


def _outer_step(node: ast.expr) -> tuple[str, int, ast.expr] | None:
    """The outermost operation of `node`: (kind, constant, its operand)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        k = _int_literal(node.right)
        kind = _BINARY[type(node.op)]
        if k is None or (kind == "square" and k != 2):
            return None
        return kind, k, node.left
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return "neg", 0, node.operand
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        name, args = node.func.id, node.args
        if name == "abs" and len(args) == 1:
            return "abs", 0, args[0]
        if name in ("max", "min") and len(args) == 2:
            for operand, constant in ((args[0], args[1]), (args[1], args[0])):
                k = _int_literal(constant)
                if k is not None and _int_literal(operand) is None:
                    return name, k, operand
    return None


def _int_literal(node: ast.expr) -> int | None:
    """An integer literal's value (`-3` included), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_literal(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None
