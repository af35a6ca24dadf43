"""core.registry: declared options, strict validation, staged loading of built-ins."""

from __future__ import annotations

import pytest

from greenroute.core.errors import ConfigError, UnknownNameError
from greenroute.core.registry import Registry


def _staged():
    calls: list[str] = []
    reg: Registry = Registry("thing", ())

    def cheap() -> None:
        calls.append("cheap")

        @reg.register("a", "first", units={"rate": "1/s"})
        def make_a(rate: float = 1.0, n: int = 2) -> tuple:
            return ("a", rate, n)

    def costly() -> None:
        calls.append("costly")

        @reg.register("b", "second")
        def make_b() -> str:
            return "b"

    reg._stages = [cheap, costly]
    return reg, calls


def test_lookup_runs_loader_stages_only_until_the_name_is_found():
    reg, calls = _staged()
    assert reg.build("a", rate=3) == ("a", 3.0, 2)  # int 3 coerced to the declared float
    assert calls == ["cheap"]  # the costly stage was not imported for "a"
    assert reg.build("b") == "b"
    assert calls == ["cheap", "costly"]


def test_listing_and_unknown_names_load_every_stage():
    reg, calls = _staged()
    with pytest.raises(UnknownNameError, match="valid choices: a, b"):
        reg.get("c")
    assert calls == ["cheap", "costly"]
    reg2, calls2 = _staged()
    assert reg2.names() == ["a", "b"] and calls2 == ["cheap", "costly"]


def test_unknown_or_mistyped_option_is_an_error_listing_the_options():
    reg, _ = _staged()
    with pytest.raises(ConfigError, match=r"unknown option 'rte'.*valid choices: rate, n"):
        reg.build("a", rte=2.0)
    with pytest.raises(ConfigError, match="option 'n' of thing 'a' takes int"):
        reg.build("a", n=2.5)
    assert [o.describe() for o in reg.get("a").options] == [
        "rate: float = 1.0 1/s",
        "n: int = 2",
    ]


def test_a_factory_taking_kwargs_cannot_register():
    reg: Registry = Registry("thing")
    with pytest.raises(TypeError, match="declare its options explicitly"):

        @reg.register("k")
        def make(**options) -> None:
            return None
