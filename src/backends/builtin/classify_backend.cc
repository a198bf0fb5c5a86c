// classify: a post-processing step for classifiers. Its one input is a scores tensor (a batch of
// rows when the model batches); per row it takes the top k classes, with an optional softmax
// first, and answers each declared output by its type:
//   TYPE_FP32            the k scores (probabilities after the softmax), best first;
//   TYPE_INT64/TYPE_INT32 the k class indices;
//   TYPE_STRING          the k labels, from the label file in the model folder (line i: class i).
// k is the outputs' one dimension (every output declares the same [ k ]).
// Parameters: softmax ("true"/"false", default false), labels (file name, default labels.txt;
// needed only with a TYPE_STRING output).
#include <cmath>

#include "backends/backend.h"
#include "backends/builtin/builtin_backends.h"
#include "common/classification.h"

namespace inferd {
namespace {

struct ClassifySettings {
  size_t top_k = 1;
  bool softmax = false;
  std::vector<std::string> labels;  // empty unless a TYPE_STRING output wants them
};

// Softmax over each row, in place: exp(x - max) / sum, stable for large scores.
std::vector<float> SoftmaxRows(std::span<const float> scores, size_t classes) {
  std::vector<float> out(scores.begin(), scores.end());
  for (size_t start = 0; start + classes <= out.size(); start += classes) {
    float* row = out.data() + start;
    const float peak = *std::max_element(row, row + classes);
    double sum = 0;
    for (size_t i = 0; i < classes; ++i) sum += (row[i] = std::exp(row[i] - peak));
    for (size_t i = 0; i < classes; ++i) row[i] = static_cast<float>(row[i] / sum);
  }
  return out;
}

class ClassifyModel final : public Model {
 public:
  ClassifyModel(const ModelConfig& config, ClassifySettings settings) : config_(config), settings_(std::move(settings)) {}

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    const Tensor* input = batch.FindInput(config_.input(0).name());
    if (input == nullptr) return Status::InvalidArgument("classify needs its input '" + config_.input(0).name() + "'");
    const bool batched = config_.max_batch_size() > 0;
    const int64_t rows = batched ? batch.batch_size : 1;
    Tensor scores = *input;
    std::shared_ptr<std::vector<float>> normalised;
    if (settings_.softmax && input->dtype == DataType::kFp32) {
      const size_t classes = input->values<float>().size() / static_cast<size_t>(rows);
      normalised = std::make_shared<std::vector<float>>(SoftmaxRows(input->values<float>(), classes));
      scores.data = AliasData(normalised, normalised->data());
    }
    ASSIGN_OR_RETURN(std::vector<ClassScore> best, TopClasses(scores, rows, settings_.top_k));
    const size_t k = best.size() / static_cast<size_t>(rows);
    if (k != settings_.top_k) {
      return Status::InvalidArgument("classify: input '" + input->name + "' has " + std::to_string(k) +
                                     " classes per row, fewer than the outputs' " + std::to_string(settings_.top_k));
    }
    const Shape shape = batched ? Shape{rows, static_cast<int64_t>(k)} : Shape{static_cast<int64_t>(k)};
    outputs->clear();
    for (const auto& output : config_.output()) outputs->push_back(Answer(output, best, shape));
    return Status::Ok();
  }

 private:
  Tensor Answer(const inference::ModelOutput& output, const std::vector<ClassScore>& best, const Shape& shape) const {
    if (output.data_type() == inference::TYPE_STRING) {
      std::vector<std::string> labels;
      for (const ClassScore& scored : best) labels.push_back(settings_.labels.at(static_cast<size_t>(scored.index)));
      return BytesTensor(output.name(), shape, labels);
    }
    const DataType dtype = DataTypeFromConfig(output.data_type());
    MutableBuffer buffer = AllocateBuffer(best.size() * DataTypeSize(dtype));
    for (size_t i = 0; i < best.size(); ++i) {
      if (dtype == DataType::kFp32) reinterpret_cast<float*>(buffer.get())[i] = static_cast<float>(best[i].value);
      if (dtype == DataType::kInt64) reinterpret_cast<int64_t*>(buffer.get())[i] = best[i].index;
      if (dtype == DataType::kInt32) reinterpret_cast<int32_t*>(buffer.get())[i] = static_cast<int32_t>(best[i].index);
    }
    return {output.name(), dtype, shape, AliasData(buffer.memory, buffer.get()), buffer.size};
  }

  const ModelConfig config_;
  const ClassifySettings settings_;
};

class ClassifyBackend final : public Backend {
 public:
  std::string_view name() const override { return "classify"; }

  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config, const LoadOptions& options) override {
    const std::string prefix = "model '" + config.name() + "': classify ";
    if (config.input_size() != 1) return Status::InvalidArgument(prefix + "takes exactly one input (the scores)");
    if (config.output_size() == 0) return Status::InvalidArgument(prefix + "needs at least one output");
    ClassifySettings settings;
    bool wants_labels = false;
    for (const auto& output : config.output()) {
      const auto type = output.data_type();
      if (type != inference::TYPE_FP32 && type != inference::TYPE_INT64 && type != inference::TYPE_INT32 &&
          type != inference::TYPE_STRING) {
        return Status::InvalidArgument(prefix + "output '" + output.name() +
                                       "' must be TYPE_FP32 (scores), TYPE_INT64/TYPE_INT32 (indices) or TYPE_STRING (labels)");
      }
      if (output.dims_size() != 1 || output.dims(0) <= 0) {
        return Status::InvalidArgument(prefix + "output '" + output.name() + "' must have one fixed dimension, k");
      }
      if (&output != &config.output(0) && output.dims(0) != config.output(0).dims(0)) {
        return Status::InvalidArgument(prefix + "outputs must all have the same k");
      }
      wants_labels |= type == inference::TYPE_STRING;
    }
    settings.top_k = static_cast<size_t>(config.output(0).dims(0));
    const std::string softmax = ConfigParameter(config, "softmax").value_or("false");
    if (softmax != "true" && softmax != "false") {
      return Status::InvalidArgument(prefix + "parameters[softmax] must be \"true\" or \"false\", not '" + softmax + "'");
    }
    settings.softmax = softmax == "true";
    if (wants_labels) {
      const std::string file = ConfigParameter(config, "labels").value_or("labels.txt");
      auto labels = ReadLabelFile(options.version_dir.parent_path() / file);
      if (!labels.ok()) return labels.status().WithPrefix(prefix + "labels");
      settings.labels = std::move(labels).value();
      const int64_t classes = config.input(0).dims_size() > 0 ? config.input(0).dims(config.input(0).dims_size() - 1) : -1;
      if (classes > 0 && settings.labels.size() < static_cast<size_t>(classes)) {
        return Status::InvalidArgument(prefix + file + " has " + std::to_string(settings.labels.size()) +
                                       " labels for " + std::to_string(classes) + " classes");
      }
    }
    return std::unique_ptr<Model>(new ClassifyModel(config, std::move(settings)));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeClassifyBackend() { return std::make_unique<ClassifyBackend>(); }

}  // namespace inferd
