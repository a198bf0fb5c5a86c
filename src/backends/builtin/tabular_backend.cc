// tabular: feature preparation for recommenders and other models of table rows. Each output is
// defined by one parameter named after it:
//   concat.OUTPUT = "IN1,IN2,..."   TYPE_FP32 output: the numeric inputs (FP32, FP64, INT32, INT64)
//                                   side by side, per row; dims [ sum of the inputs' widths ].
//   hash.OUTPUT   = "IN:BUCKETS"    TYPE_INT64 (or TYPE_INT32) output, dims as IN's: each id of IN
//                                   (TYPE_STRING, TYPE_INT64 or TYPE_INT32) mapped to a bucket in
//                                   [0, BUCKETS), for an embedding table of BUCKETS rows.
// and, for any input that a concat uses:
//   standardize.IN = "MEAN:STD"                 every column of IN becomes (x - MEAN) / STD;
//                  = "MEAN0:STD0,MEAN1:STD1,..." one pair per column.
// The bucket of an id is FNV-1a-64(text) mod BUCKETS, text being the string itself or the integer's
// decimal form, so the id 42 and the string "42" share a bucket and any language can compute it
// (training pipelines must look up the same rows).
#include <charconv>
#include <cmath>
#include <set>

#include "backends/backend.h"
#include "backends/builtin/builtin_backends.h"
#include "common/bytes_elements.h"
#include "common/option_list.h"

namespace inferd {

uint64_t TabularIdHash(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64-bit offset basis and prime
  for (unsigned char byte : text) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

namespace {

struct Standardizer {
  std::vector<float> mean;  // one per column, or one for all
  std::vector<float> std;
  float Apply(size_t column, float x) const {
    if (mean.empty()) return x;
    const size_t i = mean.size() == 1 ? 0 : column;
    return (x - mean[i]) / std[i];
  }
};

struct ConcatPart {
  size_t input = 0;  // index in the config's inputs
  int64_t width = 0;
  Standardizer standardize;
};

struct OutputPlan {
  size_t output = 0;  // index in the config's outputs
  std::vector<ConcatPart> concat;  // a concat output
  int64_t width = 0;
  size_t hash_input = 0;  // a hash output
  uint64_t buckets = 0;
};

int64_t RowWidth(const google::protobuf::RepeatedField<int64_t>& dims) {
  int64_t width = 1;
  for (int64_t d : dims) width *= d;
  return width;
}

bool HasFixedDims(const google::protobuf::RepeatedField<int64_t>& dims) {
  for (int64_t d : dims) {
    if (d <= 0) return false;
  }
  return true;
}

StatusOr<float> ParseFloat(std::string_view text) {
  float value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return Status::InvalidArgument("'" + std::string(text) + "' is not a number");
  }
  return value;
}

StatusOr<Standardizer> ParseStandardizer(const std::string& text, int64_t width) {
  Standardizer result;
  for (std::string_view pair : SplitOn(text, ',')) {
    const auto fields = SplitOn(pair, ':');
    if (fields.size() != 2) return Status::InvalidArgument("'" + std::string(pair) + "' is not MEAN:STD");
    ASSIGN_OR_RETURN(float mean, ParseFloat(fields[0]));
    ASSIGN_OR_RETURN(float std, ParseFloat(fields[1]));
    if (std == 0) return Status::InvalidArgument("a standard deviation of 0");
    result.mean.push_back(mean);
    result.std.push_back(std);
  }
  if (result.mean.size() != 1 && static_cast<int64_t>(result.mean.size()) != width) {
    return Status::InvalidArgument(std::to_string(result.mean.size()) + " MEAN:STD pairs for " +
                                   std::to_string(width) + " columns (give one, or one per column)");
  }
  return result;
}

class TabularPlanner {
 public:
  explicit TabularPlanner(const ModelConfig& config) : config_(config) {}

  StatusOr<std::vector<OutputPlan>> Plan() {
    for (const auto& [key, unused] : config_.parameters()) {
      const bool known = key.starts_with("concat.") || key.starts_with("hash.") || key.starts_with("standardize.");
      if (!known) return Status::InvalidArgument("unknown parameter '" + key + "' (concat.*, hash.*, standardize.*)");
    }
    std::vector<OutputPlan> plans;
    for (int o = 0; o < config_.output_size(); ++o) {
      auto plan = PlanOutput(static_cast<size_t>(o));
      if (!plan.ok()) return plan.status().WithPrefix("output '" + config_.output(o).name() + "'");
      plans.push_back(std::move(plan).value());
    }
    for (const auto& [key, unused] : config_.parameters()) {
      if (key.starts_with("standardize.") && !standardized_.contains(key.substr(12))) {
        return Status::InvalidArgument("parameters[" + key + "]: no concat output uses input '" + key.substr(12) + "'");
      }
    }
    return plans;
  }

 private:
  StatusOr<OutputPlan> PlanOutput(size_t index) {
    const auto& output = config_.output(static_cast<int>(index));
    if (!HasFixedDims(output.dims())) return Status::InvalidArgument("needs fixed dims");
    const auto concat = ConfigParameter(config_, "concat." + output.name());
    const auto hash = ConfigParameter(config_, "hash." + output.name());
    if (concat.has_value() == hash.has_value()) {
      return Status::InvalidArgument("needs exactly one of parameters[concat." + output.name() + "] and [hash." +
                                     output.name() + "]");
    }
    OutputPlan plan;
    plan.output = index;
    plan.width = RowWidth(output.dims());
    if (concat) {
      RETURN_IF_ERROR(PlanConcat(*concat, output, &plan));
    } else {
      RETURN_IF_ERROR(PlanHash(*hash, output, &plan));
    }
    return plan;
  }

  Status PlanConcat(const std::string& text, const inference::ModelOutput& output, OutputPlan* plan) {
    if (output.data_type() != inference::TYPE_FP32) return Status::InvalidArgument("a concat output must be TYPE_FP32");
    int64_t total = 0;
    for (std::string_view name : SplitOn(text, ',')) {
      ASSIGN_OR_RETURN(size_t input, FindInput(name));
      const auto& in = config_.input(static_cast<int>(input));
      const auto type = in.data_type();
      if (type != inference::TYPE_FP32 && type != inference::TYPE_FP64 && type != inference::TYPE_INT32 &&
          type != inference::TYPE_INT64) {
        return Status::InvalidArgument("input '" + in.name() + "' is not numeric (FP32, FP64, INT32, INT64)");
      }
      ConcatPart part{input, RowWidth(in.dims()), {}};
      if (auto standardize = ConfigParameter(config_, "standardize." + in.name())) {
        auto parsed = ParseStandardizer(*standardize, part.width);
        if (!parsed.ok()) return parsed.status().WithPrefix("parameters[standardize." + in.name() + "]");
        part.standardize = std::move(parsed).value();
        standardized_.insert(in.name());
      }
      total += part.width;
      plan->concat.push_back(std::move(part));
    }
    if (total != plan->width) {
      return Status::InvalidArgument("has " + std::to_string(plan->width) + " values per row but its inputs give " +
                                     std::to_string(total));
    }
    return Status::Ok();
  }

  Status PlanHash(const std::string& text, const inference::ModelOutput& output, OutputPlan* plan) {
    if (output.data_type() != inference::TYPE_INT64 && output.data_type() != inference::TYPE_INT32) {
      return Status::InvalidArgument("a hash output must be TYPE_INT64 or TYPE_INT32");
    }
    const auto fields = SplitOn(text, ':');
    if (fields.size() != 2) return Status::InvalidArgument("parameters[hash." + output.name() + "] is not INPUT:BUCKETS");
    ASSIGN_OR_RETURN(plan->hash_input, FindInput(fields[0]));
    const auto& in = config_.input(static_cast<int>(plan->hash_input));
    const auto type = in.data_type();
    if (type != inference::TYPE_STRING && type != inference::TYPE_INT64 && type != inference::TYPE_INT32) {
      return Status::InvalidArgument("input '" + in.name() + "' holds no ids (TYPE_STRING, TYPE_INT64, TYPE_INT32)");
    }
    if (RowWidth(in.dims()) != plan->width) return Status::InvalidArgument("must have the dims of input '" + in.name() + "'");
    int64_t buckets = 0;
    auto [end, error] = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), buckets);
    const int64_t most = output.data_type() == inference::TYPE_INT32 ? INT32_MAX : INT64_MAX;
    if (error != std::errc() || end != fields[1].data() + fields[1].size() || buckets <= 0 || buckets > most) {
      return Status::InvalidArgument("bucket count '" + std::string(fields[1]) + "' is not a positive integer in range");
    }
    plan->buckets = static_cast<uint64_t>(buckets);
    return Status::Ok();
  }

  StatusOr<size_t> FindInput(std::string_view name) const {
    for (int i = 0; i < config_.input_size(); ++i) {
      if (config_.input(i).name() == name) {
        if (!HasFixedDims(config_.input(i).dims())) return Status::InvalidArgument("input '" + std::string(name) + "' needs fixed dims");
        return static_cast<size_t>(i);
      }
    }
    return Status::InvalidArgument("names no input '" + std::string(name) + "'");
  }

  const ModelConfig& config_;
  std::set<std::string> standardized_;
};

float NumberAt(const Tensor& tensor, size_t i) {
  switch (tensor.dtype) {
    case DataType::kFp32: return tensor.values<float>()[i];
    case DataType::kFp64: return static_cast<float>(tensor.values<double>()[i]);
    case DataType::kInt32: return static_cast<float>(tensor.values<int32_t>()[i]);
    default: return static_cast<float>(tensor.values<int64_t>()[i]);
  }
}

class TabularModel final : public Model {
 public:
  TabularModel(const ModelConfig& config, std::vector<OutputPlan> plans)
      : config_(config), batched_(config.max_batch_size() > 0), plans_(std::move(plans)) {}

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    const int64_t rows = batched_ ? batch.batch_size : 1;
    std::vector<const Tensor*> inputs;
    for (const auto& in : config_.input()) {
      const Tensor* tensor = batch.FindInput(in.name());
      if (tensor == nullptr) return Status::InvalidArgument("tabular needs its input '" + in.name() + "'");
      inputs.push_back(tensor);
    }
    outputs->clear();
    for (const OutputPlan& plan : plans_) {
      const auto& output = config_.output(static_cast<int>(plan.output));
      Shape shape(output.dims().begin(), output.dims().end());
      if (batched_) shape.insert(shape.begin(), rows);
      const DataType dtype = DataTypeFromConfig(output.data_type());
      MutableBuffer buffer = AllocateBuffer(static_cast<size_t>(rows * plan.width) * DataTypeSize(dtype));
      if (plan.concat.empty()) {
        RETURN_IF_ERROR(Hash(*inputs[plan.hash_input], plan, rows, dtype, buffer.get()));
      } else {
        Concat(inputs, plan, rows, reinterpret_cast<float*>(buffer.get()));
      }
      outputs->push_back({output.name(), dtype, std::move(shape), AliasData(buffer.memory, buffer.get()), buffer.size});
    }
    return Status::Ok();
  }

 private:
  static void Concat(const std::vector<const Tensor*>& inputs, const OutputPlan& plan, int64_t rows, float* out) {
    for (int64_t row = 0; row < rows; ++row) {
      for (const ConcatPart& part : plan.concat) {
        const Tensor& in = *inputs[part.input];
        const size_t first = static_cast<size_t>(row * part.width);
        for (int64_t c = 0; c < part.width; ++c) {
          *out++ = part.standardize.Apply(static_cast<size_t>(c), NumberAt(in, first + static_cast<size_t>(c)));
        }
      }
    }
  }

  static Status Hash(const Tensor& in, const OutputPlan& plan, int64_t rows, DataType dtype, uint8_t* out) {
    const size_t count = static_cast<size_t>(rows * plan.width);
    size_t i = 0;
    auto store = [&](std::string_view text) {
      if (i >= count) return;
      const uint64_t bucket = TabularIdHash(text) % plan.buckets;
      if (dtype == DataType::kInt64)
        reinterpret_cast<int64_t*>(out)[i] = static_cast<int64_t>(bucket);
      else
        reinterpret_cast<int32_t*>(out)[i] = static_cast<int32_t>(bucket);
      ++i;
    };
    if (in.dtype == DataType::kBytes) {
      ForEachBytesElement(in, store);
    } else {
      char digits[24];
      for (size_t k = 0; k < count; ++k) {
        const int64_t id = in.dtype == DataType::kInt64 ? in.values<int64_t>()[k] : in.values<int32_t>()[k];
        auto [end, unused] = std::to_chars(digits, digits + sizeof(digits), id);
        store(std::string_view(digits, static_cast<size_t>(end - digits)));
      }
    }
    if (i != count) return Status::InvalidArgument("input '" + in.name + "' holds " + std::to_string(i) + " ids, not " + std::to_string(count));
    return Status::Ok();
  }

  const ModelConfig config_;
  const bool batched_;
  const std::vector<OutputPlan> plans_;
};

class TabularBackend final : public Backend {
 public:
  std::string_view name() const override { return "tabular"; }

  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config, const LoadOptions& options) override {
    (void)options;
    if (config.output_size() == 0) return Status::InvalidArgument("model '" + config.name() + "': tabular needs outputs");
    auto plans = TabularPlanner(config).Plan();
    if (!plans.ok()) return plans.status().WithPrefix("model '" + config.name() + "': tabular");
    return std::unique_ptr<Model>(new TabularModel(config, std::move(plans).value()));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeTabularBackend() { return std::make_unique<TabularBackend>(); }

}  // namespace inferd
