#!/usr/bin/env python3
"""Builds the 10-model recommender ensemble (a model repository) with real ONNX models made by
PyTorch (Debian's python3-torch; seeded random weights, nothing downloaded):

  /usr/bin/python3 examples/recommender/make_repository.py OUT_DIR [--candidates 100]

One request scores CANDIDATES items for one user and answers the 10 best:

  user_id INT64[1], item_ids INT64[C], user_dense FP32[8]
    -> rec_features   (tabular: id hashing into 10000 buckets, standardised dense features)
    -> rec_user_tower, rec_item_tower, rec_context   (embeddings + MLPs: user, items, context)
    -> rec_ctr_s, rec_ctr_m, rec_ctr_l, rec_ctr_xl   (4 CTR MLPs, hidden 64 / 128 / 256 / 512)
    -> rec_reranker   (blends the 4 CTR estimates per item)
    -> rec_topk       (classify: top 10 candidate positions and their scores)
  = recommender (platform: ensemble), TOP_ITEMS INT64[10] and TOP_SCORES FP32[10].

Every model batches (dynamic_batching), so concurrent requests share executions at every step.
The same folder serves the "before" too: a client can call the 10 models one after another.
"""
import argparse
import textwrap
from pathlib import Path

import torch

BUCKETS = 10000
EMBEDDING = 32
DENSE = 8
CONTEXT = 16
CTR_SIZES = {"rec_ctr_s": 64, "rec_ctr_m": 128, "rec_ctr_l": 256, "rec_ctr_xl": 512}
TOP = 10
MAX_BATCH = 32
BATCHING = f"""dynamic_batching {{ max_queue_delay_microseconds: 2000 }}
parameters {{ key: "planned_batch_sizes" value: {{ string_value: "1,2,4,8,16,32" }} }}"""


class UserTower(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(BUCKETS, EMBEDDING)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(EMBEDDING + DENSE, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, EMBEDDING))

    def forward(self, user_bucket, dense):  # [B, 1], [B, 8] -> [B, 32]
        return self.mlp(torch.cat([self.embedding(user_bucket)[:, 0, :], dense], dim=1))


class ItemTower(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(BUCKETS, EMBEDDING)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(EMBEDDING, EMBEDDING), torch.nn.ReLU())

    def forward(self, item_buckets):  # [B, C] -> [B, C, 32]
        return self.mlp(self.embedding(item_buckets))


class Context(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DENSE, 32), torch.nn.ReLU(), torch.nn.Linear(32, CONTEXT))

    def forward(self, dense):  # [B, 8] -> [B, 16]
        return self.mlp(dense)


class Ctr(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(2 * EMBEDDING + CONTEXT, hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))

    def forward(self, user_vec, item_vecs, context):  # [B, 32], [B, C, 32], [B, 16] -> [B, C]
        candidates = item_vecs.shape[1]
        features = torch.cat([user_vec.unsqueeze(1).expand(-1, candidates, -1), item_vecs,
                              context.unsqueeze(1).expand(-1, candidates, -1)], dim=2)
        return torch.sigmoid(self.mlp(features)[:, :, 0])


class Reranker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, s, m, l, xl):  # 4 x [B, C] -> [B, C]
        return self.mlp(torch.stack([s, m, l, xl], dim=2))[:, :, 0]


def tensor(name, dtype, dims):
    return f'{{ name: "{name}", data_type: {dtype}, dims: [ {", ".join(map(str, dims))} ] }}'


def write_model(root, name, config):
    (root / name / "1").mkdir(parents=True, exist_ok=True)
    (root / name / "config.pbtxt").write_text(textwrap.dedent(config).strip() + "\n")


def export(root, name, module, example_inputs, input_specs, output_specs):
    """ONNX from PyTorch with the batch dim dynamic, and its config."""
    write_model(root, name, f"""
        name: "{name}"
        platform: "onnxruntime_onnx"
        max_batch_size: {MAX_BATCH}
        input [ {", ".join(tensor(*spec) for spec in input_specs)} ]
        output [ {", ".join(tensor(*spec) for spec in output_specs)} ]
        """ + BATCHING)
    names = [spec[0] for spec in input_specs] + [spec[0] for spec in output_specs]
    torch.onnx.export(module.eval(), example_inputs, str(root / name / "1" / "model.onnx"),
                      input_names=[spec[0] for spec in input_specs], output_names=[spec[0] for spec in output_specs],
                      dynamic_axes={n: {0: "batch"} for n in names}, opset_version=17)


def step(model, inputs, outputs):
    maps = "".join(f' input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    maps += "".join(f' output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: -1{maps} }}'


def build(root, candidates):
    torch.manual_seed(0)
    c = candidates
    write_model(root, "rec_features", f"""
        name: "rec_features"
        backend: "tabular"
        max_batch_size: {MAX_BATCH}
        input [ {tensor("user_id", "TYPE_INT64", [1])}, {tensor("item_ids", "TYPE_INT64", [c])},
                {tensor("user_dense", "TYPE_FP32", [DENSE])} ]
        output [ {tensor("user_bucket", "TYPE_INT64", [1])}, {tensor("item_buckets", "TYPE_INT64", [c])},
                 {tensor("dense", "TYPE_FP32", [DENSE])} ]
        dynamic_batching {{ max_queue_delay_microseconds: 2000 }}
        parameters [
          {{ key: "hash.user_bucket" value: {{ string_value: "user_id:{BUCKETS}" }} }},
          {{ key: "hash.item_buckets" value: {{ string_value: "item_ids:{BUCKETS}" }} }},
          {{ key: "concat.dense" value: {{ string_value: "user_dense" }} }},
          {{ key: "standardize.user_dense" value: {{ string_value: "0.5:0.29" }} }} ]
        """)
    b = 2  # example batch for the export
    export(root, "rec_user_tower", UserTower(), (torch.zeros(b, 1, dtype=torch.int64), torch.zeros(b, DENSE)),
           [("user_bucket", "TYPE_INT64", [1]), ("dense", "TYPE_FP32", [DENSE])],
           [("user_vec", "TYPE_FP32", [EMBEDDING])])
    export(root, "rec_item_tower", ItemTower(), (torch.zeros(b, c, dtype=torch.int64),),
           [("item_buckets", "TYPE_INT64", [c])], [("item_vecs", "TYPE_FP32", [c, EMBEDDING])])
    export(root, "rec_context", Context(), (torch.zeros(b, DENSE),),
           [("dense", "TYPE_FP32", [DENSE])], [("context", "TYPE_FP32", [CONTEXT])])
    for name, hidden in CTR_SIZES.items():
        export(root, name, Ctr(hidden), (torch.zeros(b, EMBEDDING), torch.zeros(b, c, EMBEDDING), torch.zeros(b, CONTEXT)),
               [("user_vec", "TYPE_FP32", [EMBEDDING]), ("item_vecs", "TYPE_FP32", [c, EMBEDDING]),
                ("context", "TYPE_FP32", [CONTEXT])], [("ctr", "TYPE_FP32", [c])])
    export(root, "rec_reranker", Reranker(), tuple(torch.zeros(b, c) for _ in range(4)),
           [(f"ctr_{size}", "TYPE_FP32", [c]) for size in ("s", "m", "l", "xl")], [("score", "TYPE_FP32", [c])])
    write_model(root, "rec_topk", f"""
        name: "rec_topk"
        backend: "classify"
        max_batch_size: {MAX_BATCH}
        input [ {tensor("score", "TYPE_FP32", [c])} ]
        output [ {tensor("TOP_ITEMS", "TYPE_INT64", [TOP])}, {tensor("TOP_SCORES", "TYPE_FP32", [TOP])} ]
        dynamic_batching {{ max_queue_delay_microseconds: 2000 }}
        """)
    steps = [step("rec_features", {"user_id": "user_id", "item_ids": "item_ids", "user_dense": "user_dense"},
                  {"user_bucket": "user_bucket", "item_buckets": "item_buckets", "dense": "dense"}),
             step("rec_user_tower", {"user_bucket": "user_bucket", "dense": "dense"}, {"user_vec": "user_vec"}),
             step("rec_item_tower", {"item_buckets": "item_buckets"}, {"item_vecs": "item_vecs"}),
             step("rec_context", {"dense": "dense"}, {"context": "context"})]
    for name, size in zip(CTR_SIZES, ("s", "m", "l", "xl")):
        steps.append(step(name, {"user_vec": "user_vec", "item_vecs": "item_vecs", "context": "context"},
                          {"ctr": f"ctr_{size}"}))
    steps.append(step("rec_reranker", {f"ctr_{s}": f"ctr_{s}" for s in ("s", "m", "l", "xl")}, {"score": "score"}))
    steps.append(step("rec_topk", {"score": "score"}, {"TOP_ITEMS": "TOP_ITEMS", "TOP_SCORES": "TOP_SCORES"}))
    step_list = ",\n          ".join(steps)
    write_model(root, "recommender", f"""
        name: "recommender"
        platform: "ensemble"
        max_batch_size: {MAX_BATCH}
        input [ {tensor("user_id", "TYPE_INT64", [1])}, {tensor("item_ids", "TYPE_INT64", [c])},
                {tensor("user_dense", "TYPE_FP32", [DENSE])} ]
        output [ {tensor("TOP_ITEMS", "TYPE_INT64", [TOP])}, {tensor("TOP_SCORES", "TYPE_FP32", [TOP])} ]
        ensemble_scheduling {{ step [
          {step_list}
        ] }}
        """)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--candidates", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(2)
    build(args.out_dir, args.candidates)
    print(f"recommender repository: {args.out_dir}")


if __name__ == "__main__":
    main()
