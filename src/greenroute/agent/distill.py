"""Distil a teacher's text dataset into a language-model agent (seed 000 §3.2, Appendix B).

Methods (the paper's hierarchy): ``fewshot`` (the base model, prompted with ``k`` training
examples picked by similarity, ``agent.fewshot``), ``lora`` (one LoRA adapter per role on the
plain prompts: the paper's Manager LLM and Worker LLM, here one base model with two adapters)
and ``lora+fewshot`` (the LoRA adapters, prompted with examples at decision time; training
itself uses the plain prompts, as ``lora``).

LoRA follows Table 6: rank 64, alpha 16, the attention projections q/k/v/o, dropout 0.05,
learning rate 2e-4 (AdamW), batch 4, 3 epochs; the loss covers only the response tokens
(prompt tokens are masked with -100). The output directory holds ``agent.json`` (what to load:
base model, method, roles, k), ``adapters/<role>/`` (peft), ``fewshot_pool.jsonl`` (the
training rows, for few-shot) and ``distill_card.json`` (wall time, adapter size, tokens/s,
train and validation loss, held-out agreement with the teacher when asked).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from greenroute.agent import backends as B
from greenroute.agent.dataset import load_rows, read_card
from greenroute.core.errors import ConfigError

METHODS = ("fewshot", "lora", "lora+fewshot")
ROLES = ("manager", "worker")
AGENT_VERSION = 1
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # Table 6: attention projections
IGNORE_INDEX = -100  # torch cross-entropy's ignored label


@dataclass
class LoraSettings:
    """Table 6 of seed 000."""

    r: int = 64
    alpha: int = 16
    dropout: float = 0.05
    lr: float = 2e-4
    batch_size: int = 4
    epochs: int = 3
    max_steps: int | None = None  # stop each role after this many optimiser steps
    max_prompt_tokens: int = B.DEFAULT_MAX_PROMPT_TOKENS


def distill(
    data: str | Path,
    out: str | Path,
    *,
    base: str | None = None,
    method: str = "lora+fewshot",
    roles: tuple[str, ...] = ROLES,
    k: int = 2,
    lora: LoraSettings | None = None,
    max_train_rows: int | None = None,
    max_val_rows: int | None = 64,
    eval_rows: int = 0,
    seed: int = 0,
    model_tok=None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Distil ``data`` (a ``greenroute record --format text`` directory) into ``out``; returns
    the distill card. ``max_train_rows``/``max_val_rows``: the latest rows of each role kept
    (None: all). ``eval_rows``: held-out decisions per role scored for agreement with the
    teacher (0: none). ``model_tok``: an already loaded (model, tokenizer) for ``base``."""
    import torch

    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; valid choices: {', '.join(METHODS)}")
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise ConfigError(f"unknown role(s) {bad}; valid choices: {', '.join(ROLES)}")
    if k < 0 or (method != "lora" and k == 0):
        raise ConfigError(f"k must be >= 1 for method {method}, got {k}")
    lora = lora or LoraSettings()
    card_in = read_card(data)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    model, tok = model_tok if model_tok is not None else B.load_base(base)
    load_s = time.perf_counter() - t0
    spec = {"name": "in-memory", "dir": None, "gguf_file": None}
    if model_tok is None or base is not None:
        spec = B.resolve_base(base)
    train = {r: _latest(load_rows(data, "train", r), max_train_rows) for r in roles}
    val = {r: _latest(load_rows(data, "val", r), max_val_rows) for r in roles}
    stats: dict[str, dict] = {}
    adapter_bytes = 0
    train_s = 0.0
    if method != "fewshot":
        from peft import LoraConfig, get_peft_model

        cfg = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                         target_modules=list(LORA_TARGETS), task_type="CAUSAL_LM")  # fmt: skip
        model = get_peft_model(model, cfg, adapter_name=roles[0])
        for role in roles[1:]:
            model.add_adapter(role, cfg)
        for role in roles:
            model.set_adapter(role)
            s = _train_role(model, tok, train[role], val[role], lora, seed, role, progress)
            stats[role] = s
            train_s += s["train_s"]
        model.save_pretrained(str(out / "adapters"), selected_adapters=list(roles))
        _flatten_adapters(out / "adapters", roles[0])
        adapter_bytes = sum(f.stat().st_size for f in (out / "adapters").rglob("*") if f.is_file())
    else:
        for role in roles:
            stats[role] = {"val_loss": _loss(model, tok, val[role], lora), "train_rows": 0}
    model.eval()
    if method != "lora":
        with (out / "fewshot_pool.jsonl").open("w") as f:
            for role in roles:
                for row in load_rows(data, "train", role):
                    f.write(json.dumps(row) + "\n")
    agent = {
        "agent_version": AGENT_VERSION,
        "method": method,
        "roles": list(roles),
        "k": k if method != "lora" else 0,
        "base": spec,
        "max_prompt_tokens": lora.max_prompt_tokens,
        "dataset": {
            "dir": str(Path(data).resolve()),
            "teacher": card_in.get("teacher"),
            "scenario": card_in.get("scenario"),
        },
    }
    (out / "agent.json").write_text(json.dumps(agent, indent=2) + "\n")
    tokens = sum(s.get("train_tokens", 0) for s in stats.values())
    card = {
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "method": method,
        "base": spec.get("name"),
        "roles": list(roles),
        "k": agent["k"],
        "lora": asdict(lora) if method != "fewshot" else None,
        "lora_targets": list(LORA_TARGETS) if method != "fewshot" else None,
        "load_s": round(load_s, 2),
        "train_s": round(train_s, 2),
        "wall_s": round(time.perf_counter() - t0, 2),
        "adapter_bytes": adapter_bytes,
        "train_tokens": tokens,
        "tokens_per_s": round(tokens / train_s, 1) if train_s > 0 else None,
        "per_role": stats,
        "dataset": agent["dataset"],
        "torch_threads": torch.get_num_threads(),
    }
    if eval_rows > 0:
        from greenroute.agent.policy import agreement

        backend = B.HFBackend(model, tok, lora.max_prompt_tokens)
        card["agreement"] = {
            role: agreement(out, data, role, eval_rows, backend=backend) for role in roles
        }
    card["wall_s"] = round(time.perf_counter() - t0, 2)
    (out / "distill_card.json").write_text(json.dumps(card, indent=2) + "\n")
    return card


def _latest(rows: list[dict], n: int | None) -> list[dict]:
    return rows if n is None or n >= len(rows) else rows[-n:]


def _flatten_adapters(root: Path, first: str) -> None:
    """peft saves the first adapter at the root and the others in sub-folders: put every
    adapter in ``root/<role>/``."""
    files = [f for f in root.iterdir() if f.is_file()]
    if files:
        (root / first).mkdir(exist_ok=True)
        for f in files:
            shutil.move(str(f), str(root / first / f.name))


def _examples(tok, rows: list[dict], max_prompt_tokens: int) -> list[tuple[list, list]]:
    return [B.encode_pair(tok, r["prompt"], r["response"], max_prompt_tokens) for r in rows]


def _batch(pairs: list[tuple[list, list]], pad: int, device="cpu"):
    import torch

    width = max(len(p) + len(c) for p, c in pairs)
    ids = torch.full((len(pairs), width), pad, dtype=torch.long)
    labels = torch.full((len(pairs), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for i, (p, c) in enumerate(pairs):
        n = len(p) + len(c)
        ids[i, :n] = torch.tensor(p + c)
        labels[i, len(p) : n] = torch.tensor(c)  # loss on the response tokens only
        mask[i, :n] = 1
    return ids.to(device), labels.to(device), mask.to(device)


def _loss(model, tok, rows: list[dict], lora: LoraSettings) -> float | None:
    """Mean response-token cross-entropy over ``rows`` (nats per token)."""
    import torch

    if not rows:
        return None
    pairs = _examples(tok, rows, lora.max_prompt_tokens)
    was_training = model.training
    model.eval()
    total, n_tok = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(pairs), lora.batch_size):
            chunk = pairs[i : i + lora.batch_size]
            ids, labels, mask = _batch(chunk, tok.pad_token_id, model.device)
            n = int((labels[:, 1:] != IGNORE_INDEX).sum())
            total += float(model(input_ids=ids, attention_mask=mask, labels=labels).loss) * n
            n_tok += n
    model.train(was_training)
    return total / max(n_tok, 1)


def _train_role(model, tok, train_rows, val_rows, lora: LoraSettings, seed: int, role: str,
                progress) -> dict:  # fmt: skip
    import torch

    if not train_rows:
        raise ConfigError(f"no {role} rows in the training split")
    pairs = _examples(tok, train_rows, lora.max_prompt_tokens)
    val_before = _loss(model, tok, val_rows, lora)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lora.lr)
    rng = random.Random(seed)
    steps_per_epoch = math.ceil(len(pairs) / lora.batch_size)
    total = steps_per_epoch * lora.epochs
    if lora.max_steps is not None:
        total = min(total, lora.max_steps)
    model.train()
    step, tokens, losses, epoch_losses = 0, 0, [], []
    t0 = time.perf_counter()
    for _ in range(lora.epochs):
        order = list(range(len(pairs)))
        rng.shuffle(order)
        ep = []
        for i in range(0, len(order), lora.batch_size):
            if step >= total:
                break
            ids, labels, mask = _batch([pairs[j] for j in order[i : i + lora.batch_size]],
                                       tok.pad_token_id, model.device)  # fmt: skip
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            tokens += int(mask.sum())
            ep.append(loss.item())
            losses.append(ep[-1])
            if progress is not None:
                progress(role, step, total)
        if ep:
            epoch_losses.append(sum(ep) / len(ep))
    train_s = time.perf_counter() - t0
    model.eval()
    return {
        "train_rows": len(pairs),
        "steps": step,
        "train_s": round(train_s, 2),
        "train_tokens": tokens,
        "tokens_per_s": round(tokens / train_s, 1) if train_s > 0 else None,
        "train_loss_first": losses[0] if losses else None,
        "train_loss_per_epoch": epoch_losses,
        "val_rows": len(val_rows),
        "val_loss_before": val_before,
        "val_loss": _loss(model, tok, val_rows, lora),
    }
