"""Network latency between request origins and datacenters.

MARLIN eq. 2 (seed 001 §3.1): ``LA_net = dist x λ_media + R_source,dest x σ_hop``. Here

    one_way_s = METRO_FLOOR_S
              + distance_km x FIBRE_S_PER_KM x ROUTE_INFLATION      (dist x λ_media)
              + hops(distance_km) x PER_HOP_S                        (R x σ_hop)
    hops(d)   = BASE_HOPS + d / KM_PER_HOP

with the great-circle (haversine) distance. TTFT counts the network twice (request in, first
token out; MARLIN eq. 3): use ``2 x one_way_s``. Under the ``marlin`` preset
(:data:`NETWORK_PRESETS`) the inflation is 1 and the floor 0: eq. 2 as written.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

# IUGG mean Earth radius R1 = (2a + b)/3 of GRS 80 (Moritz 2000, "Geodetic Reference System
# 1980", J. Geodesy 74: 128-133).
EARTH_MEAN_RADIUS_KM = 6371.0088

# Speed of light in vacuum (exact, SI definition of the metre).
SPEED_OF_LIGHT_KM_PER_S = 299_792.458
# Group index of standard single-mode fibre at 1550 nm: 1.4682 (Corning SMF-28 Ultra product
# information sheet). Light in silica fibre travels at c / 1.468: ~4.9 µs per km.
FIBRE_GROUP_INDEX = 1.4682
FIBRE_S_PER_KM = FIBRE_GROUP_INDEX / SPEED_OF_LIGHT_KM_PER_S  # ≈ 4.897e-6 s/km

# Fibre paths are longer than great circles (conduits follow roads, rails and coasts, and
# routing is not shortest-path). Bozkurt et al. (2018), "Dissecting Latency in the Internet's
# Fiber Infrastructure", arXiv:1811.10737, report the rule of thumb from earlier measurement
# campaigns: latency ≈ line-of-sight distance x 2.1 / speed of light in fibre (the shortest
# conduit paths of the US InterTubes map would give 1.3). We use the measured 2.1.
ROUTE_INFLATION = 2.1

# Router hops (MARLIN's R_source,dest). Engineering assumption (no per-pair traceroute data
# here): 6 hops at the two ends (access/aggregation/provider-edge on the user side, border
# and spine/leaf in the datacenter) plus one core hop per 800 km of long-haul path.
BASE_HOPS = 6.0
KM_PER_HOP = 800.0
# Per-hop processing (MARLIN's σ_hop). Papagiannaki et al. (2003), "Measurement and analysis
# of single-hop delay on an IP backbone network", IEEE JSAC 21(6), found single-hop router
# delays mostly in the tens of µs; we take 50 µs (engineering choice within that range).
PER_HOP_S = 50e-6

# Intra-metro floor: last-mile access and datacenter ingress (load balancer) add about a
# millisecond one way even at zero distance. Engineering assumption, so that a request
# served in its own metro still pays a small, realistic network cost.
METRO_FLOOR_S = 1e-3


# Keyword arguments of one_way_latency_s per physics preset: "marlin" is MARLIN eq. 2 in its
# plain form (seed 001 §3.1: dist x λ_media + R x σ_hop with the great-circle distance, no
# route inflation and no metro floor); "default" keeps this module's defaults.
NETWORK_PRESETS: dict[str, dict[str, float]] = {
    "default": {},
    "marlin": {"route_inflation": 1.0, "metro_floor_s": 0.0},
}


def network_preset(name: str) -> dict[str, float]:
    """Keyword arguments of :func:`one_way_latency_s` for a physics/facility preset (unknown
    names get the defaults: the facility preset is validated where it is built)."""
    return dict(NETWORK_PRESETS.get(name, {}))


def great_circle_km(
    lat1_deg: ArrayLike, lon1_deg: ArrayLike, lat2_deg: ArrayLike, lon2_deg: ArrayLike
) -> np.ndarray:
    """Haversine distance (km) on a sphere of radius ``EARTH_MEAN_RADIUS_KM``; broadcasts."""
    phi1 = np.radians(np.asarray(lat1_deg, dtype=np.float64))
    phi2 = np.radians(np.asarray(lat2_deg, dtype=np.float64))
    dphi = phi2 - phi1
    dlam = np.radians(np.asarray(lon2_deg, dtype=np.float64) - np.asarray(lon1_deg, dtype=float))
    h = np.sin(dphi / 2.0) ** 2 + np.cos(phi1) * np.cos(phi2) * np.sin(dlam / 2.0) ** 2
    return 2.0 * EARTH_MEAN_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def hop_count(distance_km: ArrayLike) -> np.ndarray:
    """Modelled router hops over a path of ``distance_km`` great-circle km."""
    return BASE_HOPS + np.asarray(distance_km, dtype=np.float64) / KM_PER_HOP


def one_way_latency_s(
    distance_km: ArrayLike,
    *,
    route_inflation: float = ROUTE_INFLATION,
    fibre_s_per_km: float = FIBRE_S_PER_KM,
    per_hop_s: float = PER_HOP_S,
    metro_floor_s: float = METRO_FLOOR_S,
) -> np.ndarray:
    """One-way network latency (s) over ``distance_km`` of great circle (MARLIN eq. 2)."""
    d = np.asarray(distance_km, dtype=np.float64)
    return metro_floor_s + d * fibre_s_per_km * route_inflation + hop_count(d) * per_hop_s


def latency_matrix_s(
    origin_latlon: ArrayLike, region_latlon: ArrayLike, **kwargs: float
) -> np.ndarray:
    """``[o, r]`` one-way latency (s) from origins ``[o, 2]`` to regions ``[r, 2]`` (lat, lon
    in degrees). Keyword arguments go to :func:`one_way_latency_s`."""
    o = np.asarray(origin_latlon, dtype=np.float64).reshape(-1, 2)
    r = np.asarray(region_latlon, dtype=np.float64).reshape(-1, 2)
    d = great_circle_km(o[:, None, 0], o[:, None, 1], r[None, :, 0], r[None, :, 1])
    return one_way_latency_s(d, **kwargs)
