#include "backends/builtin/builtin_backends.h"

#include <charconv>
#include <chrono>
#include <sstream>

#include "backends/backend.h"

namespace inferd {
namespace {

StatusOr<ExecutionCost> CostFromConfig(const ModelConfig& config) {
  auto text = ConfigParameter(config, "cost");
  if (!text) return ExecutionCost{};
  auto cost = ParseExecutionCost(*text);
  if (!cost.ok()) return cost.status().WithPrefix("model '" + config.name() + "': parameter 'cost'");
  return cost;
}

// identity: output i is input i, sharing its memory.
class IdentityModel final : public Model {
 public:
  IdentityModel(const ModelConfig& config, ExecutionCost cost) : config_(config), cost_(cost) {}

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    BurnExecutionCost(cost_, batch.batch_size);
    outputs->clear();
    for (int i = 0; i < config_.output_size(); ++i) {
      const Tensor* input = batch.FindInput(config_.input(i).name());
      if (input == nullptr) continue;  // optional input absent: its output is absent too
      Tensor out = *input;
      out.name = config_.output(i).name();
      outputs->push_back(std::move(out));
    }
    return Status::Ok();
  }

 private:
  ModelConfig config_;
  ExecutionCost cost_;
};

class IdentityBackend final : public Backend {
 public:
  std::string_view name() const override { return "identity"; }
  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config, const LoadOptions&) override {
    if (config.input_size() != config.output_size()) {
      return Status::InvalidArgument("model '" + config.name() +
                                     "': identity needs as many outputs as inputs");
    }
    for (int i = 0; i < config.input_size(); ++i) {
      if (config.input(i).data_type() != config.output(i).data_type()) {
        return Status::InvalidArgument("model '" + config.name() + "': identity output '" +
                                       config.output(i).name() + "' must have the data_type of input '" +
                                       config.input(i).name() + "'");
      }
    }
    ASSIGN_OR_RETURN(ExecutionCost cost, CostFromConfig(config));
    return std::unique_ptr<Model>(new IdentityModel(config, cost));
  }
};

template <typename T>
void AddSub(const Tensor& a, const Tensor& b, uint8_t* sum_out, uint8_t* diff_out) {
  auto x = a.values<T>();
  auto y = b.values<T>();
  T* sum = reinterpret_cast<T*>(sum_out);
  T* diff = reinterpret_cast<T*>(diff_out);
  for (size_t i = 0; i < x.size(); ++i) {
    sum[i] = x[i] + y[i];
    diff[i] = x[i] - y[i];
  }
}

// add_sub: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1.
class AddSubModel final : public Model {
 public:
  AddSubModel(const ModelConfig& config, ExecutionCost cost) : config_(config), cost_(cost) {}

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    BurnExecutionCost(cost_, batch.batch_size);
    const Tensor* a = batch.FindInput(config_.input(0).name());
    const Tensor* b = batch.FindInput(config_.input(1).name());
    if (a == nullptr || b == nullptr) return Status::InvalidArgument("add_sub needs both inputs");
    if (a->shape != b->shape) {
      return Status::InvalidArgument("add_sub inputs have different shapes " + ShapeToString(a->shape) +
                                     " and " + ShapeToString(b->shape));
    }
    MutableBuffer sum = AllocateBuffer(a->byte_size);
    MutableBuffer diff = AllocateBuffer(a->byte_size);
    if (a->dtype == DataType::kFp32)
      AddSub<float>(*a, *b, sum.get(), diff.get());
    else
      AddSub<int32_t>(*a, *b, sum.get(), diff.get());
    outputs->clear();
    outputs->push_back(
        {config_.output(0).name(), a->dtype, a->shape, AliasData(sum.memory, sum.get()), a->byte_size});
    outputs->push_back(
        {config_.output(1).name(), a->dtype, a->shape, AliasData(diff.memory, diff.get()), a->byte_size});
    return Status::Ok();
  }

 private:
  ModelConfig config_;
  ExecutionCost cost_;
};

class AddSubBackend final : public Backend {
 public:
  std::string_view name() const override { return "add_sub"; }
  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config, const LoadOptions&) override {
    const std::string prefix = "model '" + config.name() + "': add_sub ";
    if (config.input_size() != 2 || config.output_size() != 2) {
      return Status::InvalidArgument(prefix + "needs exactly 2 inputs and 2 outputs");
    }
    auto type = config.input(0).data_type();
    if (type != inference::TYPE_FP32 && type != inference::TYPE_INT32) {
      return Status::InvalidArgument(prefix + "supports TYPE_FP32 and TYPE_INT32 only");
    }
    for (const auto& tensor :
         {config.input(1).data_type(), config.output(0).data_type(), config.output(1).data_type()}) {
      if (tensor != type) return Status::InvalidArgument(prefix + "needs one data_type for all tensors");
    }
    ASSIGN_OR_RETURN(ExecutionCost cost, CostFromConfig(config));
    return std::unique_ptr<Model>(new AddSubModel(config, cost));
  }
};

}  // namespace

StatusOr<ExecutionCost> ParseExecutionCost(const std::string& text) {
  ExecutionCost cost;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument("expected key=value in '" + item + "'");
    std::string key = item.substr(0, eq);
    std::string value = item.substr(eq + 1);
    int64_t number = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (error != std::errc() || end != value.data() + value.size() || number < 0) {
      return Status::InvalidArgument("'" + value + "' is not a non-negative integer");
    }
    if (key == "fixed_us")
      cost.fixed_us = number;
    else if (key == "per_item_us")
      cost.per_item_us = number;
    else
      return Status::InvalidArgument("unknown key '" + key + "' (expected fixed_us, per_item_us)");
  }
  return cost;
}

void BurnExecutionCost(const ExecutionCost& cost, int64_t batch_size) {
  const int64_t total_us = cost.fixed_us + cost.per_item_us * batch_size;
  if (total_us <= 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(total_us);
  while (std::chrono::steady_clock::now() < until) {
    // Busy on purpose: the cost models compute, which holds a core, not a sleep.
  }
}

void RegisterBuiltinBackends(BackendRegistry* registry) {
  registry->Register(std::make_unique<IdentityBackend>());
  registry->Register(std::make_unique<AddSubBackend>());
  registry->Register(MakeClassifyBackend());
  registry->Register(MakeImagePreprocessBackend());
  registry->Register(MakeTabularBackend());
}

}  // namespace inferd
