# Exports mobilenet_v3_large and resnet50 (random weights) with PyTorch's TorchScript exporter at
# opset 17 (a PyTorch 2.9+ machine defaults to the torch.export one): bench/device/engine_check.sh.
import sys, torch, torchvision
out = sys.argv[1]
import os; os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
for name, factory in (("mobilenet_v3_large", torchvision.models.mobilenet_v3_large), ("resnet50", torchvision.models.resnet50)):
    model = factory(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    kwargs = dict(input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=17)
    try:
        torch.onnx.export(model, x, f"{out}/{name}.onnx", dynamo=False, **kwargs)
    except TypeError:
        torch.onnx.export(model, x, f"{out}/{name}.onnx", **kwargs)
    print("exported", name, os.path.getsize(f"{out}/{name}.onnx"), flush=True)
