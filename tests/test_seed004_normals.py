"""The BoM normals of the synthesised au-edge cities against BoM's current tables where a
transcription of them could be retrieved (data/au_normals.BOM_MEAN_MAX_CROSSCHECK)."""

from __future__ import annotations

import numpy as np
import pytest

from greenroute.data.au_normals import BOM_MEAN_MAX_CROSSCHECK, CITY_NORMALS, CROSSCHECK_MONTHS
from greenroute.scenarios.au_edge import AU_METRO_POPULATION


@pytest.mark.parametrize("key", sorted(BOM_MEAN_MAX_CROSSCHECK))
def test_mean_maxima_agree_with_bom_within_0_3_c(key):
    ours = np.array(CITY_NORMALS[key].tmax_c[CROSSCHECK_MONTHS])
    bom = np.array(BOM_MEAN_MAX_CROSSCHECK[key])
    assert ours.shape == bom.shape == (7,)
    assert np.max(np.abs(ours - bom)) <= 0.3 + 1e-9


def test_hobart_and_darwin_populations_are_the_abs_figures():
    # ABS Regional population 2023-24: ERP 30 June 2024 minus the 2023-24 change
    assert AU_METRO_POPULATION["AU-TAS-HBA"] == 254_930 - 946 == 253_984
    assert AU_METRO_POPULATION["AU-NT-DRW"] == 152_489 - 1_367 == 151_122
