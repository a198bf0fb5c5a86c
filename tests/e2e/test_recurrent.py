"""RNN, GRU and LSTM against PyTorch: torch's own layers (bidirectional, two layers, batch-first,
ReLU RNN, GRU with linear_before_reset) exported to ONNX and run with `inferd run`."""
import subprocess

import numpy as np
import pytest

from inferd_harness import inferd_binary

torch = pytest.importorskip("torch")


class Recurrent(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        torch.manual_seed(0)
        layer = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind]
        extra = {"nonlinearity": "relu"} if kind == "rnn" else {}
        self.layer = layer(input_size=5, hidden_size=7, num_layers=2, bidirectional=True, batch_first=True, **extra)

    def forward(self, x):
        return self.layer(x)[0]


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
def test_recurrent_layers_match_pytorch(kind, tmp_path):
    model = Recurrent(kind).eval()
    x = torch.randn(3, 6, 5)
    with torch.no_grad():
        expected = model(x).numpy()
        torch.onnx.export(model, (x,), str(tmp_path / "model.onnx"), input_names=["x"], output_names=["y"],
                          opset_version=14)
    np.save(tmp_path / "x.npy", x.numpy())
    result = subprocess.run([inferd_binary(), "run", str(tmp_path / "model.onnx"), "--input", f"x={tmp_path / 'x.npy'}",
                             "--output-dir", str(tmp_path / "out"), "--iterations", "1", "--warmup", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), expected, rtol=1e-4, atol=1e-5)
