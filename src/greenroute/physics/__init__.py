"""Pure physics: LLM performance, server power, cooling, water, facility ledgers, network.

Numpy in, numpy out, broadcastable over arrays of regions x epochs. Nothing here imports the
simulator or the policies. Every constant is a module-level name with its unit and source.
"""

from greenroute.physics.cooling import (
    AIR_COOLED,
    COOLING_KINDS,
    COOLING_PLANTS,
    WATER_COOLED,
    CoolingPlant,
    chiller_cop,
    cooling_energy_kwh,
    cop,
    crac_cop_moore2005,
    evaporative_fraction,
    get_cooling_plant,
    mechanical_fraction,
)
from greenroute.physics.facility import (
    FACILITY_PRESETS,
    LEDGER_KEYS,
    DefaultFacility,
    FacilityFactors,
    FacilityModel,
    MarlinFacility,
    facility_ledger,
    get_facility_model,
)
from greenroute.physics.llm_perf import (
    PerfModel,
    available_perf,
    perf_model,
    throughput_perf_model,
)
from greenroute.physics.network import (
    great_circle_km,
    latency_matrix_s,
    one_way_latency_s,
)
from greenroute.physics.power import ServerPower, pstate_energy_kwh, server_power_w
from greenroute.physics.psychro import wet_bulb_stull_c
from greenroute.physics.water import (
    LATENT_HEAT_VAPORIZATION_J_PER_KG,
    blowdown_l,
    evaporation_l,
    ewif_l_per_kwh,
    wue_li2023_l_per_kwh,
)

__all__ = [
    "AIR_COOLED",
    "COOLING_KINDS",
    "COOLING_PLANTS",
    "FACILITY_PRESETS",
    "LATENT_HEAT_VAPORIZATION_J_PER_KG",
    "LEDGER_KEYS",
    "WATER_COOLED",
    "CoolingPlant",
    "DefaultFacility",
    "FacilityFactors",
    "FacilityModel",
    "MarlinFacility",
    "PerfModel",
    "ServerPower",
    "available_perf",
    "blowdown_l",
    "chiller_cop",
    "cooling_energy_kwh",
    "cop",
    "crac_cop_moore2005",
    "evaporation_l",
    "evaporative_fraction",
    "ewif_l_per_kwh",
    "facility_ledger",
    "get_cooling_plant",
    "get_facility_model",
    "great_circle_km",
    "latency_matrix_s",
    "mechanical_fraction",
    "one_way_latency_s",
    "perf_model",
    "pstate_energy_kwh",
    "server_power_w",
    "throughput_perf_model",
    "wet_bulb_stull_c",
    "wue_li2023_l_per_kwh",
]
