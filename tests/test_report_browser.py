"""The HTML report in a real headless browser (Chromium from the Debian packages).

A test copy of the report gets a ``window.onerror`` collector in its head and, after the
page's load event, a script that writes the collected errors and the number of plotly divs
(and of those holding a drawn ``.main-svg``) into a ``data-check`` attribute, read back from
``--dump-dom``; Chromium's console log (``--enable-logging=stderr``) is scanned for
"Uncaught" too. A screenshot of the report is kept in the test's tmp dir (path printed).

Without Chromium the test skips, unless ``GREENROUTE_REQUIRE_DATA=1`` (CI): then it fails.
Install: ``apt-get install -y --no-install-recommends chromium``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess

import pytest

import greenroute
from greenroute.bench.report import make_report
from greenroute.sim.output import write_compare

pytest.importorskip("plotly")
pytest.importorskip("pymoo")

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER_TIMEOUT_S = 120
COLLECT_ERRORS = (
    "<script>window.__errs=[];window.addEventListener('error',"
    "function(e){window.__errs.push(String(e.message))});</script>"
)
REPORT_CHECK = """<script>window.addEventListener('load',function(){setTimeout(function(){
var divs=document.querySelectorAll('.plotly-graph-div'),drawn=0;
divs.forEach(function(d){if(d.querySelector('svg.main-svg'))drawn++;});
document.body.setAttribute('data-check',JSON.stringify(
{errors:window.__errs,figures:divs.length,drawn:drawn}));},200);});</script>"""


def find_chromium() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium(exe: str, profile, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",  # tests run as root in CI
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",  # let timers (plotly's, the check's) run
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path, capsys):
    exe = find_chromium()
    if exe is None:
        msg = f"no Chromium ({', '.join(BROWSERS)}); apt-get install -y chromium"
        if os.environ.get("GREENROUTE_REQUIRE_DATA", "").strip() not in ("", "0"):
            pytest.fail(f"{msg}; GREENROUTE_REQUIRE_DATA=1 makes this an error", pytrace=False)
        pytest.skip(msg)
    src = tmp_path / "results"
    for seed in (0, 1):
        res = greenroute.compare(
            "demo", ["local-only", "lowest-carbon", "oracle"], days=1, fidelity="fluid", seed=seed
        )
        write_compare(res, src / f"seed{seed}")
    report = tmp_path / "report.html"
    info = make_report(src, report)
    n_figures = len(info["figures"])
    assert n_figures == 6  # signals, shares, metrics, improvement, pareto, oracle

    page = report.read_text()
    test_copy = tmp_path / "report-check.html"
    test_copy.write_text(
        page.replace("<head>", "<head>" + COLLECT_ERRORS, 1).replace(
            "</body>", REPORT_CHECK + "</body>"
        )
    )
    run = _chromium(
        exe, tmp_path / "profile", "--enable-logging=stderr", "--v=0", "--dump-dom",
        test_copy.as_uri(),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'data-check="([^"]*)"', run.stdout)
    assert found, "the page's check never ran (no data-check attribute in the DOM)"
    check = json.loads(html.unescape(found.group(1)))
    assert check == {"errors": [], "figures": n_figures, "drawn": n_figures}
    assert "Uncaught" not in run.stderr

    shot = tmp_path / "report.png"
    run = _chromium(
        exe, tmp_path / "profile", "--window-size=1300,5200", f"--screenshot={shot}",
        report.as_uri(),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    with capsys.disabled():
        print(f"\nreport screenshot: {shot}")
