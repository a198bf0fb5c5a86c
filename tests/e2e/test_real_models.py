"""Real models exported from PyTorch (models/make_real_models.py: random weights, nothing
downloaded) run through `inferd run` and match PyTorch's outputs to max |diff| <= 1e-3 * max(1, |ref|).
CI runs the small ones; bench/engine_bench.py runs all of them."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from inferd_harness import REPO_ROOT, inferd_binary

SMALL_MODELS = ["mlp", "mobilenet_v3_large"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("real_models")
    subprocess.run([sys.executable, str(REPO_ROOT / "models" / "make_real_models.py"), str(out), "--only",
                    ",".join(SMALL_MODELS), "--batch", "2"], check=True, capture_output=True, timeout=600)
    return out


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_matches_pytorch(models, name, tmp_path):
    folder = models / name
    result = subprocess.run([inferd_binary(), "run", str(folder / "model.onnx"), "--input",
                             f"input={folder / 'input.npy'}", "--output-dir", str(tmp_path), "--iterations", "1",
                             # The outputs come from the second run: the first records the memory
                             # plan, the second runs in its arena (buffers shared and written over).
                             "--warmup", "1"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    expected = np.load(folder / "expected.npy")
    actual = np.load(tmp_path / "output.npy")
    assert actual.shape == expected.shape
    tolerance = 1e-3 * max(1.0, float(np.abs(expected).max()))
    assert float(np.abs(actual - expected).max()) <= tolerance
