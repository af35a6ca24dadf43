"""The LLM agent and copilot: language API, datasets, distillation, backends, rules.

The language API (seed 000 Appendix B.1) is importable from here: ``textualize``, ``render``,
``parse``, ``candidate_actions``, ``Role``, ``ParseResult``, ``LanguageCounters`` (loaded on
first use, so importing another part of the agent does not load it).
"""

from __future__ import annotations

_LANGUAGE = (
    "DEFER",
    "EXECUTE",
    "LanguageCounters",
    "ParseResult",
    "Role",
    "candidate_actions",
    "effective_action",
    "fallback_action",
    "parse",
    "render",
    "render_epoch",
    "textualize",
)


def __getattr__(name: str):
    if name == "Copilot":  # the copilot (explain, what-if, rules): greenroute.agent.copilot
        from greenroute.agent.copilot import Copilot

        return Copilot
    if name in _LANGUAGE:
        from greenroute.agent import language

        return getattr(language, name)
    raise AttributeError(f"module 'greenroute.agent' has no attribute {name!r}")
