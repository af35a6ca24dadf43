"""The shared-prompt scorer gives the same log-likelihoods as ``HFBackend.score``."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"

pytest.importorskip("transformers")

from agent_tiny import build_tiny_model
from greenroute.agent.backends import HFBackend, load_base
from greenroute.agent.prefix_scoring import PrefixSharedBackend


def test_prefix_shared_scores_equal_full_batch(tmp_path) -> None:
    model, tok = load_base(str(build_tiny_model(tmp_path / "m", seed=3)))
    full = HFBackend(model, tok)
    fast = PrefixSharedBackend.wrap(full)
    prompt = "### INPUT:\nDC-1 CI 236.2 g/kWh\n### RESPONSE:\n"
    cands = ["DC-1 (DE-LU)", "DC-2 (CL-SIC)", "DC-3 (US-CAL-CISO)", "1"]  # unequal lengths
    want, got = full.score(prompt, cands), fast.score(prompt, cands)
    assert np.allclose(got, want, rtol=0, atol=1e-4)
    assert int(np.argmax(got)) == int(np.argmax(want))
    # a truncated prompt (its last tokens) is scored the same way by both
    full.max_prompt_tokens = fast.max_prompt_tokens = 12
    assert np.allclose(fast.score(prompt, cands), full.score(prompt, cands), atol=1e-4)
