"""WAN transfers of models and data between regions: time, energy, carbon, price, and a ledger.

Every byte that moves is one :class:`Transfer` in a :class:`ByteLedger`; the receiving side
counts what arrives separately (:meth:`ByteLedger.arrive`) so conservation can be checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Aslan, Mayers, Koomey & France, "Electricity Intensity of Internet Data Transmission:
# Untangling the Estimates", J. Industrial Ecology 22(4):785-798 (2018): 0.06 kWh/GB for the
# fixed-line core and access network in 2015, halving roughly every 2 years.
ASLAN_2015_KWH_PER_GB = 0.06
ASLAN_REFERENCE_YEAR = 2015
ASLAN_HALVING_YEARS = 2.0


def aslan_kwh_per_gb(year: int) -> float:
    """Aslan et al.'s 2015 figure extrapolated with their 2-year halving to ``year``."""
    return ASLAN_2015_KWH_PER_GB * 0.5 ** ((year - ASLAN_REFERENCE_YEAR) / ASLAN_HALVING_YEARS)


# default: the trend extrapolated to 2024 (the signal year of the gcos scenario) ~0.00265 kWh/GB
DEFAULT_KWH_PER_GB = aslan_kwh_per_gb(2024)

# Inter-region egress list prices (USD/GB) by destination continent, read off the GCP premium
# tier matrix in shared/data/grid/network_cost/gcp_transmission_cost_matrix.csv (SustainCluster
# snapshot 293fbd1): columns us-* 0.02, europe-* 0.05, asia-* 0.08, australia 0.10,
# southamerica 0.14, africa 0.11. Same-region reads are free.
GCP_EGRESS_USD_PER_GB_BY_DST_CONTINENT: dict[str, float] = {
    "north-america": 0.02,
    "europe": 0.05,
    "asia": 0.08,
    "oceania": 0.10,
    "south-america": 0.14,
    "africa": 0.11,
}
# Effective throughput of one inter-region bulk copy (assumption: 1 Gbit/s per flow, a common
# per-stream ceiling for cross-region object-store copies); a scenario parameter.
DEFAULT_WAN_GBIT_PER_S = 1.0
# Reading from the same region's object storage (assumption: 4 Gbit/s per flow).
DEFAULT_LOCAL_GBIT_PER_S = 4.0
BITS_PER_BYTE = 8.0


@dataclass(frozen=True)
class TransferCost:
    time_s: float
    energy_kwh: float
    carbon_kg: float
    cost_usd: float


def transfer_cost(
    size_gb: float,
    *,
    same_region: bool,
    latency_s: float,
    wan_gbit_per_s: float,
    local_gbit_per_s: float,
    kwh_per_gb: float,
    ci_src_g_per_kwh: float,
    ci_dst_g_per_kwh: float,
    egress_usd_per_gb: float,
    electricity_usd_per_kwh: float,
) -> TransferCost:
    """One copy of ``size_gb``. A same-region read takes local bandwidth and costs nothing on the
    WAN; a WAN copy takes ``latency_s + size / bandwidth``, ``kwh_per_gb * size`` of network
    energy split half at each end's carbon intensity, the egress price per GB plus that energy
    at ``electricity_usd_per_kwh``."""
    if same_region:
        return TransferCost(size_gb * BITS_PER_BYTE / local_gbit_per_s, 0.0, 0.0, 0.0)
    time_s = latency_s + size_gb * BITS_PER_BYTE / wan_gbit_per_s
    energy_kwh = kwh_per_gb * size_gb
    carbon_kg = energy_kwh * 0.5 * (ci_src_g_per_kwh + ci_dst_g_per_kwh) / 1000.0
    cost_usd = egress_usd_per_gb * size_gb + energy_kwh * electricity_usd_per_kwh
    return TransferCost(time_s, energy_kwh, carbon_kg, cost_usd)


@dataclass(frozen=True)
class Transfer:
    """One copy in the ledger. ``src`` is a region index, or -1 for nothing (never used)."""

    key: tuple
    kind: str  # "model" | "data"
    reason: str  # "miss" (cold start) | "migrate" (policy-ordered copy)
    src: int
    dst: int
    size_gb: float
    start_s: float
    arrive_s: float
    energy_kwh: float
    carbon_kg: float
    cost_usd: float


@dataclass
class ByteLedger:
    """All transfers, plus the bytes each region received (counted by the receiver)."""

    n_regions: int
    transfers: list[Transfer] = field(default_factory=list)
    arrived_gb: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.arrived_gb:
            self.arrived_gb = [0.0] * self.n_regions

    def record(self, t: Transfer) -> None:
        self.transfers.append(t)

    def arrive(self, dst: int, size_gb: float) -> None:
        self.arrived_gb[dst] += size_gb

    def sent_gb(self, *, wan_only: bool = False, reason: str | None = None) -> float:
        return sum(
            t.size_gb
            for t in self.transfers
            if (not wan_only or t.src != t.dst) and (reason is None or t.reason == reason)
        )

    def totals(self) -> dict[str, float]:
        wan = [t for t in self.transfers if t.src != t.dst]
        return {
            "bytes_moved_gb": sum(t.size_gb for t in wan),
            "bytes_migrated_gb": sum(t.size_gb for t in wan if t.reason == "migrate"),
            "transfer_energy_kwh": sum(t.energy_kwh for t in wan),
            "transfer_carbon_kg": sum(t.carbon_kg for t in wan),
            "transfer_cost_usd": sum(t.cost_usd for t in wan),
        }
