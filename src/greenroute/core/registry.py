"""One registry mechanism for geo policies, local policies and scenarios.

An entry is a typed factory, a one-line description and its declared options (name, type,
default, unit, help). Building an entry validates the options first: an unknown or misspelled
option, or a value of the wrong type, is a :class:`~greenroute.core.errors.ConfigError` that
lists the valid options. Registering never changes another package's state.

Options are declared by the factory's own signature (keyword parameters with defaults and
type annotations); ``units`` and ``help`` at registration add what a signature cannot say.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from greenroute.core.errors import ConfigError, UnknownNameError

T = TypeVar("T")

_SCALARS = (bool, int, float, str)


@dataclass(frozen=True)
class OptionSpec:
    """One declared option of a registered factory."""

    name: str
    type: Any  # a Python type or typing form (``float``, ``int | None``, ``dict | None``)
    default: Any
    unit: str = ""
    help: str = ""

    @property
    def type_name(self) -> str:
        t = self.type
        if isinstance(t, type):
            return t.__name__
        return str(t).replace("typing.", "")

    def coerce(self, value: Any, owner: str) -> Any:
        """``value`` converted to the declared type, or a ConfigError naming the option."""
        allowed = _allowed_types(self.type)
        if value is None and type(None) in allowed:
            return None
        for t in allowed:
            if t is type(None):
                continue
            ok, out = _convert(value, t)
            if ok:
                return out
        raise ConfigError(f"option {self.name!r} of {owner} takes {self.type_name}, got {value!r}")

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        doc = f"  {self.help}" if self.help else ""
        return f"{self.name}: {self.type_name} = {self.default!r}{unit}{doc}"


def _allowed_types(tp: Any) -> tuple:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return tuple(a for arg in typing.get_args(tp) for a in _allowed_types(arg))
    if origin is not None:
        return (origin,)
    if tp is None:
        return (type(None),)
    return (tp,)


def _convert(value: Any, t: type) -> tuple[bool, Any]:
    if t is bool:
        if isinstance(value, bool):
            return True, value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return True, value.lower() == "true"
        return False, None
    if t is int:
        if isinstance(value, bool):
            return False, None
        if isinstance(value, int):
            return True, value
        if isinstance(value, float) and value.is_integer():
            return True, int(value)
        return False, None
    if t is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False, None
        if not math.isfinite(float(value)):
            return False, None
        return True, float(value)
    if t is str:
        return (True, value) if isinstance(value, str) else (False, None)
    if t is Any or t is object:
        return True, value
    if isinstance(t, type) and isinstance(value, t):
        return True, value
    return False, None


def options_from_signature(
    factory: Callable[..., Any],
    units: Mapping[str, str] | None = None,
    help: Mapping[str, str] | None = None,
    skip: Iterable[str] = (),
) -> tuple[OptionSpec, ...]:
    """The keyword options a factory declares: parameters with defaults, typed by annotation.

    A factory taking ``**kwargs`` cannot declare its options and is refused (that is how
    misspelled options used to be swallowed)."""
    sig = inspect.signature(factory)  # a class: its constructor's, without ``self``
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:
        hints = {}
    units = dict(units or {})
    help_ = dict(help or {})
    out = []
    skipped = set(skip) | {"self"}
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            raise TypeError(f"{factory!r} takes **{p.name}: declare its options explicitly")
        if p.name in skipped or p.kind is p.VAR_POSITIONAL:
            continue
        if p.default is p.empty:
            raise TypeError(f"{factory!r}: parameter {p.name!r} needs a default to be an option")
        tp = hints.get(p.name, type(p.default) if p.default is not None else Any)
        out.append(OptionSpec(p.name, tp, p.default, units.get(p.name, ""), help_.get(p.name, "")))
    unknown = (set(units) | set(help_)) - {o.name for o in out}
    if unknown:
        raise TypeError(f"{factory!r}: units/help given for undeclared options {sorted(unknown)}")
    return tuple(out)


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered factory with its description and declared options."""

    kind: str
    name: str
    factory: Callable[..., T]
    description: str
    options: tuple[OptionSpec, ...] = ()
    meta: dict = field(default_factory=dict)

    def option(self, key: str) -> OptionSpec:
        for o in self.options:
            if o.name == key:
                return o
        valid = ", ".join(o.name for o in self.options) or "(none)"
        raise ConfigError(
            f"unknown option {key!r} for {self.kind} {self.name!r}; valid choices: {valid}"
        )

    def validate(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """The given options checked and converted to their declared types."""
        return {
            k: self.option(k).coerce(v, f"{self.kind} {self.name!r}")
            for k, v in (options or {}).items()
        }

    def build(self, **options: Any) -> T:
        return self.factory(**self.validate(options))


class Registry(Generic[T]):
    """Name -> :class:`Entry`. ``loader`` imports the built-in entries on first use: one
    function, or a sequence of stages (e.g. cheap modules first); looking a name up runs the
    stages only until the name is found, listing runs them all."""

    def __init__(
        self,
        kind: str,
        loader: Callable[[], None] | Sequence[Callable[[], None]] | None = None,
    ) -> None:
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}
        if loader is None:
            stages: list[Callable[[], None]] = []
        elif callable(loader):
            stages = [loader]
        else:
            stages = list(loader)
        self._stages = stages

    def register(
        self,
        name: str,
        description: str = "",
        *,
        units: Mapping[str, str] | None = None,
        help: Mapping[str, str] | None = None,
        skip: Iterable[str] = (),
        **meta: Any,
    ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: register ``factory`` under ``name`` with its options declared by its
        signature (see :func:`options_from_signature`)."""

        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            doc = description or (factory.__doc__ or "").strip().split("\n")[0]
            opts = options_from_signature(factory, units, help, skip)
            self._entries[name] = Entry(self.kind, name, factory, doc, opts, dict(meta))
            return factory

        return deco

    def unregister(self, name: str) -> None:
        """Remove ``name`` if registered (tests clean up what they registered)."""
        self._entries.pop(name, None)

    def _load(self, until: str | None = None) -> None:
        """Run the pending loader stages (all, or until ``until`` is registered)."""
        while self._stages and (until is None or until not in self._entries):
            self._stages.pop(0)()

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def entries(self) -> list[Entry[T]]:
        self._load()
        return [self._entries[k] for k in sorted(self._entries)]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def get(self, name: str) -> Entry[T]:
        self._load(until=name)
        if name not in self._entries:
            self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None

    def build(self, name: str, **options: Any) -> T:
        return self.get(name).build(**options)
