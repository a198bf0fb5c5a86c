#include "pipeline/ensemble_run.h"

#include <algorithm>
#include <map>
#include <vector>

#include "common/mutex.h"

namespace inferd {

namespace {

class EnsembleRun : public std::enable_shared_from_this<EnsembleRun> {
 public:
  EnsembleRun(std::shared_ptr<const EnsemblePlan> plan, int64_t version, std::unique_ptr<InferRequest> request,
              StepDispatch dispatch, const Clock* clock, InferCallback done)
      : plan_(std::move(plan)),
        version_(version),
        request_(std::move(request)),
        dispatch_(std::move(dispatch)),
        clock_(clock),
        done_(std::move(done)),
        start_(clock_->Now()) {}

  void Start() {
    std::vector<size_t> ready;
    {
      MutexLock lock(&mu_);
      for (const Tensor& input : request_->inputs) tensors_.emplace(input.name, input);
      for (size_t i = 0; i < plan_->steps.size(); ++i) {
        waiting_.push_back(plan_->steps[i].producers);
        if (waiting_[i] == 0) ready.push_back(i);
      }
    }
    Launch(ready);
  }

 private:
  // The step's request: its inputs are the ensemble tensors it maps, renamed, sharing their buffers.
  // Null once the run failed (a step may answer inside dispatch, before the next one launches).
  std::unique_ptr<InferRequest> StepRequest(size_t index) {
    const EnsembleStep& step = plan_->steps[index];
    auto request = std::make_unique<InferRequest>();
    request->model_name = step.model_name;
    request->model_version = step.model_version;
    request->id = request_->id;
    request->priority = request_->priority;
    MutexLock lock(&mu_);
    if (failed_) return nullptr;
    for (const auto& [member_input, tensor] : step.inputs) {
      Tensor input = tensors_.at(tensor);
      input.name = member_input;
      request->inputs.push_back(std::move(input));
    }
    for (const auto& [member_output, tensor] : step.outputs) request->requested_outputs.push_back(member_output);
    return request;
  }

  void Launch(const std::vector<size_t>& steps) {
    for (size_t index : steps) {
      auto request = StepRequest(index);
      if (request == nullptr) return;
      if (request_->client_timeout_us > 0) {
        const auto deadline = start_ + Micros(request_->client_timeout_us);
        const auto now = clock_->Now();
        if (now >= deadline) {
          Fail(Status::DeadlineExceeded(StepLabel(*plan_, index) + ": the request's deadline passed before the step could start"));
          return;
        }
        request->client_timeout_us =
            static_cast<uint64_t>(std::chrono::duration_cast<Micros>(deadline - now).count());
      }
      dispatch_(std::move(request), [self = shared_from_this(), index](StatusOr<InferResponse> result) {
        self->Answered(index, std::move(result));
      });
    }
  }

  void Answered(size_t index, StatusOr<InferResponse> result) {
    if (!result.ok()) {
      return Fail(Status(result.status().code(), StepLabel(*plan_, index) + ": " + result.status().message()));
    }
    std::vector<size_t> ready;
    bool finished = false;
    {
      MutexLock lock(&mu_);
      if (failed_) return;
      const EnsembleStep& step = plan_->steps[index];
      for (const auto& wiring : step.outputs) {
        const std::string& member_output = wiring.first;  // named: clang 14 captures no structured binding
        auto it = std::ranges::find_if(result->outputs, [&](const Tensor& t) { return t.name == member_output; });
        if (it == result->outputs.end()) {
          lock.Unlock();
          return Fail(Status::Internal(StepLabel(*plan_, index) + ": the model's answer has no output '" + member_output + "'"));
        }
        tensors_[wiring.second] = std::move(*it);
      }
      for (size_t consumer : step.consumers) {
        if (--waiting_[consumer] == 0) ready.push_back(consumer);
      }
      finished = ++answered_ == plan_->steps.size();
    }
    if (finished) return Finish();
    Launch(ready);
  }

  void Fail(Status status) {
    {
      MutexLock lock(&mu_);
      if (failed_) return;
      failed_ = true;
    }
    done_(std::move(status));
  }

  void Finish() {
    InferResponse response;
    response.model_name = request_->model_name;
    response.model_version = version_;
    response.id = request_->id;
    const std::vector<std::string>& wanted =
        request_->requested_outputs.empty() ? plan_->outputs : request_->requested_outputs;
    {
      MutexLock lock(&mu_);
      for (const std::string& name : wanted) {
        auto it = tensors_.find(name);
        if (it == tensors_.end()) continue;  // validation let only the ensemble's outputs through
        Tensor output = it->second;
        output.name = name;
        response.outputs.push_back(std::move(output));
      }
    }
    done_(std::move(response));
  }

  const std::shared_ptr<const EnsemblePlan> plan_;
  const int64_t version_;
  const std::unique_ptr<InferRequest> request_;
  const StepDispatch dispatch_;
  const Clock* const clock_;
  const InferCallback done_;
  const TimePoint start_;

  Mutex mu_;
  std::map<std::string, Tensor, std::less<>> tensors_ GUARDED_BY(mu_);
  std::vector<size_t> waiting_ GUARDED_BY(mu_);  // per step: producers not answered yet
  size_t answered_ GUARDED_BY(mu_) = 0;
  bool failed_ GUARDED_BY(mu_) = false;
};

}  // namespace

void RunEnsemble(std::shared_ptr<const EnsemblePlan> plan, int64_t ensemble_version,
                 std::unique_ptr<InferRequest> request, StepDispatch dispatch, const Clock* clock, InferCallback done) {
  auto run = std::make_shared<EnsembleRun>(std::move(plan), ensemble_version, std::move(request), std::move(dispatch),
                                           clock, std::move(done));
  run->Start();
}

}  // namespace inferd
