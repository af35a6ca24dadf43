"""The distilled agent as a ``GeoPolicy``: ``llm:PATH`` (a ``greenroute distill`` output) and
``llm:openai:MODEL`` (an OpenAI-compatible server). Importing this module registers the
``llm:`` prefix with ``policies.registry`` (``api`` and the CLI import it).

Each epoch the Manager of every origin decides in origin order (its prompt lists the
destinations chosen before it), then the Worker of every origin, as the RL expert's agents do;
the plan is built by the expert's own code (``policies.rl.geo.RLGeoPolicy.plan``: all of the
origin's work to its destination, a class the destination is closed to goes to the nearest
allowed region; ``hold = 1`` where the Worker defers).

**Valid actions only.** With a scoring backend (a local model; a server that echoes logprobs)
each decision scores every candidate the rules allow (``language.candidate_actions`` with the
run's constraints) by the log-likelihood of its rendered response, all candidates in one
batched forward pass, and takes the best (ties: lowest index): a forbidden region is never a
candidate. A decision with one candidate needs no model call. A Worker whose origin holds no
deferrable work and expects none this epoch executes without a model call (nothing to defer).
Without scoring (a server without ``echo``) the policy generates text and ``language.parse``s
it; an unparseable, unknown or forbidden answer becomes the counted fallback action. The
simulator validates every plan regardless.

Counters (``llm_decisions``, ``llm_invalid_actions``, ``llm_fallbacks``) and the per-decision
latency are reported by ``summary()``, which the run stores as ``extras["policy_summary"]``
(printed by ``greenroute run``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from greenroute.agent import backends as B
from greenroute.agent.fewshot import FewShotIndex, with_examples
from greenroute.agent.language import (
    DEFER,
    EXECUTE,
    LanguageCounters,
    ParseResult,
    Role,
    candidate_actions,
    fallback_action,
    parse,
    render,
    textualize,
)
from greenroute.agent.templates import dc_label
from greenroute.core.errors import ConfigError, DataFormatError
from greenroute.core.types import Observation, Plan
from greenroute.policies.registry import register_policy_prefix
from greenroute.policies.rl import masks as M
from greenroute.policies.rl.features import origin_load_slots
from greenroute.policies.rl.geo import RLGeoPolicy

OPTIONS = ("k", "base_url", "data", "scoring", "max_new_tokens", "mask_saturated", "mask_target")


def unsaturated(obs: Observation, role: Role, cands: list[int], target: float) -> list[int]:
    """The Manager candidates the masked expert's mask keeps (see the module doc); all of
    ``cands`` when the mask would leave none of them."""
    assigned = np.zeros(obs.n_regions)
    for p, d in enumerate(role.decided):
        assigned[d] += origin_load_slots(obs, p, d)
    keep = M.manager_mask(obs, role.origin, assigned, target)
    out = [a for a in cands if keep[a]]
    return out or cands


class AgentRuntime:
    """A backend plus (optionally) a few-shot pool: makes one decision at a time."""

    def __init__(self, backend, pool: FewShotIndex | None = None, k: int = 0,
                 roles: tuple[str, ...] = ("manager", "worker"), path: str = "",
                 max_new_tokens: int = 16, mask_saturated: bool = True,
                 mask_target: float = M.DEFAULT_MASK_TARGET_UTILISATION) -> None:  # fmt: skip
        self.backend = backend
        self.pool = pool
        self.k = int(k) if pool is not None else 0
        self.roles = roles
        self.path = path
        self.max_new_tokens = max_new_tokens
        if not mask_target > 0:
            raise ConfigError(f"mask_target must be a share of capacity > 0, got {mask_target!r}")
        self.mask_saturated = bool(mask_saturated)
        self.mask_target = float(mask_target)
        self.counters = LanguageCounters()
        self.model_calls = 0
        self.model_s = 0.0

    def prompt_for(self, prompt: str, role: str, origin: int | None) -> str:
        if self.k <= 0 or self.pool is None:
            return prompt
        return with_examples(prompt, self.pool.select(prompt, role, origin, self.k))

    def choose(self, prompt: str, texts: list[str], role: str, origin: int | None) -> int:
        """Index of the candidate text with the highest log-likelihood (ties: lowest)."""
        if len(texts) == 1:
            return 0
        self.backend.use_adapter(role if role in self.roles else None)
        t0 = time.perf_counter()
        scores = np.asarray(self.backend.score(self.prompt_for(prompt, role, origin), texts))
        self.model_s += time.perf_counter() - t0
        self.model_calls += 1
        return int(np.argmax(scores))

    def decide(self, obs: Observation, role: Role, constraints=None) -> int:
        """One decision: a valid action, counted."""
        cands = candidate_actions(obs, role, constraints)
        if self.mask_saturated and role.kind == "manager" and len(cands) > 1:
            cands = unsaturated(obs, role, cands, self.mask_target)
        prompt = textualize(obs, role, constraints)
        if self.backend.supports_scoring or len(cands) <= 1:
            texts = [render(a, obs, role) for a in cands]
            a = cands[self.choose(prompt, texts, role.kind, role.origin)] if cands else None
            if a is None:  # nothing allowed: parse's fallback (the validator has the last word)
                return self.counters.record(parse("", obs, role, constraints)).action
            return self.counters.record(ParseResult(a, True, "ok", "", a)).action
        self.backend.use_adapter(role.kind if role.kind in self.roles else None)
        t0 = time.perf_counter()
        text = self.backend.generate(self.prompt_for(prompt, role.kind, role.origin),
                                     self.max_new_tokens)  # fmt: skip
        self.model_s += time.perf_counter() - t0
        self.model_calls += 1
        res = parse(text, obs, role, constraints)
        if res.valid and res.action not in cands:  # named a saturated region
            fb = fallback_action(obs, role, constraints)
            res = ParseResult(fb, False, "forbidden", "saturated; fallback", res.named)
        return self.counters.record(res).action


class LLMManager:
    def __init__(self, rt: AgentRuntime) -> None:
        self.rt = rt
        self.path = rt.path

    def check(self, n_regions: int, scenario: str) -> None:
        """The text agent runs on any number of regions (the prompt lists them all)."""

    def act_all(self, obs: Observation) -> np.ndarray:
        cons = getattr(obs, "constraints", None)
        dest: list[int] = []
        for o in range(obs.n_origins):
            dest.append(self.rt.decide(obs, Role.manager(o, dest), cons))
        return np.asarray(dest, dtype=np.int64)


class LLMWorker:
    """The Worker agents; ``hold_for`` and ``plan_hold`` are the RL expert Worker's hooks."""

    def __init__(self, rt: AgentRuntime) -> None:
        self.rt = rt
        self.path = rt.path
        self.last_defer = np.zeros(0, dtype=bool)

    def plan_hold(self, obs: Observation, memory, dest: np.ndarray) -> np.ndarray:
        hold = self.hold_for(obs, memory)
        self.last_defer = hold > 0.5
        return hold

    def hold_for(self, obs: Observation, memory) -> np.ndarray:
        hold = np.zeros(obs.n_origins)
        cons = getattr(obs, "constraints", None)
        for o in range(obs.n_origins):
            if float(obs.pending_deferrable[o]) <= 0 and float(obs.demand_rps[0, 1, o]) <= 0:
                continue  # nothing to defer: execute without asking
            a = self.rt.decide(obs, Role.worker(o, memory), cons)
            hold[o] = 1.0 if a == DEFER else 0.0
        return hold


class LLMGeoPolicy(RLGeoPolicy):
    """The distilled Manager and Worker, with the RL expert's plan building."""

    def __init__(self, rt: AgentRuntime, name: str, options: dict | None = None) -> None:
        super().__init__(LLMManager(rt), LLMWorker(rt), name)
        self.rt = rt
        self.options = {"agent": rt.path, **(options or {})}
        self._plan_s = 0.0
        self._epochs = 0

    def reset(self, cluster, seed: int) -> None:
        super().reset(cluster, seed)
        self.rt.counters = LanguageCounters()
        self.rt.model_calls, self.rt.model_s = 0, 0.0
        self._plan_s, self._epochs = 0.0, 0

    def plan(self, obs: Observation) -> Plan:
        t0 = time.perf_counter()
        p = super().plan(obs)
        self._plan_s += time.perf_counter() - t0
        self._epochs += 1
        return Plan(route=p.route, hold=p.hold, rationale="LLM" + p.rationale.removeprefix("RL"))

    def metrics(self) -> dict[str, float]:
        """The language API's counters (``llm_decisions``, ``llm_invalid_actions``,
        ``llm_fallbacks``), reported in the run's metrics."""
        return {k: float(v) for k, v in self.rt.counters.as_metrics().items()}

    def summary(self) -> dict:
        calls = max(self.rt.model_calls, 1)
        return {
            **self.rt.counters.as_metrics(),
            "llm_model_calls": self.rt.model_calls,
            "llm_decision_latency_ms": round(1e3 * self.rt.model_s / calls, 2),
            "llm_plan_ms": round(1e3 * self._plan_s / max(self._epochs, 1), 2),
        }


# ------------------------------------------------------------------------- loading
def load_runtime(
    spec: str,
    k: int | None = None,
    base_url: str | None = None,
    data: str | None = None,
    scoring: bool | None = None,
    max_new_tokens: int = 16,
    mask_saturated: bool = True,
    mask_target: float = M.DEFAULT_MASK_TARGET_UTILISATION,
) -> AgentRuntime:
    """``PATH`` (a distilled agent directory) or ``openai:MODEL``."""
    mask = {"mask_saturated": mask_saturated, "mask_target": mask_target}
    if spec.startswith("openai:"):
        model = spec[len("openai:") :]
        if not model:
            raise ConfigError("llm:openai:MODEL needs a model name, e.g. llm:openai:qwen2.5-7b")
        backend = B.OpenAIBackend(model, base_url, scoring=scoring)
        pool = FewShotIndex(_pool_rows(Path(data) / "train.jsonl")) if data else None
        return AgentRuntime(backend, pool, k if k is not None else (2 if pool else 0),
                            roles=(), path=spec, max_new_tokens=max_new_tokens,
                            **mask)  # fmt: skip
    path = Path(spec)
    meta_path = path / "agent.json"
    if not meta_path.is_file():
        raise ConfigError(
            f"llm:{spec}: {meta_path} not found; give a directory written by greenroute distill "
            "or llm:openai:MODEL"
        )
    meta = json.loads(meta_path.read_text())
    model, tok = B.load_base(_base_spec(meta["base"]))
    roles = tuple(meta.get("roles", ()))
    adapters = path / "adapters"
    if meta["method"] != "fewshot" and adapters.is_dir():
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapters / roles[0]), adapter_name=roles[0])
        for role in roles[1:]:
            model.load_adapter(str(adapters / role), adapter_name=role)
        model.eval()
    backend = B.HFBackend(model, tok, meta.get("max_prompt_tokens", B.DEFAULT_MAX_PROMPT_TOKENS))
    kk = meta.get("k", 0) if k is None else k
    pool_file = path / "fewshot_pool.jsonl"
    pool = FewShotIndex(_pool_rows(pool_file)) if kk > 0 and pool_file.is_file() else None
    return AgentRuntime(backend, pool, kk, roles, str(path), max_new_tokens, **mask)


def _base_spec(base: dict) -> str | None:
    """The ``load_base`` spec of ``agent.json``'s base (None: the default SmolLM2)."""
    if base.get("dir") is None:
        return None
    d = Path(base["dir"])
    return str(d / base["gguf_file"]) if base.get("gguf_file") else str(d)


def _pool_rows(path: Path) -> list[dict]:
    if not path.is_file():
        raise DataFormatError(path, "few-shot pool not found")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_llm_policy(spec: str, **options) -> LLMGeoPolicy:
    """The ``llm:`` prefix loader (options: k, base_url, data, scoring, max_new_tokens,
    mask_saturated, mask_target)."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(
            f"unknown option(s) {unknown} for policy llm:{spec}; "
            f"valid choices: {', '.join(OPTIONS)}"
        )
    rt = load_runtime(spec, **options)
    name = f"llm:{spec}" if spec.startswith("openai:") else f"llm:{Path(spec).name}"
    return LLMGeoPolicy(rt, name, options)


register_policy_prefix("llm", load_llm_policy, OPTIONS)


# ------------------------------------------------------------------------- agreement
def candidate_texts(row: dict) -> list[str]:
    """The rendered candidates of a dataset row (without its observation)."""
    if row["role"] == "worker":
        return ["1 (execute)" if a == EXECUTE else "0 (defer)" for a in row["candidates"]]
    regions = row["obs"]["regions"]
    return [dc_label(regions, int(a)) for a in row["candidates"]]


def agreement(agent: str | Path, data: str | Path, role: str = "manager", n_rows: int = 200,
              backend=None) -> dict:  # fmt: skip
    """Share of the last ``n_rows`` held-out (validation) decisions of ``role`` where the agent
    picks the teacher's action; also the share of those where the teacher's action is the
    origin's own region (Manager) or execute (Worker), the "always local" baseline."""
    from greenroute.agent.dataset import load_rows

    rows = load_rows(data, "val", role)[-n_rows:]
    if not rows:
        raise ConfigError(f"no {role} rows in the validation split of {data}")
    meta = json.loads((Path(agent) / "agent.json").read_text())
    if backend is None:
        rt = load_runtime(str(agent))
    else:
        pool_file = Path(agent) / "fewshot_pool.jsonl"
        pool = FewShotIndex(_pool_rows(pool_file)) if meta.get("k", 0) > 0 else None
        rt = AgentRuntime(backend, pool, meta.get("k", 0), tuple(meta["roles"]), str(agent))
    hits, local_hits = 0, 0
    for row in rows:
        texts = candidate_texts(row)
        a = row["candidates"][rt.choose(row["prompt"], texts, role, row.get("origin"))]
        hits += int(a == row["action"])
        if role == "manager":
            regs = row["obs"]["regions"]
            own = regs.index(row["obs"]["origin"]) if row["obs"]["origin"] in regs else None
            local_hits += int(row["action"] == own)
        else:
            local_hits += int(row["action"] == EXECUTE)
    return {
        "role": role,
        "rows": len(rows),
        "agreement": hits / len(rows),
        "teacher_local_share": local_hits / len(rows),
        "decision_latency_ms": round(1e3 * rt.model_s / max(rt.model_calls, 1), 2),
    }
