"""The copilot's LLM paths with fake backends (no model is loaded): the rules parser asks for
schema JSON and validates it like the rule-based parser; an LLM phrasing is used only when
every number in it is one of the simulator's; and scenario rules merge with the stricter rule
winning (``resolve_scenario``)."""

from __future__ import annotations

import json
import math

import pytest

from greenroute.agent.copilot_rules import PRIMER, LLMRuleParser, first_json_object
from greenroute.agent.copilot_text import numbers_in, unexplained_numbers
from greenroute.agent.rules import RuleCommandError, parse_command, ruleset_to_json
from greenroute.constraints import ConstraintSet, Exclusion
from greenroute.scenarios import get_scenario, resolve_scenario

G3 = ("DE-LU", "CL-SIC", "US-CAL-CISO")
CMD = "Minimize energy cost, but do not send workloads to California"


class FakeBackend:
    """Answers with a fixed text; records the prompts."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def generate(self, prompt: str, max_new_tokens: int = 16) -> str:
        self.prompts.append(prompt)
        return self.answer


def _json_tail(obj: dict) -> str:
    """What a model writes after the prompt's primer ``{"goal":``, then some chatter."""
    text = json.dumps(obj)
    assert text.startswith(PRIMER)
    return text[len(PRIMER) :] + "\nCommand: something else"


def test_llm_rules_parser_reads_the_models_json():
    want = parse_command(CMD, G3)
    be = FakeBackend(_json_tail(ruleset_to_json(want)))
    got = LLMRuleParser(be).parse(CMD, G3)
    assert got == want
    prompt = be.prompts[0]
    assert prompt.endswith(f"Command: {CMD}\nJSON: {PRIMER}")
    assert "Regions: DE-LU, CL-SIC, US-CAL-CISO." in prompt
    # worked examples are the deterministic parser's JSON
    ex = json.dumps(ruleset_to_json(parse_command("Never route work to CL-SIC", G3)),
                    separators=(",", ":"))  # fmt: skip
    assert ex in prompt


@pytest.mark.parametrize(
    "answer, needle",
    [
        ("I think you should minimise cost.", "did not answer with a JSON rules object"),
        (' null, "exclusions": [{"region": "Narnia", "start_s": null, "end_s": null, '
         '"reason": ""}], "residency": [], "power_caps_kw": [], "max_one_way_latency_s": null}',
         "Narnia"),
        (" null}", "rules"),
        (' null, "exclusions": [{"region": "DE-LU", "start_s": null, "end_s": null, '
         '"reason": ""}, {"region": "CL-SIC", "start_s": null, "end_s": null, "reason": ""}, '
         '{"region": "US-CAL-CISO", "start_s": null, "end_s": null, "reason": ""}], '
         '"residency": [], "power_caps_kw": [], "max_one_way_latency_s": null}', "no region left"),
    ],
)  # fmt: skip
def test_llm_rules_parser_refuses_invalid_answers(answer, needle):
    with pytest.raises(RuleCommandError) as err:
        LLMRuleParser(FakeBackend(answer)).parse(CMD, G3)
    assert needle in str(err.value)


def test_first_json_object_respects_strings_and_nesting():
    assert first_json_object('x {"a": "}{", "b": {"c": 1}} tail }') == '{"a": "}{", "b": {"c": 1}}'
    assert first_json_object('{"a": 1') is None
    assert first_json_object("no braces") is None


def test_numbers_in_and_unexplained_numbers():
    text = "Epoch 60 (15:00 UTC on 2023-07-01): added 1,234.5 kg CO2 in geo3 and US-CAL-CISO."
    assert numbers_in(text) == [60, 15, 0, 2023, 7, 1, 1234.5]
    assert unexplained_numbers("saved 1,234.5 kg and 7 more", [1234.5, 7]) == []
    assert unexplained_numbers("saved 1,234.6 kg", [1234.5]) == [1234.6]


def test_resolve_scenario_merges_residency_by_intersection():
    base = get_scenario("geo3")
    own = ConstraintSet(
        (Exclusion("DE-LU", 0.0, 3600.0),),
        {"US-CAL-CISO": frozenset({"US-CAL-CISO", "DE-LU"})},
        {"CL-SIC": 9000.0, "DE-LU": 8000.0},
        0.2,
    )
    sc = resolve_scenario(base, constraints=own)
    extra = ConstraintSet(
        (Exclusion("CL-SIC"),),
        {"US-CAL-CISO": frozenset({"US-CAL-CISO", "CL-SIC"}), "CL-SIC": frozenset({"CL-SIC"})},
        {"CL-SIC": 9500.0, "DE-LU": 7000.0, "US-CAL-CISO": 6000.0},
        0.3,
    )
    got = resolve_scenario(sc, constraints=extra).constraints
    # both residency rules hold: California's work may only stay in California
    assert dict(got.residency) == {
        "US-CAL-CISO": frozenset({"US-CAL-CISO"}),
        "CL-SIC": frozenset({"CL-SIC"}),
    }
    assert dict(got.power_caps_kw) == {"CL-SIC": 9000.0, "DE-LU": 7000.0, "US-CAL-CISO": 6000.0}
    assert got.max_one_way_latency_s == 0.2
    assert got.exclusions == (Exclusion("DE-LU", 0.0, 3600.0), Exclusion("CL-SIC"))
    assert math.isinf(got.exclusions[1].end_s)


def test_resolve_scenario_empty_intersection_is_infeasible():
    from greenroute.core.errors import InfeasibleConstraintsError

    own = ConstraintSet(residency={"US-CAL-CISO": frozenset({"DE-LU"})})
    extra = ConstraintSet(residency={"US-CAL-CISO": frozenset({"CL-SIC"})})
    sc = resolve_scenario(resolve_scenario("geo3", constraints=own), constraints=extra)
    assert dict(sc.constraints.residency) == {"US-CAL-CISO": frozenset()}
    with pytest.raises(InfeasibleConstraintsError):
        sc.constraints.check_feasible(sc.origins, sc.regions, sc.duration_s, sc.epoch_s)
