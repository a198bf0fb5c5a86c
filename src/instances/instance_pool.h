// N instances of one model version: each is a thread that owns its own backend Model and pulls
// batches from the version's Scheduler until the scheduler shuts down and drains.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "config/model_config.h"  // InstanceCpuPolicy
#include "scheduler/scheduler.h"

namespace inferd {

struct ExecutionReport {
  int64_t batch_size = 0;
  bool ok = true;
  // Input shape sets the execution had to prepare first (Model::PreparedShapes): 0 once the
  // model's batch sizes were prepared at load (instances/planned_batches.h).
  int64_t prepared_shapes = 0;
};
using ExecutionObserver = std::function<void(const ExecutionReport&)>;

class InstancePool {
 public:
  InstancePool(std::string model_name, int64_t model_version, bool batching, Scheduler* scheduler,
               std::vector<std::unique_ptr<Model>> models, ExecutionObserver observer, const Clock* clock,
               InstanceCpuPolicy cpu_policy = {});
  ~InstancePool();  // joins; the scheduler must have been shut down first
  InstancePool(const InstancePool&) = delete;
  InstancePool& operator=(const InstancePool&) = delete;

  void Start();
  // Waits until every instance has finished the queued work and exited (after Scheduler::Shutdown).
  void Join();

 private:
  void RunInstance(Model* model, const CpuList& cpus);
  void PlaceThisInstance(const CpuList& cpus) const;
  void RunBatch(Model* model, std::vector<PendingRequest>& batch);

  const std::string model_name_;
  const int64_t model_version_;
  const bool batching_;
  Scheduler* scheduler_;
  std::vector<std::unique_ptr<Model>> models_;
  ExecutionObserver observer_;
  const Clock* clock_;
  const InstanceCpuPolicy cpu_policy_;
  std::vector<std::thread> threads_;
};

}  // namespace inferd
