"""``serve`` (the live gateway) and ``hash-key`` (a client API key's at-rest form)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from greenroute.cli.app import app, err_console
from greenroute.cli.errors import USER_ERROR_EXIT_CODE, print_error, user_errors
from greenroute.core.errors import ConfigError

SERVE_EXTRA = ("fastapi", "uvicorn", "httpx", "prometheus_client", "yaml")


def _need_serve_extra() -> None:
    import importlib.util

    missing = [m for m in SERVE_EXTRA if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"greenroute serve needs the [serve] extra (missing: {', '.join(missing)}); "
            "pip install 'greenroute[serve]'"
        )


@app.command()
@user_errors
def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="gateway YAML file")],
    host: Annotated[str | None, typer.Option(help="bind address (default: the config's)")] = None,
    port: Annotated[int | None, typer.Option(help="TCP port (default: the config's)")] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(help="real data directory for replay signal providers (default: config's)"),
    ] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="TLS private key (PEM)")] = None,
    ssl_certfile: Annotated[Path | None, typer.Option(help="TLS certificate (PEM)")] = None,
    check: Annotated[
        bool, typer.Option("--check", help="validate the config and exit (no server)")
    ] = False,
) -> None:
    """Run the OpenAI-compatible gateway that routes live traffic with a geo policy."""
    _need_serve_extra()
    from greenroute.serve.config import GatewayConfigError, load_config

    try:
        cfg = load_config(config, data_dir=data_dir)
    except GatewayConfigError as err:  # every problem on its own line
        for problem in err.problems:
            print_error(problem)
        raise typer.Exit(USER_ERROR_EXIT_CODE) from None
    if check:
        err_console.print(
            f"{config}: ok ({len(cfg.regions)} regions, {len(cfg.origins)} origins)", soft_wrap=True
        )
        return
    import uvicorn

    from greenroute.serve.app import create_app

    uvicorn.run(
        create_app(cfg),
        host=host or cfg.host,
        port=cfg.port if port is None else port,
        ssl_keyfile=str(ssl_keyfile) if ssl_keyfile else None,
        ssl_certfile=str(ssl_certfile) if ssl_certfile else None,
        log_level="warning",
        access_log=False,
    )


@app.command("hash-key")
@user_errors
def hash_key(
    key: Annotated[str | None, typer.Argument(help="the client key (default: read stdin)")] = None,
) -> None:
    """Print a client API key's salted sha256 form for the gateway config's auth.keys."""
    from greenroute.serve.security import hash_api_key

    raw = key if key is not None else sys.stdin.readline().strip()
    if not raw:
        raise ConfigError("empty API key")
    sys.stdout.write(hash_api_key(raw) + "\n")


@app.command()
@user_errors
def replay(
    log: Annotated[Path, typer.Argument(help="the gateway's decision log (JSONL)")],
    config: Annotated[Path, typer.Option("--config", "-c", help="the gateway's YAML config")],
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", "-p", help="geo policy to compare with what happened (repeat)"),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="real data directory")] = None,
    servers_per_region: Annotated[
        int, typer.Option(help="stand-in simulated servers per region", min=1)
    ] = 4,
    start: Annotated[
        str | None,
        typer.Option(help="UTC data time of the first arrival (default: the log's own time)"),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Feed a gateway decision log's arrivals into the simulator: what happened vs. policies."""
    _need_serve_extra()
    import pandas as pd

    from greenroute.serve.config import load_config
    from greenroute.serve.replay import replay as run_replay

    cfg = load_config(config, data_dir=data_dir)
    try:
        start_utc = None if start is None else pd.Timestamp(start)
    except ValueError:
        raise ConfigError(f"--start {start!r} is not a time (e.g. 2023-06-01T00:00Z)") from None
    if start_utc is not None and start_utc.tzinfo is None:
        start_utc = start_utc.tz_localize("UTC")
    table = run_replay(log, cfg, policy or [cfg.geo_policy], data_dir=data_dir,
                       servers_per_region=servers_per_region, start_utc=start_utc)  # fmt: skip
    if json_out:
        sys.stdout.write(table.reset_index().to_json(orient="records", indent=2) + "\n")
        return
    sys.stdout.write(table.to_string(float_format=lambda v: f"{v:.6g}") + "\n")


@app.command()
@user_errors
def explain(
    decision_id: Annotated[str, typer.Argument(help="the x-greenroute-decision-id of a request")],
    log: Annotated[
        Path | None, typer.Option("--log", "-l", help="the gateway's decision log (JSONL)")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="the gateway's YAML config (its decision_log.path)"),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the log record as JSON")] = False,
) -> None:
    """Why the gateway routed one request where it did (from its decision log)."""
    from greenroute.serve.explain import explain_record, find_decision

    if log is None and config is None:
        raise ConfigError("give the decision log: --log PATH, or --config gateway.yaml")
    if log is None:
        _need_serve_extra()
        from greenroute.serve.config import GatewayConfigError, load_config

        try:
            log = load_config(config).decision_log
        except GatewayConfigError as err:  # every problem on its own line
            for problem in err.problems:
                print_error(problem)
            raise typer.Exit(USER_ERROR_EXIT_CODE) from None
        if log is None:
            raise ConfigError(f"{config} has no decision_log.path; pass --log PATH")
    rec = find_decision(log, decision_id)
    if json_out:
        import json

        sys.stdout.write(json.dumps(rec, indent=2) + "\n")
        return
    sys.stdout.write(explain_record(rec) + "\n")
