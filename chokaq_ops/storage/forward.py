"""`forward`: a Store method that is the same method of one of its parts, typed as that method.

The Store (store.py) is a facade over small parts; each public operation lives in one part. Written out,
each forward repeated the part's whole signature (and its defaults, which then had to be kept equal);
declared with `forward`, the Store's attribute is the part's bound method, so type checkers and help()
see the part's own signature and documentation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")


class Forward(Generic[P, R]):
    __slots__ = ("__doc__", "name", "part")

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.part = part
        self.name = method.__name__
        self.__doc__ = method.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            raise TypeError(f"{owner.__name__}.{name} forwards to {self.part}.{self.name}: use the same name")

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Forward[P, R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Forward[P, R] | Callable[P, R]:
        if obj is None:
            return self
        method: Callable[P, R] = getattr(getattr(obj, self.part), self.name)
        return method


def forward(part: str, method: Callable[Concatenate[Any, P], R]) -> Forward[P, R]:
    """`name = forward("part", PartClass.name)` in a class body: `obj.name` is `obj.part.name`."""
    return Forward(part, method)
