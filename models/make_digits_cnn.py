#!/usr/bin/env python3
"""A small CNN trained on scikit-learn's bundled digits data (8x8 images of 0-9, shipped with
python3-sklearn: nothing is downloaded), exported to ONNX with its held-out split: the trained model
on which int8 accuracy is checked (tests/e2e/test_int8.py, bench/int8_bench.py).

  /usr/bin/python3 models/make_digits_cnn.py OUT_DIR

writes OUT_DIR/model.onnx (input "input" [N,1,8,8] fp32, output "logits" [N,10]),
OUT_DIR/test_x.npy and test_y.npy (the 360 held-out images and labels), and
OUT_DIR/calibration/batch_K.npy (training images in batches of 32, for `inferd quantize`).
Training is seeded and takes a few seconds on a CPU.
"""
import sys
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


class DigitsCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU())
        self.classifier = torch.nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def main(out_dir):
    out = Path(out_dir)
    (out / "calibration").mkdir(parents=True, exist_ok=True)
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    train_x, test_x, train_y, test_y = train_test_split(images, digits.target, test_size=360, random_state=0,
                                                        stratify=digits.target)
    torch.manual_seed(0)
    model = DigitsCnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = torch.from_numpy(train_x), torch.from_numpy(train_y.astype(np.int64))
    for _ in range(40):
        order = torch.randperm(len(x))
        for start in range(0, len(x), 64):
            batch = order[start:start + 64]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(torch.from_numpy(test_x)).argmax(1).numpy() == test_y).mean()
    torch.onnx.export(model, torch.from_numpy(test_x[:1]), str(out / "model.onnx"), input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=17)
    np.save(out / "test_x.npy", test_x)
    np.save(out / "test_y.npy", test_y.astype(np.int64))
    for k, start in enumerate(range(0, 320, 32)):
        np.save(out / "calibration" / f"batch_{k:02d}.npy", train_x[start:start + 32])
    print(f"digits CNN: test accuracy {accuracy:.4f} (PyTorch), written to {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".cache/models/digits_cnn")
