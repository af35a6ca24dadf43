"""Registration of the MARLIN geo policies: ``marlin`` (option ``variant``) and one name per
variant of seed 001 §6 (``marlin-balanced``, ``marlin-min-latency``, ...), with the options of
:class:`~greenroute.policies.marlin.policy.MarlinPolicy` declared (its constructor's)."""

from __future__ import annotations

from greenroute.policies.marlin.policy import VARIANTS, MarlinPolicy

_UNITS = {"k_opt": "plans per agent and epoch", "updates": "SAC steps per agent and epoch",
          "warmup_epochs": "epochs", "pretrain_epochs": "iterations on epoch 0"}  # fmt: skip
_HELP = {
    "variant": f"which agents play: {', '.join(VARIANTS)} (balanced: all four and the game)",
    "k_opt": "K_opt of Algorithms 1-2: sampled plans simulated per agent and epoch",
    "film": "FiLM layer in the actor (§6.3 ablation: off)",
    "her": "HER relabelling into the cross-epoch buffer (§6.3 ablation: off)",
    "blend": "phase-2 blending (off: the richest agent's plan)",
    "sgd": "phase-2 SGD refinement of the critic weights (off: the utility blend)",
    "veto": "phase-2 veto by individual rationality",
    "capital": "capital updates (off: capital stays at its initial value)",
    "exploit": "line 11: 'best' simulated of the mean and sampled plans, or 'mean'",
    "warmup_epochs": "route local-only for these epochs while learning",
    "pretrain_epochs": "Algorithm 1 repeated on epoch 0's fork before the first plan",
    "local_prior": "logit bonus of each origin's own datacenter in the action -> plan map",
    "ttft_home_prior": "extra home logit x the agent's TTFT weight (line 6's modulation)",
    "keep_local": "add the local-only plan to each epoch's candidates (our addition)",
}


def register() -> None:
    import inspect

    from greenroute.policies.registry import register_geo_policy

    register_geo_policy(
        "marlin", "MARLIN (seed 001): per-objective SAC agents + phase-2 game; variant option",
        units=_UNITS, help=_HELP,
    )(MarlinPolicy)  # fmt: skip
    sig = inspect.signature(MarlinPolicy)
    params = [p for p in sig.parameters.values() if p.name != "variant"]
    notes = {k: v for k, v in MarlinPolicy.__init__.__annotations__.items()
             if k not in ("variant", "return")}  # fmt: skip
    for v in VARIANTS:

        def factory(__v: str = v, **options) -> MarlinPolicy:
            p = MarlinPolicy(variant=__v, **options)
            p.name = f"marlin-{__v}"
            return p

        factory.__signature__ = sig.replace(parameters=params)
        factory.__annotations__ = dict(notes)
        factory.__doc__ = f"MARLIN-{v}"
        help_ = {k: h for k, h in _HELP.items() if k != "variant"}
        register_geo_policy(
            f"marlin-{v}", f"MARLIN-{v} (seed 001 §6): 'marlin' with variant={v}",
            units=_UNITS, help=help_,
        )(factory)  # fmt: skip
