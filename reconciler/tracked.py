"""Numbers that record what a computation asked of them, so it can be told later whether other values would have
been asked the same. Used by `fleet cost --history` (history_reuse.py) for the jobs' `duration_hours`.

A `Tracked` is a float (the same value, the same arithmetic, bit for bit) that carries how it was made from the
inputs (`("var", i, token)`: input i; an expression tree of +, -, * and /). While `recording()`, every question whose
answer depends on a tracked value is appended to the trace with its answer: each comparison (<, <=, >, >=, ==,
!=, and so `min`, `max`, sorting and bisection), truth (`bool`), and `hash` (a dict or set keyed by the value:
the hash decides which keys a lookup compares, and the iteration order of a set). `holds(trace, values)` then
re-evaluates each recorded expression with other input values, by the same float operations in the same
order, and says whether every answer stays the same.

Why that is enough: a deterministic computation whose inputs differ only in the tracked values, and that gets
the same answer to every question it asks of them, takes the same path: it makes the same decisions and the
same untracked values. Anything else that would read the value is refused, not guessed: formatting (`str`,
`repr`, `format`), conversion (`float`, `int`, `round`, `math.floor`...), the other arithmetic (`//`, `%`,
`**`, `abs`), copying and pickling raise `Poisoned` (a BaseException, so no `except Exception` of the
computation swallows it), and the caller computes without tracking. A tracked value met outside
`recording()` raises it too. (C functions that read a float's bits directly, without asking the object, such as
`math.isfinite` or `%` formatting, would not be seen: the computations tracked here, the planner and the
pricing, do not call them on a duration; nor `sum` over durations, which from Python 3.12 adds exact floats
with compensation and a `Tracked` one by one: not the same bits. `tests/test_history_reuse_random.py` makes every
duration a float whose raw double is wrong and checks the plan does not change, and checks reused points against
fresh ones.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

Node = tuple[Any, ...]
"""("var", i, token) | ("const", number) | (operation, node, node) | ("neg", node); `token`: whose inputs (`holds`
refuses another's: a value that outlived its computation in a cache is not an input of the next)"""
Entry = tuple[str, Node, Node | None, object]
"""(question, node, other node or None, answer): a comparison, "bool" or "hash"."""


class Poisoned(BaseException):
    """A tracked value was used in a way its trace cannot replay (module docstring)."""


_local = threading.local()


@contextmanager
def recording() -> Iterator[list[Entry]]:
    """The trace of every question asked of a tracked value in this thread meanwhile."""
    trace: list[Entry] = []
    before = getattr(_local, "trace", None)
    _local.trace = trace
    try:
        yield trace
    finally:
        _local.trace = before


def _trace() -> list[Entry]:
    trace: list[Entry] | None = getattr(_local, "trace", None)
    if trace is None:
        raise Poisoned("a tracked value was used outside recording()")
    return trace


_ARITH: dict[str, Callable[[float, Any], Any]] = {
    "add": float.__add__, "radd": float.__radd__, "sub": float.__sub__, "rsub": float.__rsub__,
    "mul": float.__mul__, "rmul": float.__rmul__, "truediv": float.__truediv__, "rtruediv": float.__rtruediv__}
_CMP: dict[str, Callable[[float, Any], Any]] = {
    "lt": float.__lt__, "le": float.__le__, "gt": float.__gt__, "ge": float.__ge__, "eq": float.__eq__,
    "ne": float.__ne__}


def _node(x: object) -> Node:
    return x.node if isinstance(x, Tracked) else ("const", x)


def _number(x: object) -> bool:
    return isinstance(x, (int, float))     # bool and int subclasses too: float's own operations take them


class Tracked(float):
    __slots__ = ("node",)
    node: Node

    def __new__(cls, value: float, node: Node) -> Tracked:
        self = float.__new__(cls, value)
        self.node = node
        return self

    def __hash__(self) -> int:
        h = float.__hash__(self)
        _trace().append(("hash", self.node, None, h))
        return h

    def __bool__(self) -> bool:
        r = float.__bool__(self)
        _trace().append(("bool", self.node, None, r))
        return r

    def __neg__(self) -> Tracked:
        _trace()
        return Tracked(float.__neg__(self), ("neg", self.node))

    def __pos__(self) -> Tracked:
        return self


def _arith(name: str) -> Callable[[Tracked, object], object]:
    fn = _ARITH[name]

    def op(self: Tracked, other: object) -> object:
        if not _number(other):
            if isinstance(other, (str, bytes, tuple, list, type(None))):
                return NotImplemented   # a TypeError, as for a float
            raise Poisoned(f"{name} with {type(other).__name__}")
        _trace()
        r = fn(self, other)
        return r if r is NotImplemented else Tracked(r, (name, self.node, _node(other)))
    return op


def _compare(name: str) -> Callable[[Tracked, object], object]:
    fn = _CMP[name]

    def op(self: Tracked, other: object) -> object:
        if not _number(other):
            if isinstance(other, (str, bytes, tuple, list, dict, type(None))):
                return fn(self, other)   # NotImplemented: Python answers by identity (==) or raises, whatever the value
            raise Poisoned(f"{name} with {type(other).__name__}")
        r = fn(self, other)
        _trace().append((name, self.node, _node(other), r))
        return r
    return op


def _poison(name: str) -> Callable[..., Any]:
    def op(self: Tracked, *args: object, **kw: object) -> Any:
        raise Poisoned(name)
    return op


for _name in _ARITH:
    setattr(Tracked, f"__{_name}__", _arith(_name))
for _name in _CMP:
    setattr(Tracked, f"__{_name}__", _compare(_name))
for _name in ("__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__divmod__", "__rdivmod__", "__pow__",
              "__rpow__", "__abs__", "__int__", "__float__", "__trunc__", "__floor__", "__ceil__", "__round__",
              "__format__", "__repr__", "__str__", "__reduce__", "__reduce_ex__", "__getnewargs__", "__copy__",
              "__deepcopy__", "__getstate__", "is_integer", "as_integer_ratio", "hex", "conjugate", "real", "imag"):
    setattr(Tracked, _name, _poison(_name) if _name not in ("real", "imag") else property(_poison(_name)))


class _Foreign(Exception):
    """A variable of another computation's inputs."""


def value(node: Node, inputs: Sequence[Any], token: object, memo: dict[int, Any]) -> Any:
    """The node's value with `inputs` for the variables of `token`, by the operations that made it."""
    kind = node[0]
    if kind == "const":
        return node[1]
    if kind == "var":
        if node[2] is not token:
            raise _Foreign
        return inputs[node[1]]
    found = memo.get(id(node))
    if found is None:
        a = value(node[1], inputs, token, memo)
        found = float.__neg__(a) if kind == "neg" else _ARITH[kind](a, value(node[2], inputs, token, memo))
        memo[id(node)] = found
    return found


def holds(trace: Sequence[Entry], inputs: Sequence[Any], token: object) -> bool:
    """Every question of the trace gets the same answer with `inputs` for the variables of `token` (floats where
    the traced run had floats: the caller checks); False too when a question involves another's variable, or
    when its replay fails (a division by what is now zero, an expression too deep to walk): the caller then
    computes the point, which must not become an error point."""
    memo: dict[int, Any] = {}
    try:
        for question, node, other, answer in trace:
            a = value(node, inputs, token, memo)
            if question == "hash":
                got: object = float.__hash__(a)
            elif question == "bool":
                got = float.__bool__(a)
            else:
                assert other is not None
                got = _CMP[question](a, value(other, inputs, token, memo))
            if got != answer:
                return False
    except (_Foreign, ArithmeticError, RecursionError):
        return False
    return True
