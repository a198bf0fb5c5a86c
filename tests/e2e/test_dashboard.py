"""The live status page (/dashboard on the metrics port) in headless Chromium (Debian `chromium`)
against a server under load: the model table shows each model's state from live data (a broken
model with its reason), the charts are drawn from successive scrapes with a non-zero request
rate, and the page loads nothing from outside. INFERD_DASHBOARD_SCREENSHOT=PATH keeps a
screenshot (docs/dashboard.png is one)."""
import os
import re
import shutil
import subprocess
import threading
import time

import pytest
import requests

from inferd_harness import Inferd, scalar_identity, write_repository

BROKEN = scalar_identity() + 'parameters { key: "quality" value { string_value: "output=NOPE" } }\n'


def chromium(*args, timeout=90):
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium missing: scripts/setup.sh installs Debian's chromium")
    # Virtual time runs the page's 2 s polls quickly; it waits for each fetch to finish.
    # --disable-dev-shm-usage: containers often have a small /dev/shm.
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
               "--window-size=1280,900", "--virtual-time-budget=14000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def loaded_server(tmp_path):
    root = write_repository(tmp_path, {"steady": (scalar_identity(cost_us=500), [1]),
                                       "other": (scalar_identity(), [1]), "broken": (BROKEN, [1])})
    server = Inferd(root)
    stop = threading.Event()

    def traffic():
        body = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}
        while not stop.is_set():
            requests.post(f"{server.url}/v2/models/steady/infer", json=body, timeout=10)

    workers = [threading.Thread(target=traffic) for _ in range(2)]
    for worker in workers:
        worker.start()
    yield server
    stop.set()
    for worker in workers:
        worker.join()
    server.kill()


def test_the_page_renders_models_and_charts_from_live_data(loaded_server):
    base = loaded_server.metrics_url.rsplit("/", 1)[0]
    page = requests.get(base + "/dashboard", timeout=5)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    # Offline: no script, style, image or font from anywhere but this server.
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page.text)
    assert "@import" not in page.text and "url(" not in page.text
    status = requests.get(base + "/dashboard/status", timeout=5).json()
    assert {m["name"] for m in status["models"]} == {"steady", "other", "broken"}
    assert status["alerts"] == {"alerts": [], "drift": []}
    time.sleep(1)  # some traffic before the first scrape

    dom = chromium("--dump-dom", base + "/dashboard").stdout
    scrapes = re.search(r'<body data-scrapes="(\d+)"', dom)
    assert scrapes and int(scrapes.group(1)) >= 3, dom[:2000]
    rows = {m.group(1): m.group(0) for m in re.finditer(r'<tr data-model="(\w+)" data-state="(\w*)">.*?</tr>', dom)}
    assert set(rows) == {"steady", "other", "broken"}, dom
    assert 'data-state="READY"' in rows["steady"] and 'data-state="UNAVAILABLE"' in rows["broken"]
    assert "no output 'NOPE'" in rows["broken"]
    steady_cells = re.findall(r"<td[^>]*>([^<]*)</td>", rows["steady"])
    assert float(steady_cells[3]) > 0, steady_cells  # requests/s
    assert float(steady_cells[4]) > 0, steady_cells  # p99 ms
    for chart in ("rate", "p99", "queue"):
        points = re.search(rf'<canvas id="{chart}"[^>]* data-points="(\d+)"', dom)
        assert points and int(points.group(1)) >= 2, chart
    assert re.search(r'<ul id="alerts" data-count="0">', dom)

    screenshot = os.environ.get("INFERD_DASHBOARD_SCREENSHOT") or str(loaded_server.log.name) + ".png"
    chromium(f"--screenshot={screenshot}", base + "/dashboard")
    with open(screenshot, "rb") as image:
        assert image.read(8) == b"\x89PNG\r\n\x1a\n"


def test_unknown_paths_and_methods_on_the_metrics_port(loaded_server):
    base = loaded_server.metrics_url.rsplit("/", 1)[0]
    missing = requests.get(base + "/nothing", timeout=5)
    assert missing.status_code == 404 and "/dashboard" in missing.json()["error"]
    assert requests.post(base + "/dashboard", timeout=5).status_code == 405
