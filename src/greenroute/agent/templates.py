"""The Manager and Worker prompts of seed 000 Appendix B.1, filled from an :class:`Observation`.

The paper's two "API calls" (``../shared/seeds/distilling-rl-expert-into-llm-agent.txt``,
Appendix B.1, "Manager Action Prompt (Geographical Scheduling)" and "Worker Action Prompt
(Temporal Scheduling)") are ``### INSTRUCTION / ### INPUT / ### RESPONSE`` texts whose input
lists every datacenter, so their length follows the cluster and one model reads 3, 5 or 10
regions. The instruction sentences are the paper's; what we changed, and why:

- one prompt per agent (the paper's A.1: N Manager agents and N Worker agents, each with one
  discrete action), not one prompt asking for N integers: an LLM policy scores each valid
  action by log-likelihood, which needs at most N candidates per decision, not N^N. The
  Manager prompt still shows the whole cluster, every origin's workload and the destinations
  the managers before it chose this epoch (the RL expert's managers act in turn too,
  ``policies.rl.geo.Manager.act_all``), so the text holds what the expert's vector holds;
- the INPUT lines hold the expert's features (Tables 3 and 4 as ``policies.rl.features``
  builds them) in physical units, and a few more numbers the paper's example lines name
  (utilisation, queue, water, latency) and an operator would expect; each datacenter says
  whether this decision may use it (the constraints' mask). ``Avail`` is the paper's "CPU
  Avail": the free share of a region's serving slots (continuous-batching seats), computed
  as the expert computes it (negative when the backlog exceeds an epoch of capacity).

Every number is printed with a fixed number of decimals (negative zero printed as zero,
NaN as ``n/a``), so the same observation always gives the same text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from greenroute.core.types import Observation
from greenroute.policies.rl import features as F

RESPONSE_HEADER = "### RESPONSE:"
SECONDS_PER_HOUR = 3600.0

MANAGER_INSTRUCTION = (
    "You are an intelligent workload scheduler for a cluster of {n} geo-distributed Data "
    "Centers. Based on the aggregated workload originating at each datacenter and the current "
    "global status of the cluster, your goal is to decide the optimal destination for the "
    "workload originating at {origin} to minimize carbon emissions, energy costs, and SLA "
    "violations. Your output must be one destination datacenter ID, DC-1 to DC-{n}; the "
    "destinations already decided this epoch for the other origins are listed. Prioritize "
    "minimizing carbon intensity, but respect resource constraints and never choose a "
    "datacenter marked not allowed. Do not explain your answer."
)
WORKER_INSTRUCTION = (
    "You are an expert temporal scheduler for {n} local data centers. Based on the current "
    "pending task and the local status of {dc}, decide whether to execute the task now (1) or "
    "defer it (0). Your goal is to execute tasks when local conditions (carbon intensity, "
    "electricity price) are most favorable, without violating the task's SLA. Your output "
    "must be one integer (0 or 1) for the worker of {dc}. Be concise."
)


def num(x: float, decimals: int, signed: bool = False) -> str:
    """``x`` with ``decimals`` fixed decimals; ``-0.0`` prints as ``0.0``, NaN/inf as ``n/a``."""
    x = float(x)
    if not math.isfinite(x):
        return "n/a"
    v = round(x, decimals) + 0.0  # -0.0 + 0.0 == +0.0
    return f"{v:+.{decimals}f}" if signed else f"{v:.{decimals}f}"


def dc_label(regions: Sequence[str], r: int) -> str:
    """``DC-3 (US-CAL-CISO)``: 1-based position in the prompt, then the region key."""
    return f"DC-{r + 1} ({regions[r]})"


def origin_label(obs: Observation, o: int) -> str:
    origin = obs.origins[o]
    if origin in obs.regions:
        return dc_label(obs.regions, obs.regions.index(origin))
    return f"origin {origin}"


def _time_line(obs: Observation) -> str:
    t = obs.time_utc
    stamp = t.strftime("%Y-%m-%d %H:%M UTC") if t is not None else "n/a"
    return (f"Time: {stamp}, epoch {int(obs.epoch)}, epoch length "
            f"{num(obs.epoch_s / 60.0, 1)} min, TTFT SLO {num(obs.ttft_slo_s, 2)} s")  # fmt: skip


def _deadline(obs: Observation, o: int) -> str:
    slack_s = float(obs.pending_deadline_s[o]) - float(obs.time_s)
    return f"in {num(slack_s / SECONDS_PER_HOUR, 2)} h" if math.isfinite(slack_s) else "none"


def _workload_line(obs: Observation, o: int) -> str:
    dem = obs.demand_rps[0, :, o]
    return (f"- Workload at {origin_label(obs, o)}: interactive {num(dem[0], 2)} req/s, "
            f"deferrable {num(dem[1], 2)} req/s, held {num(obs.pending_deferrable[o], 0)} req, "
            f"next deadline {_deadline(obs, o)}")  # fmt: skip


def assigned_slots(obs: Observation, decided: Sequence[int]) -> np.ndarray:
    """Busy slots the destinations decided so far add to each region (origin ``i`` of the
    epoch chose ``decided[i]``): the expert's ``assigned`` (``Manager.act_all``)."""
    assigned = np.zeros(obs.n_regions)
    for o, d in enumerate(decided):
        assigned[int(d)] += F.origin_load_slots(obs, o, int(d))
    return assigned


def _cap(obs: Observation, r: int) -> float:
    return max(float(obs.capacity_slots[r]), 1e-9)


def manager_prompt(obs: Observation, o: int, decided: Sequence[int], allowed: set[int]) -> str:
    """Appendix B.1 Manager prompt for the workload originating at ``obs.origins[o]``."""
    regions = obs.regions
    assigned = assigned_slots(obs, decided)
    lines = [_time_line(obs), "Workloads:"]
    lines += [_workload_line(obs, i) for i in range(obs.n_origins)]
    lines.append(f"Cluster Status (latency one-way from {origin_label(obs, o)}):")
    for r in range(obs.n_regions):
        cap = _cap(obs, r)
        # free capacity as the expert sees it (features.dc_features): decided work + backlog
        avail = 1.0 - min((assigned[r] + obs.backlog_slot_s[r] / obs.epoch_s) / cap, 2.0)
        lines.append(
            f"- {dc_label(regions, r)}: Avail {num(100 * avail, 1)}%, "
            f"Util {num(100 * min(obs.busy_slots[r] / cap, 2.0), 1)}%, "
            f"Queue {num(obs.queue_len[r], 0)} req, "
            f"CI {num(obs.carbon_intensity_g_per_kwh[0, r], 1)} g/kWh, "
            f"Price {num(obs.price_usd_per_kwh[0, r], 4)} $/kWh, "
            f"Water {num(obs.water_l_per_it_kwh[0, r], 2)} L/kWh, "
            f"Temp {num(obs.temp_c[0, r], 1)} degC, "
            f"Latency {num(1e3 * obs.latency_s[o, r], 1)} ms, "
            + ("allowed" if r in allowed else "not allowed")
        )
    done = ", ".join(f"{origin_label(obs, i)} -> DC-{int(d) + 1}" for i, d in enumerate(decided))
    lines.append(f"Decided this epoch: {done or 'none'}")
    lines.append(f"Decide for: workload at {origin_label(obs, o)}")
    instr = MANAGER_INSTRUCTION.format(n=obs.n_regions, origin=origin_label(obs, o))
    return _assemble(instr, lines)


def _trend(values: np.ndarray) -> str:
    return "[" + ", ".join(num(v, 1, signed=True) for v in values) + "]"


def worker_prompt(obs: Observation, o: int, memory: F.TrendMemory | None) -> str:
    """Appendix B.1 Worker prompt for the worker that holds origin ``o``'s deferrable work
    (at datacenter ``features.worker_region(obs, o)``), with the expert's Table 4 features."""
    j = F.worker_region(obs, o)
    slack_s = float(obs.pending_deadline_s[o]) - float(obs.time_s)
    slack_h = min(slack_s / SECONDS_PER_HOUR, 24.0) if math.isfinite(slack_s) else 24.0
    urgency = 1.0 - min(slack_h / F.HOURS_SCALE, 1.0)  # as features.worker_obs
    cap = _cap(obs, j)
    util = min(obs.busy_slots[j] / cap, 2.0)
    avail = 1.0 - min((obs.busy_slots[j] + obs.backlog_slot_s[j] / obs.epoch_s) / cap, 2.0)
    ci_now = float(obs.carbon_intensity_g_per_kwh[0, j])
    t_now = float(obs.temp_c[0, j])
    past_ci = memory.past("ci", j, ci_now) if memory else np.full(F.TREND_PAST, ci_now)
    past_t = memory.past("temp", j, t_now) if memory else np.full(F.TREND_PAST, t_now)
    fut_ci = F._future(obs.carbon_intensity_g_per_kwh[:, j])
    fut_t = F._future(obs.temp_c[:, j])
    dc = dc_label(obs.regions, j)
    lines = [
        _time_line(obs),
        f"-- {dc} Status --",
        f"Pending Task: held {num(obs.pending_deferrable[o], 0)} req, next deadline "
        f"{_deadline(obs, o)}, urgency {num(urgency, 2)}, "
        f"arrivals {num(obs.demand_rps[0, 1, o], 2)} req/s, "
        f"service {num(obs.slot_s_per_request[1, j], 2)} slot-s/req, "
        f"energy {num(1e3 * obs.it_kwh_per_request[1, j], 3)} Wh/req",
        f"Local State: Avail {num(100 * avail, 1)}%, Util {num(100 * util, 1)}%, "
        f"Queue {num(obs.queue_len[j], 0)} req, CI {num(ci_now, 1)} g/kWh, "
        f"Price {num(obs.price_usd_per_kwh[0, j], 4)} $/kWh, Temp {num(t_now, 1)} degC",
        f"CI Trend (g/kWh vs now): past {_trend(past_ci - ci_now)}, "
        f"next {F.TREND_FUTURE} epochs {_trend(fut_ci - ci_now)}",
        f"Temp Trend (degC vs now): past {_trend(past_t - t_now)}, "
        f"next {F.TREND_FUTURE} epochs {_trend(fut_t - t_now)}",
    ]
    return _assemble(WORKER_INSTRUCTION.format(n=obs.n_regions, dc=dc), lines)


def _assemble(instruction: str, input_lines: list[str]) -> str:
    body = "\n".join(input_lines)
    return f"### INSTRUCTION:\n{instruction}\n\n### INPUT:\n{body}\n\n{RESPONSE_HEADER}\n"
