"""GPU and LLM catalogs: the static facts the physics needs.

GPU numbers are from NVIDIA's data sheets (SXM parts):
- A100 80GB SXM: TDP 400 W, HBM2e 2,039 GB/s, FP16/BF16 dense 312 TFLOPS
  ("NVIDIA A100 Tensor Core GPU" data sheet, 2021).
- H100 80GB SXM: TDP 700 W, HBM3 3,350 GB/s, BF16 dense 989 TFLOPS
  ("NVIDIA H100 Tensor Core GPU" data sheet, 2023).
Idle and phase powers are SplitwiseSim's measured constants (``configs/power_model/constant.yaml``,
copied into ``shared/data/perf/splitwise_gpu_power_constants.csv``), server TDPs are its
DGX SKUs (DGX-A100 6,500 W; DGX-H100 10,200 W; 8 GPUs each).

LLM shapes are from the models' ``config.json`` on Hugging Face (also visible in vidur's
profiles ``n_head, n_kv_head, n_embd``): KV bytes per token =
2 (K and V) x layers x kv_heads x head_dim x bytes per element (fp16 = 2).
"""

from __future__ import annotations

from dataclasses import dataclass

BYTES_PER_FP16 = 2  # IEEE 754 half precision
BYTES_PER_GB = 1e9  # the catalog's memory_gb and weight_bytes use decimal GB (SI)

# Share of the instance's HBM kept free of weights and KV for the CUDA context, NCCL buffers,
# activations and allocator fragmentation. Engineering assumption: vLLM's default
# ``gpu_memory_utilization=0.9`` (vLLM EngineArgs) leaves the same 10 %.
RUNTIME_RESERVE_FRACTION = 0.10

# An instance is offered only if its KV capacity holds at least one full-length request of
# this many tokens: 8,192 is the longest context of the catalog's models (Llama 3, Dubey et al.
# 2024; Llama 2 has 4,096). Engineering threshold for "weights fit with room for KV".
MIN_KV_TOKENS = 8192


@dataclass(frozen=True)
class GPU:
    key: str
    tdp_w: float
    idle_w: float  # SplitwiseSim constant.yaml
    prompt_phase_w: float  # SplitwiseSim constant.yaml (prefill, compute bound)
    token_phase_w: float  # SplitwiseSim constant.yaml (decode, memory bound)
    memory_gb: float
    mem_bandwidth_gb_s: float
    bf16_tflops: float
    server_tdp_w: float  # whole 8-GPU DGX server, SplitwiseSim hardware_repo
    gpus_per_server: int = 8

    @property
    def host_share_w(self) -> float:
        """Per-GPU share of the non-GPU server power (CPUs, NICs, fans) at TDP."""
        return (self.server_tdp_w - self.gpus_per_server * self.tdp_w) / self.gpus_per_server


GPUS: dict[str, GPU] = {
    "a100-80gb": GPU("a100-80gb", 400.0, 63.0, 400.0, 250.0, 80.0, 2039.0, 312.0, 6500.0),
    "h100-80gb": GPU("h100-80gb", 700.0, 75.0, 700.0, 380.0, 80.0, 3350.0, 989.0, 10200.0),
}


@dataclass(frozen=True)
class LLM:
    key: str
    params_b: float  # billions of parameters
    n_layers: int
    n_heads: int
    n_kv_heads: int
    hidden: int
    perf_key: str  # name of the model in the perf tables (Splitwise / vidur)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.n_heads

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * BYTES_PER_FP16

    @property
    def weight_bytes(self) -> float:
        return self.params_b * 1e9 * BYTES_PER_FP16


LLMS: dict[str, LLM] = {
    # Llama 2 (Touvron et al. 2023, Table 1 + HF config): 7B has MHA, 70B has GQA with 8 KV heads.
    "llama2-7b": LLM("llama2-7b", 6.74, 32, 32, 32, 4096, "Llama-2-7b-hf"),
    "llama2-70b": LLM("llama2-70b", 68.98, 80, 64, 8, 8192, "Llama-2-70b-hf"),
    # Llama 3 (Dubey et al. 2024, Table 3 + HF config): GQA with 8 KV heads for both sizes.
    "llama3-8b": LLM("llama3-8b", 8.03, 32, 32, 8, 4096, "Meta-Llama-3-8B"),
    "llama3-70b": LLM("llama3-70b", 70.55, 80, 64, 8, 8192, "Meta-Llama-3-70B"),
}


def get_gpu(key: str) -> GPU:
    from greenroute.core.errors import UnknownNameError

    try:
        return GPUS[key]
    except KeyError:
        raise UnknownNameError("GPU", key, GPUS) from None


def get_llm(key: str) -> LLM:
    from greenroute.core.errors import UnknownNameError

    try:
        return LLMS[key]
    except KeyError:
        raise UnknownNameError("LLM", key, LLMS) from None


def kv_capacity_bytes(llm: LLM, gpu: GPU, tp: int) -> float:
    """``tp x HBM - weights - RUNTIME_RESERVE_FRACTION x tp x HBM`` (may be negative)."""
    hbm_bytes = tp * gpu.memory_gb * BYTES_PER_GB
    return hbm_bytes - llm.weight_bytes - RUNTIME_RESERVE_FRACTION * hbm_bytes


def fits(llm: LLM, gpu: GPU, tp: int) -> bool:
    """Weights fit in ``tp`` GPUs with room for at least one ``MIN_KV_TOKENS`` request."""
    return kv_capacity_bytes(llm, gpu, tp) >= MIN_KV_TOKENS * llm.kv_bytes_per_token
