// Input tensors for `inferd infer` and `inferd bench`, shaped from a model's metadata: read from a
// .npy or .json file, or made up (random or zeros) for load generation.
#pragma once

#include <map>
#include <random>
#include <string>

#include "client/client.h"
#include "common/tensor.h"

namespace inferd::client {

enum class Fill { kRandom, kZero };

// Concrete shape for `input`: each -1 dim is the batch (first dim of a batching model, i.e. when
// the metadata shape starts with -1 and `batching`) or comes from `overrides` (NAME -> full shape).
StatusOr<Shape> ResolveShape(const TensorMetadata& input, bool batching, int64_t batch,
                             const std::map<std::string, Shape>& overrides);

// Random: floats in [-1, 1], integers in [0, 10), 8-character strings; or all zeros/empty strings.
StatusOr<Tensor> MakeInput(const TensorMetadata& input, const Shape& shape, Fill fill, std::mt19937* rng);

// FILE.npy (any shape and type the file holds), or FILE.json with a (nested) JSON array whose
// datatype is the input's and whose shape is the array's nesting.
StatusOr<Tensor> ReadInputFile(const TensorMetadata& input, const std::string& path);

// "NAME:1,3,224,224" -> {NAME, {1,3,224,224}}
StatusOr<std::pair<std::string, Shape>> ParseShapeFlag(const std::string& text);
// Every --shape flag, by input name.
StatusOr<std::map<std::string, Shape>> ParseShapeFlags(const std::vector<std::string>& texts);

// Whether the model takes a batch dim first (its metadata shapes start with -1).
bool HasBatchDim(const ModelMetadata& metadata);

}  // namespace inferd::client
