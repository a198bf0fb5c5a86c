"""Loading and unloading the same model 200 times (explicit mode) leaves resident memory where the
first cycle left it: nothing a load makes outlives its unload."""
import pytest
import requests

from inferd_harness import Inferd, built_with_sanitizers
from test_poll_mode import CONFIG, plus_model

CYCLES = 200


def resident_mb(server):
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(built_with_sanitizers(), reason="ASan's quarantine holds freed memory: RSS is not the program's")
def test_load_unload_cycles_do_not_grow_memory(tmp_path):
    (tmp_path / "plus" / "1").mkdir(parents=True)
    (tmp_path / "plus" / "config.pbtxt").write_text(CONFIG)
    (tmp_path / "plus" / "1" / "model.onnx").write_bytes(plus_model(1.0))
    server = Inferd(tmp_path, "--model-control-mode", "explicit")
    try:
        after_first = None
        for cycle in range(CYCLES):
            for action in ("load", "unload"):
                response = requests.post(f"{server.url}/v2/repository/models/plus/{action}", json={}, timeout=60)
                assert response.status_code == 200, (cycle, action, response.text)
            if cycle == 0:
                after_first = resident_mb(server)
        after_all = resident_mb(server)
        assert after_all <= 1.1 * after_first, (after_first, after_all)
        assert server.stop() == 0, server.logs()
    finally:
        server.kill()
