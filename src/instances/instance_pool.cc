#include "instances/instance_pool.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "common/cpu_weight_groups.h"
#include "instances/batch_io.h"

namespace inferd {
namespace {

std::vector<Tensor> SelectOutputs(std::vector<Tensor> outputs, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return outputs;
  std::vector<Tensor> selected;
  for (auto& tensor : outputs) {
    if (std::find(wanted.begin(), wanted.end(), tensor.name) != wanted.end()) {
      selected.push_back(std::move(tensor));
    }
  }
  return selected;
}

}  // namespace

InstancePool::InstancePool(std::string model_name, int64_t model_version, bool batching, Scheduler* scheduler,
                           std::vector<std::unique_ptr<Model>> models, ExecutionObserver observer,
                           const Clock* clock, InstanceCpuPolicy cpu_policy)
    : model_name_(std::move(model_name)),
      model_version_(model_version),
      batching_(batching),
      scheduler_(scheduler),
      models_(std::move(models)),
      observer_(std::move(observer)),
      clock_(clock),
      cpu_policy_(std::move(cpu_policy)) {}

InstancePool::~InstancePool() { Join(); }

void InstancePool::Start() {
  static const CpuList kAnywhere;
  if (!cpu_policy_.cpus.empty()) {
    std::string where;
    for (const CpuList& cpus : cpu_policy_.cpus) where += (where.empty() ? "" : ", ") + FormatCpuList(cpus);
    spdlog::info("model '{}' v{}: instances on CPUs {}", model_name_, model_version_, where);
  }
  if (cpu_policy_.cpu_weight) {
    const CpuWeightGroups& groups = ProcessCpuWeightGroups();
    if (groups.available()) {
      spdlog::info("model '{}' v{}: instance threads in a cgroup of cpu_weight {}", model_name_, model_version_,
                   *cpu_policy_.cpu_weight);
    } else {
      spdlog::warn("model '{}' v{}: cpu_weight {} applied as nice {}: {}", model_name_, model_version_,
                   *cpu_policy_.cpu_weight, NiceForCpuWeight(*cpu_policy_.cpu_weight), groups.Describe());
    }
  }
  for (size_t i = 0; i < models_.size(); ++i) {
    const CpuList& cpus = i < cpu_policy_.cpus.size() ? cpu_policy_.cpus[i] : kAnywhere;
    threads_.emplace_back([this, m = models_[i].get(), &cpus] { RunInstance(m, cpus); });
  }
}

void InstancePool::Join() {
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  const bool had_threads = !threads_.empty();
  threads_.clear();
  if (had_threads && cpu_policy_.cpu_weight) ProcessCpuWeightGroups().Release(model_name_);
}

void InstancePool::RunInstance(Model* model, const CpuList& cpus) {
  // "i:" + the model's name, as top -H and /proc/PID/task/TID/comm show it (15 bytes at most).
  pthread_setname_np(pthread_self(), ("i:" + model_name_).substr(0, 15).c_str());
  PlaceThisInstance(cpus);
  while (true) {
    std::vector<PendingRequest> batch = scheduler_->NextBatch();
    if (batch.empty()) return;
    RunBatch(model, batch);
  }
}

// Before the first execution: the OpenMP team this thread starts then inherits the mask, the nice
// value and the cgroup.
void InstancePool::PlaceThisInstance(const CpuList& cpus) const {
  if (!cpus.empty()) {
    if (Status pinned = PinCurrentThread(cpus); !pinned.ok()) {
      spdlog::error("model '{}' v{}: an instance runs unplaced: {}", model_name_, model_version_, pinned.message());
    }
  }
  std::optional<int> nice = cpu_policy_.nice;
  if (cpu_policy_.cpu_weight) {
    CpuWeightGroups& groups = ProcessCpuWeightGroups();
    if (groups.available()) {
      Status joined = groups.JoinCurrentThread(model_name_, *cpu_policy_.cpu_weight);
      if (joined.ok()) return;
      spdlog::error("model '{}' v{}: an instance runs outside its cgroup, at a nice value for its weight: {}",
                    model_name_, model_version_, joined.message());
    }
    nice = NiceForCpuWeight(*cpu_policy_.cpu_weight);
  }
  if (nice) {
    if (Status niced = SetCurrentThreadNice(*nice); !niced.ok()) {
      spdlog::error("model '{}' v{}: an instance runs at the process's priority: {}", model_name_, model_version_,
                    niced.message());
    }
  }
}

void InstancePool::RunBatch(Model* model, std::vector<PendingRequest>& batch) {
  RequestTimings timings;
  timings.exec_start = clock_->Now();
  std::vector<int64_t> batch_sizes;
  batch_sizes.reserve(batch.size());
  for (const auto& item : batch) batch_sizes.push_back(item.batch_size);

  Status status;
  int64_t prepared_shapes = 0;
  std::vector<std::vector<Tensor>> per_request;
  RowFailures row_failures;
  auto execution = AssembleInputs(batch, batching_);
  timings.input_done = clock_->Now();
  timings.execution_batch_size = execution.ok() ? execution->batch_size : 0;
  if (!execution.ok()) {
    status = execution.status();
  } else {
    std::vector<Tensor> outputs;
    execution->row_failures = &row_failures;
    const int64_t shapes_before = model->PreparedShapes();
    try {  // a backend's exception stops here, at the module boundary
      status = model->Execute(*execution, &outputs);
    } catch (const std::exception& e) {
      status = Status::Internal(std::string("backend threw: ") + e.what());
    }
    prepared_shapes = model->PreparedShapes() - shapes_before;
    timings.infer_done = clock_->Now();
    if (status.ok()) {
      auto split = SplitOutputs(std::move(outputs), batch_sizes, batching_);
      if (split.ok())
        per_request = std::move(split).value();
      else
        status = split.status();
    }
  }
  if (timings.infer_done == TimePoint{}) timings.infer_done = timings.input_done;
  timings.output_done = clock_->Now();
  if (status.ok()) scheduler_->RecordExecution(timings.execution_batch_size, timings.output_done - timings.exec_start);
  observer_({.batch_size = timings.execution_batch_size, .ok = status.ok(), .prepared_shapes = prepared_shapes});
  spdlog::debug("model '{}' v{}: executed {} request(s), batch {}, {} us: {}", model_name_, model_version_,
                batch.size(), timings.execution_batch_size,
                NanosBetween(timings.exec_start, timings.output_done) / 1000,
                status.ok() ? "ok" : status.message());

  int64_t first_row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    PendingRequest& item = batch[i];
    RequestTimings mine = timings;
    mine.enqueued = item.enqueued;
    // Move the callback out so whatever it holds (a connection, say) is released as soon as it
    // has run, not when the batch is destroyed.
    CompletionFn done = std::move(item.done);
    // Without batching the execution is this one request, whatever its dim 0.
    const int64_t rows = batching_ ? item.batch_size : INT64_MAX / 2;
    const Status* row_failure = row_failures.empty() ? nullptr : row_failures.Find(first_row, rows);
    first_row += item.batch_size;
    if (!status.ok() || row_failure != nullptr) {
      done(status.ok() ? *row_failure : status, mine);
      continue;
    }
    InferResponse response{model_name_, model_version_, item.request->id,
                           SelectOutputs(std::move(per_request[i]), item.request->requested_outputs)};
    done(std::move(response), mine);
  }
}

}  // namespace inferd
