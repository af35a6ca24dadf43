"""Errors of the plain-language rules parser (:mod:`greenroute.agent.rules`).

Every one is a :class:`~greenroute.core.errors.GreenrouteError` with a one-line message that
names the problem and either lists the valid choices or asks the question that would settle it.
The parser raises them instead of dropping a clause it does not fully understand.
"""

from __future__ import annotations

from collections.abc import Iterable

from greenroute.core.errors import GreenrouteError, InfeasibleConstraintsError, UnknownNameError


class RuleCommandError(GreenrouteError):
    """Base class: a plain-language command that cannot be turned into rules as it stands."""


class UnknownRegionError(RuleCommandError, UnknownNameError):
    """A place the command names is not a region (or origin) of the scenario."""

    def __init__(
        self, name: str, choices: Iterable[str], suggestions: Iterable[str] = (), why: str = ""
    ) -> None:
        self.kind = "region"
        self.name = name
        self.choices = sorted(choices)
        self.suggestions = list(suggestions)
        hint = f"; did you mean {' or '.join(self.suggestions)}?" if self.suggestions else ""
        detail = f" ({why})" if why else ""
        Exception.__init__(
            self,
            f"unknown region {name!r}{detail}{hint}; valid regions: {', '.join(self.choices)}",
        )


class AmbiguousCommandError(RuleCommandError):
    """The command can be read in more than one way; ``question`` asks which one is meant."""

    def __init__(self, question: str) -> None:
        self.question = question
        super().__init__(f"ambiguous command: {question}")


class UnrecognizedCommandError(RuleCommandError):
    """A clause (or a word of it) the parser does not understand."""


class UnsupportedRuleError(RuleCommandError):
    """A rule the constraint model cannot express (the message says what it can express)."""


class ContradictoryCommandError(RuleCommandError):
    """Two clauses of the command contradict each other."""


class UnsatisfiableCommandError(RuleCommandError, InfeasibleConstraintsError):
    """The rules leave some origin with no region to send its work to."""

    def __init__(self, rule: str, message: str) -> None:
        InfeasibleConstraintsError.__init__(self, rule, message)
