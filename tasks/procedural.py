"""Procedural code tasks: "implement `f`" from a one-line description and two examples.

Seeded and deterministic: `ProceduralTasks(seed).task(level, index)` is always the same task,
and the supply is unbounded (any index). Levels 1 to 4 chain that many integer operations
(`return x + 3`, then `return (x + 3) * 2`, ...); the levels above compose new forms: list maps
and filters, aggregates, conditionals. Each chain level is the one below with one more step of
the same kind, so a model taught levels 1-2 can reach 3 and 4 by sampling and learn them from
reward alone: measured, only the forms whose expression nests one parenthesis deep (`(-x + 3)
* 2`), not those that open `((` (docs/training-log.md, "Session 30"). The list and conditional
levels need syntax no lower level shows.
Prompts and solutions stay a line or two long so a small character-level model can learn the
low levels. The id is a digest of the solution, so the same function always has the same id
and the same split: a held-out function can never reach training under another index.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

from tasks._chain_ast import parse_chain
from tasks._spec import Task, TestCase

__all__ = [
    "MAX_LEVEL",
    "SOLUTION_STYLES",
    "ProceduralTasks",
    "SolutionStyle",
    "Split",
    "chain_form",
    "operation_form",
]

Split = Literal["train", "heldout"]
#: How a chain level's canonical solution is written (the tests are the same either way):
#: "expression", one nested expression (`return (x + 3) * 2`); "steps", one assignment per
#: operation (`x = x + 3`, `x = x * 2`, `return x`), so that each level is the one below with
#: one more line of the same form, where the expression must nest one level deeper;
#: "annotated", the steps each under a comment that copies its clause of the description
#: (`# Add 3,`, `x = x + 3`, `# then multiply by 2.`, ...), meant to make each line a copy
#: of the text after the last and the stop a matter of the period. Measured, the warm start
#: of neither writes a third step; RL with hindsight tasks raised `steps`' three-step answers
#: to a quarter of level 3's, few of them right (docs/training-log.md, "Session 28", "Session
#: 32").
SolutionStyle = Literal["expression", "steps", "annotated"]
SOLUTION_STYLES: tuple[SolutionStyle, ...] = ("expression", "steps", "annotated")
MAX_LEVEL = 9
CHAIN_LEVELS = 4  # levels 1..4: that many chained integer operations
BRANCH_LEVEL = 7  # a conditional; levels 5, 6, 8 and 9 are list pipelines
_TASK_ID = re.compile(r"^gen-L\d+-[0-9a-f]+-(\d+)$")  # `_task`'s ids, by stream index
MAX_DRAWS = 1000
SOLVED_DRAWS = 20  # example and test inputs tried for a task read off a program
#: Draws in a row from the other side of the split before a stream gives up on its side.
#: Neither the split nor the draw's odds depend on the seed, so a `heldout_percent` that
#: leaves a level's side empty (1 at level 1: no function there has digest % 100 below 1)
#: would spin forever. Level 1's lone functions at the split's ends (`x % 13` at 1, `x + 2`
#: at 99) are drawn about once in 170 tasks: a side holding one of them misses 5,000 draws
#: in a row with chance e^-28; above level 1 each side holds about its percentage of the
#: draws, 1 % at least (e^-50).
SPLIT_DRAWS = 5000


@dataclasses.dataclass(frozen=True)
class _Op:
    kind: str
    k: int  # the constant in the code (0 for none)

    @property
    def words(self) -> str:  # what the docstring says
        return _OPS[self.kind][0].format(k=self.k)

    @property
    def code(self) -> str:  # a template over the operand `{e}`
        return _OPS[self.kind][1].replace("{k}", str(self.k))

    def apply(self, v: int) -> int:
        return _OPS[self.kind][2](v, self.k)

    def bumped(self) -> _Op | None:
        """The op with its constant moved by one, as a changed-constant mutant would."""
        return _Op(self.kind, self.k + 1) if "{k}" in _OPS[self.kind][1] else None


_OPS: dict[str, tuple[str, str, Callable[[int, int], int]]] = {
    "add": ("add {k}", "{e} + {k}", lambda v, k: v + k),
    "sub": ("subtract {k}", "{e} - {k}", lambda v, k: v - k),
    "mul": ("multiply by {k}", "{e} * {k}", lambda v, k: v * k),
    "neg": ("negate", "-{e}", lambda v, k: -v),
    "square": ("square", "{e} ** {k}", lambda v, k: v**k),
    "mod": ("remainder mod {k}", "{e} % {k}", lambda v, k: v % k),
    "div": ("floor-divide by {k}", "{e} // {k}", lambda v, k: v // k),
    "abs": ("absolute value", "abs({e})", lambda v, k: abs(v)),
    "max": ("at least {k}", "max({e}, {k})", lambda v, k: max(v, k)),
    "min": ("at most {k}", "min({e}, {k})", lambda v, k: min(v, k)),
}


# The constants `_int_op` draws, by kind; `_drawable` reads the same table, so a task read off
# a program (`task_solved_by`) is one the generator could have drawn.
CLAMP_RANGE = (-3, 5)  # max / min: a clamp must fall inside the test inputs
CONSTANT_RANGE = (2, 19)  # add, sub, mul, mod, div
SQUARE_POWER = 2


def operation_form(kind: str) -> str:
    """How an operation of the generator is written in an expression: "I" infix (`e + k`,
    `e ** 2`), "N" negation (`-e`), "C" a call (`abs(e)`, `max(e, k)`). A chain's forms
    say how its expression must open: `((x` for three infix operations, `max((x` for two
    and a call (`roost answers --by-form`).

    :raises ValueError: `kind` is not an operation of the generator.
    """
    if kind not in _OPS:
        raise ValueError(f"operation: {kind!r} is not one of {', '.join(_OPS)}")
    code = _OPS[kind][1]
    return "C" if code.startswith(("abs", "max", "min")) else "N" if code == "-{e}" else "I"


def chain_form(kinds: Iterable[str]) -> str:
    """The forms of a chain's operations, innermost first: "IIC" for `max((x + 3) * 2, 5)`.

    :raises ValueError: as `operation_form`.
    """
    return "".join(operation_form(kind) for kind in kinds)


def _drawable(op: _Op) -> bool:
    """Whether `_int_op` can draw `op` (its constant in the range drawn for its kind)."""
    if op.kind not in _OPS:
        return False
    if op.kind in ("neg", "abs"):
        return True  # no constant in the code or the words
    if op.kind == "square":
        return op.k == SQUARE_POWER
    low, high = CLAMP_RANGE if op.kind in ("max", "min") else CONSTANT_RANGE
    return low <= op.k <= high


def _int_op(rng: random.Random) -> _Op:
    kind = rng.choice(list(_OPS))
    if kind in ("max", "min"):
        return _Op(kind, rng.randint(*CLAMP_RANGE))
    return _Op(kind, SQUARE_POWER if kind == "square" else rng.randint(*CONSTANT_RANGE))


def _bumps(ops: list[_Op]) -> list[list[_Op]]:
    """Each copy of `ops` with one constant moved by one."""
    out = []
    for i, op in enumerate(ops):
        moved = op.bumped()
        if moved is not None:
            out.append([*ops[:i], moved, *ops[i + 1 :]])
    return out


def _render(ops: list[_Op], var: str) -> str:
    expr, atomic = var, True
    for op in ops:
        call_form = operation_form(op.kind) == "C"
        expr = op.code.format(e=expr if atomic or call_form else f"({expr})")
        atomic = call_form
    return expr


def _run(ops: list[_Op], value: int) -> int:
    for op in ops:
        value = op.apply(value)
    return value


def _on_int(func: Callable[[int], int]) -> Callable[[object], object]:
    def call(value: object) -> object:
        assert isinstance(value, int)
        return func(value)

    return call


@dataclasses.dataclass(frozen=True)
class _Shape:
    arg: str
    words: str
    body: str
    func: Callable[[object], object]
    list_input: bool
    edge: int | None = None  # a threshold: tests must probe both sides of it
    # The same function with one constant moved: the tests must tell each apart from `func`.
    variants: list[Callable[[object], object]] = dataclasses.field(default_factory=list)
    steps: list[str] = dataclasses.field(default_factory=list)  # a chain's ops, one per line


def _chain(ops: list[_Op]) -> Callable[[object], object]:
    return _on_int(lambda x: _run(ops, x))


def _branch(k: int, yes: _Op, no: _Op) -> Callable[[object], object]:
    return _on_int(lambda x: yes.apply(x) if x > k else no.apply(x))


def _pipeline(ops: list[_Op], k: int, keep: bool, agg: str) -> Callable[[object], object]:
    def func(xs: object) -> object:
        assert isinstance(xs, list)
        out = [_run(ops, v) for v in xs if not keep or v > k]
        return {"": out, "sum": sum(out), "len": len(out), "max": max(out, default=0)}[agg]

    return func


def _chain_shape(ops: list[_Op]) -> _Shape:
    words = ", then ".join(o.words for o in ops)
    variants = [_chain(bumped) for bumped in _bumps(ops)]
    steps = [op.code.format(e="x") for op in ops]
    return _Shape("x", words, _render(ops, "x"), _chain(ops), False, None, variants, steps)


def _annotated(description: str, steps: list[str]) -> str:
    """One assignment per step, each under a comment quoting its clause of `description` as
    the prompt writes it, punctuation included (a comma: more follow; a period: the last)."""
    clauses = description.split(", then ")
    assert len(clauses) == len(steps), (description, steps)
    lines = []
    for i, (clause, step) in enumerate(zip(clauses, steps, strict=True)):
        said = clause if i == 0 else f"then {clause}"
        lines += [f"    # {said}{'.' if i == len(steps) - 1 else ','}", f"    x = {step}"]
    return "\n".join(lines) + "\n    return x\n"


def _testable(shape: _Shape, inputs: list[object]) -> bool:
    """Whether the hidden tests (`inputs[2:]`) can tell a mutant from the solution: a
    function that maps most inputs to one value, or each input to itself, or whose tests
    cannot tell it from itself with a constant moved, could not."""
    outputs = [shape.func(v) for v in inputs[2:]]
    distinct = len(set(map(repr, outputs))) >= 4 and outputs != inputs[2:]
    return distinct and all(
        [variant(v) for v in inputs[2:]] != outputs for variant in shape.variants
    )


def _shape(level: int, rng: random.Random) -> _Shape:
    if level <= CHAIN_LEVELS:
        return _chain_shape([_int_op(rng) for _ in range(level)])
    if level == BRANCH_LEVEL:
        k = rng.randint(-3, 3)
        yes, no = _int_op(rng), _int_op(rng)
        while no.words == yes.words:
            no = _int_op(rng)
        body = f"{_render([yes], 'x')} if x > {k} else {_render([no], 'x')}"
        words = f"if x > {k}: {yes.words}; else: {no.words}"
        variants = [_branch(k + 1, yes, no)]
        variants += [_branch(k, y, no) for [y] in _bumps([yes])]
        variants += [_branch(k, yes, n) for [n] in _bumps([no])]
        return _Shape("x", words, body, _branch(k, yes, no), False, k, variants)
    # List pipelines: 5 is a map or a filter, 6 filter + map + aggregate, 8 and 9 two and three
    # maps (the numbering before the chain levels 3 and 4 existed: 3, 4, 6, 7).
    stage = level - 2
    n_map = 1 if stage <= 4 else stage - 4
    ops = [_int_op(rng) for _ in range(n_map)] if stage != 3 or rng.random() < 0.5 else []
    k = rng.randint(-2, 3)
    keep = stage >= 4 or not ops
    agg = rng.choice(["", "sum", "len", "max"]) if stage >= 4 or not ops else ""
    if agg == "len":
        ops = []  # a map before len would be untestable
    clause = f" if v > {k}" if keep else ""
    words = "; ".join(
        w
        for w in (
            f"keep items > {k}" if keep else "",
            ", then ".join(o.words for o in ops),
            f"return the {agg}" if agg else "return the list",
        )
        if w
    )
    body = f"[{_render(ops, 'v')} for v in xs{clause}]"
    if agg == "max":
        body = f"max({body}, default=0)"
        words = words.replace("return the max", "return the max (0 if empty)")
    elif agg:
        body = f"{agg}({body})"
    variants = [_pipeline(bumped, k, keep, agg) for bumped in _bumps(ops)]
    if keep:
        variants.append(_pipeline(ops, k + 1, keep, agg))
    return _Shape(
        "xs", words, body, _pipeline(ops, k, keep, agg), True, k if keep else None, variants
    )


class ProceduralTasks:
    """An unbounded, seeded supply of code tasks at levels 1..`max_level`.

    :param heldout_percent: share of functions (by digest) reserved for evaluation.
    :param solution_style: how chain levels' canonical solutions are written (`SolutionStyle`);
        it changes neither the prompts, the tests, the ids nor the splits.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        max_level: int = MAX_LEVEL,
        heldout_percent: int = 10,
        solution_style: SolutionStyle = "expression",
    ) -> None:
        if not 1 <= max_level <= MAX_LEVEL:
            raise ValueError(f"max_level: must be in 1..{MAX_LEVEL}, got {max_level}")
        if not 0 <= heldout_percent < 100:
            raise ValueError(f"heldout_percent: must be in 0..99, got {heldout_percent}")
        if solution_style not in SOLUTION_STYLES:
            raise ValueError(
                f"solution_style: must be one of {', '.join(SOLUTION_STYLES)}, "
                f"got {solution_style!r}"
            )
        self.solution_style = solution_style
        self.seed, self.max_level, self.heldout_percent = seed, max_level, heldout_percent

    def task(self, level: int, index: int) -> Task:
        """Task number `index` of `level` (either split)."""
        if not 1 <= level <= self.max_level:
            raise ValueError(f"level: must be in 1..{self.max_level}, got {level}")
        rng = random.Random(f"roost:{self.seed}:{level}:{index}")
        for _ in range(MAX_DRAWS):
            shape = _shape(level, rng)
            inputs = self._inputs(rng, shape.list_input, shape.edge)
            if _testable(shape, inputs):
                break
        else:  # pragma: no cover - every level passes within a few draws
            raise RuntimeError(f"level {level}: no testable task in {MAX_DRAWS} draws")
        return self._task(level, shape, inputs, str(index))

    def task_solved_by(self, body: str) -> Task | None:
        """The chain task that the function body `body` solves, or None.

        A program that fails its own task may still be a right answer to another: the chain
        its expression computes (`tasks/_chain_ast.py` reads it without running it). When that
        chain is one this generator could have drawn (its operations, constants in their
        ranges, at most `CHAIN_LEVELS` of them, and testable), this is that task: the prompt,
        examples and hidden tests the generator gives it, its level the chain's length, its
        split its function's, and the index "solved". The caller still has to run the tests.
        """
        steps = parse_chain(body)
        if not steps or len(steps) > min(CHAIN_LEVELS, self.max_level):
            return None
        ops = [_Op(kind, k) for kind, k in steps]
        if not all(_drawable(op) for op in ops):
            return None
        shape = _chain_shape(ops)
        rng = random.Random(f"roost:{self.seed}:solved:{shape.body}")
        for _ in range(SOLVED_DRAWS):
            inputs = self._inputs(rng, False, None)
            if _testable(shape, inputs):
                return self._task(len(ops), shape, inputs, "solved")
        return None  # a function that maps most inputs to one value: no testable task

    def _task(self, level: int, shape: _Shape, inputs: list[object], index: str) -> Task:
        examples, hidden = inputs[:2], inputs[2:]
        shown = ", ".join(f"f({v!r}) == {shape.func(v)!r}" for v in examples)
        prompt = f'def f({shape.arg}):\n    """{shape.words.capitalize()}. {shown}"""\n'
        if self.solution_style == "steps" and shape.steps:
            solution = "".join(f"    x = {step}\n" for step in shape.steps) + "    return x\n"
        elif self.solution_style == "annotated" and shape.steps:
            solution = _annotated(shape.words.capitalize(), shape.steps)
        else:
            solution = f"    return {shape.body}\n"
        digest = hashlib.blake2b(f"{level}:{shape.body}".encode(), digest_size=8).hexdigest()
        return Task(
            id=f"gen-L{level}-{digest}-{index}",
            prompt=prompt,
            prefix=prompt,
            entry_point="f",
            tests=[TestCase(call=f"f({v!r})", expected=repr(shape.func(v))) for v in hidden],
            level=level,
            group=f"level-{level}",
            tags=["procedural", self.split_of_digest(digest)],
            canonical_solution=solution,
            timeout_s=1.0,
        )

    @staticmethod
    def stream_index(task_id: str) -> int | None:
        """The index in its level's stream of a task this class made (`task(level, index)`
        gives it back), or None for any other id (a task read off a program, a file's)."""
        match = _TASK_ID.match(task_id)
        return None if match is None else int(match.group(1))

    def split_of_digest(self, digest: str) -> Split:
        return "heldout" if int(digest, 16) % 100 < self.heldout_percent else "train"

    def split_of(self, task: Task) -> Split:
        return self.split_of_digest(task.id.split("-")[2])

    def stream(self, level: int, *, split: Split = "train", start: int = 0) -> Iterator[Task]:
        """Fresh tasks of `level` in `split`, forever. Low levels repeat functions (level 1 has
        about 100) with new examples and tests; the split is by function, so none leaks.

        :raises ValueError: `SPLIT_DRAWS` tasks in a row fall on the other side: `level` has
            no function on this side at this `heldout_percent`.
        """
        index, misses = start, 0
        while True:
            task = self.task(level, index)
            index += 1
            if self.split_of(task) == split:
                misses = 0
                yield task
                continue
            misses += 1
            if misses >= SPLIT_DRAWS:
                side, fix = ("held-out", "raise") if split == "heldout" else ("training", "lower")
                raise ValueError(
                    f"heldout_percent: at {self.heldout_percent}, level {level} has no "
                    f"{side} function (none in {SPLIT_DRAWS} draws in a row); "
                    f"{fix} heldout_percent"
                )

    def take(self, level: int, count: int, *, split: Split = "train", start: int = 0) -> list[Task]:
        """The first `count` tasks of `stream(level, split=split, start=start)`.

        :raises ValueError: as `stream`.
        """
        stream = self.stream(level, split=split, start=start)
        return [next(stream) for _ in range(count)]

    def take_by_function(
        self, level: int, count: int, *, split: Split = "train", scan: int = 40
    ) -> list[Task]:
        """`count` tasks of `level` in `split`, spread evenly over its functions.

        The stream draws functions unevenly: one with no constant ("square", "negate") is as
        likely as all 18 "add k" together, so the first 30 held-out tasks of level 1 were 26
        copies of `x ** 2`. An evaluation set made that way measures a few functions. Here the
        stream's tasks are grouped by function (in order of first appearance; at most `scan *
        count` of them, fewer once `count` functions are found) and taken round-robin: every
        function once before any twice, a repeat with fresh examples only when the level has
        fewer functions than `count` (level 1 has 6 held-out functions at seed 0).

        :raises ValueError: as `stream`.
        """
        by_function: dict[str, list[Task]] = {}
        stream = self.stream(level, split=split)
        for _ in range(scan * count):
            if len(by_function) >= count:
                break  # one task per function already: the usual case above level 1
            task = next(stream)
            by_function.setdefault(task.id.split("-")[2], []).append(task)
        columns = list(by_function.values())
        spread = [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]
        return spread[:count]

    @staticmethod
    def _inputs(rng: random.Random, list_input: bool, edge: int | None) -> list[object]:
        """Two example inputs, then eight hidden ones; with a threshold, the hidden ones hold
        the values on both sides of it, so a mutant that moves it is caught."""
        if not list_input:
            values: list[object] = list(rng.sample(range(-12, 13), 10))
            if edge is not None:
                rest = [v for v in values if v not in (edge, edge + 1)]
                values = [*rest[:2], edge, edge + 1, *rest[2:8]]
            return values
        lists: list[object] = [
            [rng.randint(-5, 9) for _ in range(rng.randint(0 if i else 1, 5))] for i in range(10)
        ]
        if edge is not None:
            lists[2] = [edge + 1, rng.randint(-5, 9)]
            lists[3] = [edge, edge + 1, edge + 1]
        for i in range(2):  # the examples must not give hidden tests away
            while lists[i] in lists[2:]:
                lists[i] = [rng.randint(-5, 9) for _ in range(rng.randint(1, 5))]
        return lists
