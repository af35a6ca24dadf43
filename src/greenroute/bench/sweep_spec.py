"""Sweep specifications: a YAML grid of scenarios x policies x seeds x weights x days.

A spec file (every key but ``scenarios`` and ``policies`` optional)::

    name: geo3-baselines          # default: the file's stem
    scenarios: [geo3]             # names from `greenroute scenarios`
    policies:                     # a name, or a mapping with name / options / label
      - local-only
      - lowest-carbon
      - {name: lp-mpc, options: {horizon: 24}, label: lp-mpc-h24}
      - {name: 'rl:runs/teacher/t4/worker.zip', label: teacher}  # a saved RL model
    seeds: [0, 1, 2]              # a list of integers >= 0, or a count N (seeds 0..N-1)
    days: [1]                     # a number or a list of numbers > 0 (default: scenario's)
    weights: [balanced, {carbon: 1}]   # presets or mappings; default: the default weights
    data_dir: ../shared/data      # relative to the spec file; default: embedded data
    fidelity: fluid               # request | fluid | auto (default: the scenario's)
    local_policy: least-loaded
    forecast: perfect
    train:                        # training cells (greenroute.bench.sweep_train), run first
      - {id: teacher, agent: teacher, scenario: geo3, seeds: 5,
         steps: {manager: 30000, worker: 6000}}
    # then a policy {name: 'rl:train/teacher', label: teacher} evaluates each training seed's
    # model (labels teacher-seed0 ..); its cells run after the training cell they depend on

With ``train``, ``scenarios`` and ``policies`` may be left out (a training-only sweep).
:func:`load_spec` checks every key, name and value before anything runs: a mistake is one
:class:`~greenroute.core.errors.ConfigError` naming the file, the key and the valid choices.
:func:`expand` turns the grid into :class:`Cell` s; a cell's :attr:`Cell.key` is the SHA-256 of
its canonical configuration (the fields a run's manifest records that decide its numbers), so
the same cell has the same key in every sweep and every run of a sweep.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from greenroute.bench.store_records import config_hash
from greenroute.bench.sweep_train import TRAIN_POLICY_PREFIX, TrainCell, parse_train
from greenroute.core.errors import ConfigError, GreenrouteError

SPEC_KEYS = (
    "name",
    "scenarios",
    "policies",
    "seeds",
    "days",
    "weights",
    "data_dir",
    "fidelity",
    "local_policy",
    "forecast",
    "train",
)
POLICY_KEYS = ("name", "options", "label")
FIDELITY_CHOICES = ("request", "fluid", "auto")


@dataclass(frozen=True)
class Cell:
    """One run of the grid. ``weights`` is the full weight mapping (defaults filled in);
    ``data_dir`` an absolute path or None (embedded data)."""

    scenario: str
    policy: str
    seed: int
    days: float | None
    weights: dict[str, float]
    policy_options: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    data_dir: str | None = None
    fidelity: str | None = None
    local_policy: str = "least-loaded"
    forecast: str = "perfect"

    def config(self) -> dict[str, Any]:
        """The canonical configuration hashed into :attr:`key` (``label`` is display only)."""
        d = asdict(self)
        d.pop("label")
        return d

    @property
    def key(self) -> str:
        return config_hash(self.config())

    @property
    def depends_on(self) -> str | None:
        """The key of the training cell whose model this cell evaluates (``rl:train/<key>``)."""
        if self.policy.startswith(TRAIN_POLICY_PREFIX):
            return self.policy[len(TRAIN_POLICY_PREFIX) :]
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Cell:
        return cls(**d)


@dataclass(frozen=True)
class SweepSpec:
    """``cells``: the grid (evaluation) cells; ``train``: the training cells, which run
    before the grid cells that use their models (:attr:`Cell.depends_on`)."""

    name: str
    cells: tuple[Cell, ...]
    source: str  # the file it was read from ("<dict>" for a mapping)
    train: tuple[TrainCell, ...] = ()

    @property
    def keys(self) -> list[str]:
        return [c.key for c in (*self.train, *self.cells)]


# ------------------------------------------------------------------ checking
def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, list | tuple) else [value]


def _choice(where: str, key: str, value: Any, choices) -> str:
    choices = sorted(choices)
    if not isinstance(value, str) or value not in choices:
        raise _fail(where, f"unknown {key} {value!r}; valid choices: {', '.join(choices)}")
    return value


def _trained_policies(where: str, item: dict, train: list[TrainCell]) -> list[tuple]:
    """``rl:train/<id>``: one policy per training seed of that training (labels
    ``<label>-seed<s>``), evaluating the model its training cell saves."""
    tid = item["name"][len(TRAIN_POLICY_PREFIX) :]
    mine = [t for t in train if t.name == tid]
    if not mine:
        ids = sorted({t.name for t in train})
        valid = ", ".join(TRAIN_POLICY_PREFIX + i for i in ids) or "(no train key)"
        raise _fail(where, f"policy {item['name']!r} names no training; valid choices: {valid}")
    if mine[0].agent != "teacher":
        raise _fail(where, f"{item['name']!r} is a {mine[0].agent} agent: it is evaluated on "
                    "seed 002's held-out episodes inside its training cell (options.episodes), "
                    "not by a grid cell")  # fmt: skip
    if item.get("options"):
        raise _fail(where, f"policy {item['name']!r} (a trained RL model) takes no options")
    label = str(item.get("label") or tid)
    return [(f"{TRAIN_POLICY_PREFIX}{t.key}", {}, f"{label}-seed{t.seed}") for t in mine]


def _policies(where: str, raw: Any, train: list[TrainCell] = ()) -> list[tuple[str, dict, str]]:
    from greenroute.policies.registry import geo_policy_entry, geo_policy_names

    out = []
    for item in _as_list(raw):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            raise _fail(where, f"a policy is a name or a mapping with {POLICY_KEYS}, got {item!r}")
        unknown = sorted(set(item) - set(POLICY_KEYS))
        if unknown:
            raise _fail(
                where, f"unknown policy key(s) {unknown}; valid choices: {', '.join(POLICY_KEYS)}"
            )
        pname = item.get("name")
        if isinstance(pname, str) and pname.startswith(TRAIN_POLICY_PREFIX):
            out.extend(_trained_policies(where, item, list(train)))
            continue
        if isinstance(pname, str) and pname.startswith("rl:"):  # a saved RL model
            if item.get("options"):
                raise _fail(where, f"policy {pname!r} (a saved RL model) takes no options")
            out.append((pname, {}, str(item.get("label") or pname)))
            continue
        name = _choice(where, "policy", pname, geo_policy_names())
        options = item.get("options") or {}
        if not isinstance(options, dict):
            raise _fail(where, f"options of policy {name!r} must be a mapping, got {options!r}")
        entry = geo_policy_entry(name)
        declared = sorted(o.name for o in entry.options)
        for k in options:
            if k not in declared:
                raise _fail(
                    where,
                    f"unknown option {k!r} of policy {name!r}; valid choices: "
                    f"{', '.join(declared) or '(none)'}",
                )
        try:
            # built once here so a bad value is a spec error, not a failed cell per seed;
            # the cells keep the YAML values (JSON, hashed into the key)
            entry.build(**options)
        except ConfigError as err:
            raise _fail(where, str(err)) from None
        label = item.get("label") or name
        if not isinstance(label, str):
            raise _fail(where, f"label of policy {name!r} must be text, got {label!r}")
        out.append((name, options, label))
    labels = [lab for _, _, lab in out]
    dup = sorted({lab for lab in labels if labels.count(lab) > 1})
    if dup:
        raise _fail(where, f"policies {dup} are listed twice; give each variant its own label")
    return out


def _seeds(where: str, raw: Any) -> list[int]:
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise _fail(where, f"seeds as a count must be >= 1, got {raw}")
        return list(range(raw))
    seeds = _as_list(raw)
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise _fail(where, f"seeds must be integers >= 0, got {s!r}")
    if len(set(seeds)) != len(seeds):
        raise _fail(where, f"seeds {seeds} repeat a seed")
    return seeds


def _days(where: str, raw: Any) -> list[float | None]:
    if raw is None:
        return [None]
    out = []
    for d in _as_list(raw):
        if isinstance(d, bool) or not isinstance(d, int | float) or not math.isfinite(d) or d <= 0:
            raise _fail(where, f"days must be finite numbers > 0, got {d!r}")
        out.append(float(d))
    return out


def _weights(where: str, raw: Any) -> list[dict[str, float]]:
    from greenroute.core.objective import PRESETS, default_weights, objective_weights_option

    if raw is None:
        return [default_weights().as_dict()]
    out = []
    for w in _as_list(raw):
        if isinstance(w, str):
            w = _choice(where, "weights preset", w, PRESETS)
            out.append(PRESETS[w].as_dict())
        elif isinstance(w, dict):
            try:
                out.append(objective_weights_option(w).as_dict())
            except ConfigError as err:
                raise _fail(where, str(err)) from None
        else:
            raise _fail(where, f"weights are preset names or mappings, got {w!r}")
    return out


def _data_dir(where: str, raw: Any, base: Path) -> str | None:
    from greenroute.data.paths import resolve_data_dir

    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise _fail(where, f"data_dir must be a directory path, got {raw!r}")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = base / path
    try:
        return str(resolve_data_dir(path.resolve()))
    except GreenrouteError as err:  # DataFormatError: names the directory
        raise _fail(where, f"data_dir: {err}") from None


def parse_spec(raw: Any, where: str = "<dict>", base: Path | None = None) -> SweepSpec:
    """A spec from a mapping (as :func:`load_spec` reads from YAML); ``where`` names it in
    errors and ``base`` resolves a relative ``data_dir`` (default: the current directory)."""
    from greenroute.policies.registry import local_policy_names
    from greenroute.scenarios import SCENARIOS
    from greenroute.sim.forecast import FORECASTERS

    if not isinstance(raw, dict):
        raise _fail(where, f"a sweep spec is a mapping with keys {', '.join(SPEC_KEYS)}")
    unknown = sorted(set(raw) - set(SPEC_KEYS))
    if unknown:
        raise _fail(where, f"unknown key(s) {unknown}; valid choices: {', '.join(SPEC_KEYS)}")
    has_train = raw.get("train") is not None
    if has_train and not raw["train"]:
        raise _fail(where, "'train' may not be empty")
    for required in ("scenarios", "policies"):
        if not raw.get(required) and not (has_train and required not in raw):
            raise _fail(where, f"{required!r} is required and may not be empty")
    if has_train and bool(raw.get("scenarios")) != bool(raw.get("policies")):
        raise _fail(where, "give both 'scenarios' and 'policies' (the evaluation grid) or neither")
    data_dir = _data_dir(where, raw.get("data_dir"), base or Path.cwd())
    train = parse_train(where, raw["train"], data_dir, _seeds) if has_train else []
    scenarios = [
        _choice(where, "scenario", s, SCENARIOS.names()) for s in _as_list(raw.get("scenarios"))
    ] if raw.get("scenarios") else []  # fmt: skip
    policies = _policies(where, raw["policies"], train) if raw.get("policies") else []
    seeds = _seeds(where, raw.get("seeds", [0]))
    days = _days(where, raw.get("days"))
    weights = _weights(where, raw.get("weights"))
    fidelity = raw.get("fidelity")
    if fidelity is not None:
        fidelity = _choice(where, "fidelity", fidelity, FIDELITY_CHOICES)
    local_policy = _choice(
        where, "local_policy", raw.get("local_policy", "least-loaded"), local_policy_names()
    )
    forecast = _choice(where, "forecast", raw.get("forecast", "perfect"), FORECASTERS)
    if forecast == "noisy":
        raise _fail(where, "forecast 'noisy' needs a forecast error, which sweeps do not take")
    name = raw.get("name") or (Path(where).stem if where != "<dict>" else "sweep")
    if not isinstance(name, str):
        raise _fail(where, f"name must be text, got {name!r}")
    cells = tuple(
        Cell(
            scenario=sc,
            policy=pol,
            policy_options=opts,
            label=label,
            seed=seed,
            days=d,
            weights=w,
            data_dir=data_dir,
            fidelity=fidelity,
            local_policy=local_policy,
            forecast=forecast,
        )
        for sc, (pol, opts, label), w, d, seed in itertools.product(
            scenarios, policies, weights, days, seeds
        )
    )
    keys = [c.key for c in (*train, *cells)]
    if len(set(keys)) != len(keys):
        raise _fail(
            where,
            "the grid lists the same cell twice (repeated scenario, weights, days or training)",
        )
    return SweepSpec(name=name, cells=cells, source=where, train=tuple(train))


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check a YAML sweep spec (see the module docstring)."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: sweep spec not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the sweep spec ({exc})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{path}:{line} not valid YAML ({getattr(exc, 'problem', exc)})"
        ) from None
    return parse_spec(raw, str(path), path.parent)


def expand(spec: SweepSpec) -> list[Cell]:
    """The cells of the grid, in order (scenario, policy, weights, days, seed)."""
    return list(spec.cells)
