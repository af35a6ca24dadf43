"""Saved models: a stable-baselines3 zip with greenroute's metadata inside.

``greenroute_meta.json`` (in the zip) records the environment id and options, observation and
action spaces, algorithm, steps, seed, wall time and everything the env needs to rebuild the
same observation (e.g. the fitted RobustScaler). Loading checks it, so a model used on the
wrong environment or a different number of datacenters fails with one clear message.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from greenroute.core.errors import ConfigError, DataFormatError

META_NAME = "greenroute_meta.json"


def write_meta(path: str | Path, meta: dict) -> None:
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr(META_NAME, json.dumps(meta, indent=2, sort_keys=True, default=str))


def read_meta(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, "model file not found")
    try:
        with zipfile.ZipFile(path) as zf:
            if META_NAME not in zf.namelist():
                raise DataFormatError(path, "not a greenroute model (no greenroute_meta.json)")
            return json.loads(zf.read(META_NAME))
    except zipfile.BadZipFile:
        raise DataFormatError(path, "not a model zip file") from None


def load_model(path: str | Path, *, expect_env: str | tuple[str, ...] | None = None):
    """(SB3 model, metadata). ``expect_env`` restricts the environment it was trained on."""
    from greenroute.policies.rl.algos import algo_class

    meta = read_meta(path)
    env_id = meta.get("env_id", "?")
    if expect_env is not None:
        allowed = (expect_env,) if isinstance(expect_env, str) else expect_env
        if env_id not in allowed:
            raise ConfigError(
                f"model {path} was trained on {env_id}; this use needs one of {list(allowed)}"
            )
    cls = algo_class(meta.get("algo", "ppo"))
    model = cls.load(str(path), device="cpu")
    return model, meta
