"""``python -m greenroute.bench.seed004_carbon``: one-source tables of the au-edge carbon
intensities, hand numbers."""

from __future__ import annotations

import pytest

from greenroute.bench.seed004_carbon import one_source_tables


def test_one_source_tables_rescale_the_right_sites():
    # Electricity Maps means of Sydney/Melbourne, the NGA factors (g/kWh) of the five others
    means = {"AU-NSW": 500.0, "AU-VIC": 455.0, "AU-QLD-BNE": 710.0, "AU-SA-ADL": 230.0,
             "AU-WA-PER": 510.0, "AU-TAS-HBA": 150.0, "AU-NT-DRW": 560.0}  # fmt: skip
    t = one_source_tables(means)
    assert t["mixed (scenario)"] == means
    # NGA for all: Sydney 0.66 and Melbourne 0.77 kg/kWh, the rest unchanged
    assert t["NGA for all"]["AU-NSW"] == pytest.approx(660.0)
    assert t["NGA for all"]["AU-VIC"] == pytest.approx(770.0)
    assert t["NGA for all"]["AU-QLD-BNE"] == 710.0
    # EM-like: Brisbane borrows NSW's shape -> x 500/660; Adelaide borrows VIC's -> x 455/770
    assert t["EM-like for all"]["AU-QLD-BNE"] == pytest.approx(710.0 * 500.0 / 660.0)
    assert t["EM-like for all"]["AU-SA-ADL"] == pytest.approx(230.0 * 455.0 / 770.0)
    assert t["EM-like for all"]["AU-NSW"] == 500.0
