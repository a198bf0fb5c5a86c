"""The image pipeline of the built-in backends: a JPEG goes through image_preprocess -> an ONNX
classifier (torchvision's resnet18, seeded random weights: a random mobilenet answers every image
alike, to 1e-8) -> classify,
inside one ensemble, and matches the same pipeline computed in Python with PIL + numpy + PyTorch
(torchvision's Resize(256) / CenterCrop(224) / Normalize on the PIL image). Bad images among good
ones, batched together, fail alone with a 400 naming the input; the others are unaffected."""
import base64
import concurrent.futures
import io
import json
import time

import numpy as np
import pytest
import requests

from inferd_harness import Inferd, write_repository

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
transforms = pytest.importorskip("torchvision.transforms")
Image = pytest.importorskip("PIL.Image")

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
TOP = 5

PREPROCESS = f"""
    backend: "image_preprocess"
    max_batch_size: 4
    input [ {{ name: "IMAGE", data_type: TYPE_STRING, dims: [ 1 ] }} ]
    output [ {{ name: "PIXELS", data_type: TYPE_FP32, dims: [ 3, 224, 224 ] }} ]
    dynamic_batching {{ max_queue_delay_microseconds: 20000 }}
    parameters [
      {{ key: "shorter_side" value: {{ string_value: "256" }} }},
      {{ key: "mean" value: {{ string_value: "{','.join(map(str, MEAN))}" }} }},
      {{ key: "std" value: {{ string_value: "{','.join(map(str, STD))}" }} }},
      {{ key: "max_pixels" value: {{ string_value: "1000000" }} }} ]
    """
CLASSIFIER = """
    platform: "onnxruntime_onnx"
    max_batch_size: 4
    input [ { name: "input", data_type: TYPE_FP32, dims: [ 3, 224, 224 ] } ]
    output [ { name: "output", data_type: TYPE_FP32, dims: [ 1000 ] } ]
    dynamic_batching { max_queue_delay_microseconds: 20000 }
    parameters { key: "planned_batch_sizes" value: { string_value: "1,2,4" } }
    """
TOPK = f"""
    backend: "classify"
    max_batch_size: 4
    input [ {{ name: "SCORES", data_type: TYPE_FP32, dims: [ 1000 ] }} ]
    output [ {{ name: "TOP_SCORES", data_type: TYPE_FP32, dims: [ {TOP} ] }},
             {{ name: "TOP_CLASSES", data_type: TYPE_INT64, dims: [ {TOP} ] }},
             {{ name: "TOP_LABELS", data_type: TYPE_STRING, dims: [ {TOP} ] }} ]
    """
PIPELINE = f"""
    platform: "ensemble"
    max_batch_size: 4
    input [ {{ name: "IMAGE", data_type: TYPE_STRING, dims: [ 1 ] }} ]
    output [ {{ name: "TOP_SCORES", data_type: TYPE_FP32, dims: [ {TOP} ] }},
             {{ name: "TOP_CLASSES", data_type: TYPE_INT64, dims: [ {TOP} ] }},
             {{ name: "TOP_LABELS", data_type: TYPE_STRING, dims: [ {TOP} ] }} ]
    ensemble_scheduling {{ step [
      {{ model_name: "preprocess" model_version: -1
         input_map {{ key: "IMAGE" value: "IMAGE" }} output_map {{ key: "PIXELS" value: "pixels" }} }},
      {{ model_name: "classifier" model_version: -1
         input_map {{ key: "input" value: "pixels" }} output_map {{ key: "output" value: "logits" }} }},
      {{ model_name: "top5" model_version: -1
         input_map {{ key: "SCORES" value: "logits" }}
         output_map {{ key: "TOP_SCORES" value: "TOP_SCORES" }} output_map {{ key: "TOP_CLASSES" value: "TOP_CLASSES" }}
         output_map {{ key: "TOP_LABELS" value: "TOP_LABELS" }} }}
    ] }}
    """


def photo(width, height, seed):
    """A smooth synthetic picture (gradients, a disc, noise): JPEG-friendly, not flat."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 128 + 100 * np.sin(x / (17 + seed)) * np.cos(y / 23)
    g = 255 * x / width
    b = 255 * ((x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 3) ** 2)
    pixels = np.stack([r, g, b], axis=-1) + rng.normal(0, 8, (height, width, 3))
    return np.clip(pixels, 0, 255).astype(np.uint8)


def encode(pixels, fmt, **options):
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format=fmt, **options)
    return out.getvalue()


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("image_pipeline")
    write_repository(root, {"preprocess": (PREPROCESS, [1]), "classifier": (CLASSIFIER, [1]),
                            "top5": (TOPK, [1]), "image_pipeline": (PIPELINE, [1])})
    (root / "top5" / "labels.txt").write_text("".join(f"class_{i}\n" for i in range(1000)))
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    torch.onnx.export(model, torch.zeros(1, 3, 224, 224), str(root / "classifier" / "1" / "model.onnx"),
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=17)
    server = Inferd(root)
    deadline = time.time() + 300
    while requests.get(server.url + "/v2/models/image_pipeline/ready", timeout=5).status_code != 200:
        assert time.time() < deadline, server.logs()
        time.sleep(0.2)
    yield server, model
    assert server.stop() == 0
    assert "AddressSanitizer" not in server.logs()


def reference(model, encoded):
    """The pipeline in Python: PIL decode, torchvision resize/crop/normalise, PyTorch, top-k."""
    prepare = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                                  transforms.Normalize(MEAN, STD)])
    pixels = prepare(Image.open(io.BytesIO(encoded)).convert("RGB"))
    with torch.no_grad():
        logits = model(pixels.unsqueeze(0))[0].numpy()
    return pixels.numpy(), logits


def bytes_request(model, images, outputs):
    """KServe v2 binary tensor extension: BYTES elements as 4-byte length + bytes."""
    raw = b"".join(len(image).to_bytes(4, "little") + image for image in images)
    header = json.dumps({"inputs": [{"name": "IMAGE", "shape": [len(images), 1], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": len(raw)}}],
                         "outputs": [{"name": name} for name in outputs]}).encode()
    return {"url": f"/v2/models/{model}/infer", "data": header + raw,
            "headers": {"Inference-Header-Content-Length": str(len(header)),
                        "Content-Type": "application/octet-stream"}}


def post(server, request, timeout=60):
    return requests.post(server.url + request["url"], data=request["data"], headers=request["headers"],
                         timeout=timeout)


def outputs_of(response):
    assert response.status_code == 200, response.text
    return {output["name"]: output for output in response.json()["outputs"]}


def check_top(answer, logits):
    """Top-k of our pipeline against PyTorch's logits. Random weights leave near-ties, so each of our
    classes must carry the reference's k-th best logit (within tolerance), not one fixed index."""
    tolerance = 1e-3 * float(np.abs(logits).max())
    expected = np.sort(logits)[::-1][:TOP]
    scores = np.array(answer["TOP_SCORES"]["data"], dtype=np.float32)
    classes = answer["TOP_CLASSES"]["data"]
    assert np.abs(scores - expected).max() <= tolerance, (scores, expected)
    assert np.abs(logits[classes] - expected).max() <= tolerance, (classes, np.argsort(logits)[::-1][:TOP])
    assert answer["TOP_LABELS"]["data"] == [f"class_{c}" for c in classes]


def test_a_jpeg_through_the_pipeline_matches_pil_and_pytorch(pipeline):
    server, model = pipeline
    jpeg = encode(photo(500, 375, 1), "JPEG", quality=90)
    pixels, logits = reference(model, jpeg)
    # The preprocessing step alone, served as the model it is: PIL's pixels, up to one 8-bit level
    # where fixed-point and float weights round differently.
    ours = outputs_of(post(server, bytes_request("preprocess", [jpeg], ["PIXELS"])))["PIXELS"]
    assert ours["shape"] == [1, 3, 224, 224]
    diff = np.abs(np.array(ours["data"], dtype=np.float32).reshape(3, 224, 224) - pixels)
    assert diff.max() <= 1.0 / 255 / min(STD) + 1e-4, diff.max()
    assert diff.mean() < 1e-3, diff.mean()
    check_top(outputs_of(post(server, bytes_request("image_pipeline", [jpeg], ["TOP_SCORES", "TOP_CLASSES",
                                                                               "TOP_LABELS"]))), logits)


def test_png_portrait_and_tf_serving_b64(pipeline):
    server, model = pipeline
    png = encode(photo(300, 451, 2), "PNG")
    _, logits = reference(model, png)
    _, other = reference(model, encode(photo(500, 375, 1), "JPEG", quality=90))
    assert np.abs(np.sort(logits)[-TOP:] - np.sort(other)[-TOP:]).max() > 1e-2, "the classifier must tell images apart"
    response = requests.post(server.url + "/v1/models/image_pipeline:predict",
                             json={"instances": [{"IMAGE": [{"b64": base64.b64encode(png).decode()}]}]}, timeout=60)
    assert response.status_code == 200, response.text
    prediction = response.json()["predictions"][0]
    check_top({name: {"data": value} for name, value in prediction.items()}, logits)


def test_bad_images_mid_stream_fail_alone_and_the_rest_are_unaffected(pipeline):
    server, model = pipeline
    good = encode(photo(320, 240, 3), "JPEG", quality=85)
    _, logits = reference(model, good)
    bad = {"truncated": good[: len(good) // 2], "not_an_image": b"GIF89a, or anything else",
           "too_large": encode(np.zeros((1001, 1000, 3), np.uint8), "PNG"), "empty": b""}
    stream = [("good", good)] * 24
    for i, (kind, image) in enumerate(bad.items()):
        stream.insert(3 + 5 * i, (kind, image))
    outputs = ["TOP_SCORES", "TOP_CLASSES", "TOP_LABELS"]
    before = server.stats("preprocess")[0]["inference_count"]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda item: post(server, bytes_request("image_pipeline", [item[1]], outputs)), stream))
    good_answers = [outputs_of(a) for (kind, _), a in zip(stream, answers) if kind == "good"]
    assert len(good_answers) == 24
    for answer in good_answers:
        check_top(answer, logits)
        assert answer["TOP_CLASSES"]["data"] == good_answers[0]["TOP_CLASSES"]["data"]
    expected_words = {"truncated": "JPEG", "not_an_image": "not a JPEG or PNG", "too_large": "1000x1001",
                      "empty": "not a JPEG or PNG"}
    for (kind, _), answer in zip(stream, answers):
        if kind == "good":
            continue
        assert answer.status_code == 400, (kind, answer.text)
        error = answer.json()["error"]
        assert "input 'IMAGE'" in error and expected_words[kind] in error, (kind, error)
    # Batched together or not, every good image was preprocessed once more, and the server serves on.
    assert server.stats("preprocess")[0]["inference_count"] - before >= 24
    check_top(outputs_of(post(server, bytes_request("image_pipeline", [good], outputs))), logits)
    # A batch of two images in one request: one bad image fails that request only.
    mixed = post(server, bytes_request("image_pipeline", [good, bad["truncated"]], outputs))
    assert mixed.status_code == 400 and "batch row 1" in mixed.json()["error"], mixed.text


def test_images_over_grpc_and_a_bad_one_is_invalid_argument(pipeline, grpc_stubs):
    import grpc
    server, model = pipeline
    jpeg = encode(photo(400, 300, 4), "JPEG", quality=80)
    _, logits = reference(model, jpeg)
    pb, services = grpc_stubs[0], grpc_stubs[1]
    stub = services.GRPCInferenceServiceStub(grpc.insecure_channel(server.grpc_target))

    def request(image):
        message = pb.ModelInferRequest(model_name="image_pipeline")
        message.inputs.add(name="IMAGE", datatype="BYTES", shape=[1, 1]).contents.bytes_contents.append(image)
        for name in ("TOP_SCORES", "TOP_CLASSES", "TOP_LABELS"):
            message.outputs.add(name=name)
        return message
    reply = stub.ModelInfer(request(jpeg), timeout=60)
    raw = dict(zip([o.name for o in reply.outputs], reply.raw_output_contents))
    typed = {o.name: o.contents for o in reply.outputs}
    scores = list(typed["TOP_SCORES"].fp32_contents) or np.frombuffer(raw["TOP_SCORES"], np.float32).tolist()
    classes = list(typed["TOP_CLASSES"].int64_contents) or np.frombuffer(raw["TOP_CLASSES"], np.int64).tolist()
    if typed["TOP_LABELS"].bytes_contents:
        labels = [label.decode() for label in typed["TOP_LABELS"].bytes_contents]
    else:  # raw BYTES: 4-byte length, then the bytes, per element
        blob, labels = raw["TOP_LABELS"], []
        while blob:
            length = int.from_bytes(blob[:4], "little")
            labels.append(blob[4:4 + length].decode())
            blob = blob[4 + length:]
    check_top({"TOP_SCORES": {"data": scores}, "TOP_CLASSES": {"data": classes}, "TOP_LABELS": {"data": labels}},
              logits)
    with pytest.raises(grpc.RpcError) as error:
        stub.ModelInfer(request(jpeg[:100]), timeout=60)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "input 'IMAGE'" in error.value.details()
