"""Static facts: regions, GPUs, LLMs."""

from greenroute.catalog.hardware import GPU, GPUS, LLM, LLMS, get_gpu, get_llm
from greenroute.catalog.regions import REGIONS, SIGNAL_REGIONS, Region, get_region, register_region

__all__ = [
    "GPU",
    "GPUS",
    "LLM",
    "LLMS",
    "REGIONS",
    "SIGNAL_REGIONS",
    "Region",
    "get_gpu",
    "get_llm",
    "get_region",
    "register_region",
]
