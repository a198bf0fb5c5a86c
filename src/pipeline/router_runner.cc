#include "pipeline/router_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>


namespace inferd {
namespace {

constexpr size_t kLatencyWindowSeconds = 10;

std::optional<RouteValue> ParameterValue(const InferParameter& parameter) {
  return std::visit(
      [](const auto& value) -> std::optional<RouteValue> {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return RouteValue(value);
        } else if constexpr (std::is_same_v<T, bool>) {
          return RouteValue(value ? 1.0 : 0.0);
        } else {
          return RouteValue(static_cast<double>(value));
        }
      },
      parameter.value);
}

const Tensor* FindInput(const InferRequest& request, const std::string& name) {
  auto it = std::ranges::find_if(request.inputs, [&](const Tensor& t) { return t.name == name; });
  return it == request.inputs.end() ? nullptr : &*it;
}

// The values of one row of a float tensor as doubles, for the confidence measures.
template <typename T>
void RowConfidences(const Tensor& output, size_t rows, ConfidenceMeasure measure, double* lowest) {
  const std::span<const T> values = output.values<T>();
  const size_t per_row = values.size() / rows;
  for (size_t row = 0; row < rows; ++row) {
    const T* v = values.data() + row * per_row;
    double max = -INFINITY;
    for (size_t i = 0; i < per_row; ++i) max = std::max(max, static_cast<double>(v[i]));
    double sum = 0, top = 0, second = 0;
    for (size_t i = 0; i < per_row; ++i) {
      const double e = std::exp(static_cast<double>(v[i]) - max);
      sum += e;
      if (e > top) {
        second = top;
        top = e;
      } else if (e > second) {
        second = e;
      }
    }
    const double confidence = measure == ConfidenceMeasure::kMargin ? (top - second) / sum : top / sum;
    *lowest = std::min(*lowest, confidence);
  }
}

}  // namespace

StatusOr<double> AnswerConfidence(const Tensor& output, bool batched, ConfidenceMeasure measure) {
  const size_t rows = batched && !output.shape.empty() ? static_cast<size_t>(std::max<int64_t>(1, output.shape[0])) : 1;
  const size_t element = DataTypeSize(output.dtype);
  if (element == 0 || output.byte_size == 0 || (output.byte_size / element) % rows != 0) {
    return Status::Internal("output '" + output.name + "' holds no values to read a confidence from");
  }
  double lowest = 1;
  switch (output.dtype) {
    case DataType::kFp32: RowConfidences<float>(output, rows, measure, &lowest); break;
    case DataType::kFp64: RowConfidences<double>(output, rows, measure, &lowest); break;
    default:
      return Status::Internal("output '" + output.name + "' is " + std::string(DataTypeName(output.dtype)) +
                              ": a confidence is read from FP32 or FP64 scores");
  }
  return std::isfinite(lowest) ? lowest : 0.0;
}

double EntropyScore(const Tensor& tensor) {
  if (tensor.byte_size == 0) return 0;
  std::array<uint64_t, 256> counts{};
  for (uint8_t byte : tensor.bytes()) ++counts[byte];
  double entropy = 0;
  const double total = static_cast<double>(tensor.byte_size);
  for (uint64_t count : counts) {
    if (count == 0) continue;
    const double p = static_cast<double>(count) / total;
    entropy -= p * std::log2(p);
  }
  return std::clamp(entropy / 8.0, 0.0, 1.0);
}

// One request through the router. Holds the runner alive: a target may answer after a stop.
class RouterRun : public std::enable_shared_from_this<RouterRun>, public RouteFacts {
 public:
  RouterRun(std::shared_ptr<RouterRunner> runner, std::unique_ptr<InferRequest> request, InferCallback done)
      : runner_(std::move(runner)),
        plan_(*runner_->plan_),
        request_(std::move(request)),
        done_(std::move(done)),
        start_(runner_->services_.clock->Now()) {
    if (const uint64_t budget_us = RequestBudgetUs(*request_); budget_us > 0) deadline_ = start_ + Micros(budget_us);
  }

  void Start() {
    const ComplexityScore& score = plan_.complexity;
    switch (score.kind) {
      case ComplexityScore::Kind::kNone:
        break;
      case ComplexityScore::Kind::kEntropy:
        if (const Tensor* input = FindInput(*request_, score.input)) complexity_ = EntropyScore(*input);
        break;
      case ComplexityScore::Kind::kBytes:
        if (const Tensor* input = FindInput(*request_, score.input)) {
          complexity_ = std::min(1.0, static_cast<double>(input->byte_size) / score.max_bytes);
        }
        break;
      case ComplexityScore::Kind::kModel:
        return Score();
    }
    Route();
  }

  std::optional<RouteValue> Read(const RouteTerm& term) const override {
    switch (term.kind) {
      case RouteTermKind::kInputBytes: {
        if (!term.name.empty()) {
          const Tensor* input = FindInput(*request_, term.name);
          return input ? std::optional<RouteValue>(static_cast<double>(input->byte_size)) : std::nullopt;
        }
        size_t total = 0;
        for (const Tensor& input : request_->inputs) total += input.byte_size;
        return static_cast<double>(total);
      }
      case RouteTermKind::kDim: {
        const Tensor* input = FindInput(*request_, term.name);
        if (input == nullptr || term.index < 0 || term.index >= static_cast<int64_t>(input->shape.size())) return std::nullopt;
        return static_cast<double>(input->shape[static_cast<size_t>(term.index)]);
      }
      case RouteTermKind::kParam: {
        const InferParameter* parameter = FindParameter(request_->parameters, term.name);
        return parameter ? ParameterValue(*parameter) : std::nullopt;
      }
      case RouteTermKind::kComplexity:
        return complexity_ ? std::optional<RouteValue>(*complexity_) : std::nullopt;
      case RouteTermKind::kQueueDepth:
      case RouteTermKind::kP99Ms:
      case RouteTermKind::kPredictedRps:
        return TargetFact(term);
    }
    return std::nullopt;
  }

 private:
  std::optional<RouteValue> TargetFact(const RouteTerm& term) const {
    const RouteTarget& target = term.target;
    const std::optional<size_t> index = runner_->TargetIndex(target);
    const RouterServices& services = runner_->services_;
    if (term.kind == RouteTermKind::kP99Ms) {
      if (!index) return std::nullopt;
      return runner_->stats_[*index]->recent_p99_ms.load(std::memory_order_relaxed);
    }
    const bool pool = target.kind == RouteTarget::Kind::kPool;
    if (term.kind == RouteTermKind::kQueueDepth) {
      if (pool) {
        if (!index) return std::nullopt;
        return static_cast<double>(runner_->stats_[*index]->in_flight.load(std::memory_order_relaxed));
      }
      if (!services.queue_depth) return std::nullopt;
      auto depth = services.queue_depth(target.name, target.version);
      return depth ? std::optional<RouteValue>(*depth) : std::nullopt;
    }
    if (pool) {
      if (!index) return std::nullopt;
      return runner_->stats_[*index]->predicted_rps.load(std::memory_order_relaxed);
    }
    if (!services.predicted_rps) return std::nullopt;
    auto predicted = services.predicted_rps(target.name);
    return predicted ? std::optional<RouteValue>(*predicted) : std::nullopt;
  }

  // Microseconds left before the deadline (at least 1), 0 without one; nullopt once it passed.
  std::optional<uint64_t> TimeLeftUs() const {
    if (!deadline_) return 0;
    const TimePoint now = runner_->services_.clock->Now();
    if (now >= *deadline_) return std::nullopt;
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::chrono::duration_cast<Micros>(*deadline_ - now).count()));
  }

  std::string Label() const { return "router '" + plan_.name + "'"; }

  // The scoring model's answer gives the complexity; then the rules.
  void Score() {
    const ComplexityScore& score = plan_.complexity;
    auto request = std::make_unique<InferRequest>();
    request->model_name = score.scorer.name;
    request->model_version = score.scorer.version;
    request->id = request_->id;
    request->priority = request_->priority;
    for (const std::string& name : score.scorer_inputs) {
      if (const Tensor* input = FindInput(*request_, name)) request->inputs.push_back(*input);
    }
    request->requested_outputs.push_back(score.output);
    const std::optional<uint64_t> left = TimeLeftUs();
    if (!left) return Finish(Status::DeadlineExceeded(Label() + ": the request's deadline passed before scoring"));
    request->client_timeout_us = *left;
    runner_->services_.dispatch(std::move(request), [self = shared_from_this()](StatusOr<InferResponse> result) {
      self->Scored(std::move(result));
    });
  }

  void Scored(StatusOr<InferResponse> result) {
    const ComplexityScore& score = plan_.complexity;
    if (!result.ok()) {
      return Finish(Status(result.status().code(),
                           Label() + " complexity model '" + score.scorer.name + "': " + result.status().message()));
    }
    auto it = std::ranges::find_if(result->outputs, [&](const Tensor& t) { return t.name == score.output; });
    if (it == result->outputs.end() || it->byte_size == 0 ||
        (it->dtype != DataType::kFp32 && it->dtype != DataType::kFp64)) {
      return Finish(Status::Internal(Label() + " complexity model '" + score.scorer.name + "': output '" +
                                     score.output + "' is missing or not FP32/FP64"));
    }
    const double value = it->dtype == DataType::kFp32 ? it->values<float>()[0] : it->values<double>()[0];
    complexity_ = std::isfinite(value) ? std::clamp(value, 0.0, 1.0) : 0.0;
    Route();
  }

  void Route() {
    for (size_t i = 0; i < plan_.rules.size(); ++i) {
      if (!RuleMatches(plan_.rules[i], *this)) continue;
      runner_->rule_matches_[i]->Increment();
      if (!runner_->rule_targets_[i]) return SendTier(0);
      return Send(*runner_->rule_targets_[i]);
    }
    // The default has no condition, so a rule always matches.
  }

  void SendTier(size_t tier) {
    tier_ = tier;
    Send(runner_->tier_targets_[tier]);
  }

  // Sends the request to target `index`, or to its breaker's fallback while the breaker is open.
  void Send(size_t index) {
    if (CircuitBreaker* breaker = runner_->breakers_[index].get(); breaker != nullptr && !breaker->Allow()) {
      const std::string& fallback = breaker->policy().fallback;
      const std::string open = Label() + ": the circuit breaker of '" + DescribeTarget(runner_->targets_[index]) + "' is open";
      if (fallback.empty()) return Finish(Status::Unavailable(open));
      auto fallback_index = runner_->TargetIndex({RouteTarget::Kind::kModel, fallback, 0});
      if (!fallback_index) return Finish(Status::Internal(open + " and its fallback '" + fallback + "' is unknown"));
      return Dispatch(*fallback_index, /*counts_for_breaker=*/false);
    }
    Dispatch(index, runner_->breakers_[index] != nullptr);
  }

  std::unique_ptr<InferRequest> TargetRequest(const RouteTarget& target, const PoolSpec* pool) const {
    auto request = std::make_unique<InferRequest>();
    request->model_name = pool ? pool->model : target.name;
    request->model_version = pool ? pool->model_version : target.version;
    request->id = request_->id;
    request->inputs = request_->inputs;  // the tensors' buffers are shared, not copied
    request->requested_outputs = request_->requested_outputs;
    if (plan_.cascade && !request->requested_outputs.empty() &&
        std::ranges::find(request->requested_outputs, plan_.cascade->output) == request->requested_outputs.end()) {
      request->requested_outputs.push_back(plan_.cascade->output);
    }
    request->priority = request_->priority;
    request->parameters = request_->parameters;
    return request;
  }

  void Dispatch(size_t index, bool counts_for_breaker) {
    const RouteTarget& target = runner_->targets_[index];
    const std::shared_ptr<RemotePool>& pool = runner_->pools_[index];
    const PoolSpec* spec = pool ? plan_.FindPool(target.name) : nullptr;
    std::unique_ptr<InferRequest> request = TargetRequest(target, spec);
    const std::optional<uint64_t> left = TimeLeftUs();
    if (!left) {
      if (counts_for_breaker) runner_->breakers_[index]->Record(Status::Cancelled("not sent"));
      return Finish(Status::DeadlineExceeded(Label() + ": the request's deadline passed before '" + DescribeTarget(target) +
                                             "' could take it"));
    }
    uint64_t limit_us = *left;
    if (spec != nullptr && spec->timeout_us > 0) limit_us = limit_us == 0 ? spec->timeout_us : std::min(limit_us, spec->timeout_us);
    request->client_timeout_us = limit_us;
    RouterTargetStats& stats = *runner_->stats_[index];
    stats.requests.fetch_add(1, std::memory_order_relaxed);
    stats.in_flight.fetch_add(1, std::memory_order_relaxed);
    runner_->target_requests_[index]->Increment();
    const TimePoint sent = runner_->services_.clock->Now();
    InferCallback answered = [self = shared_from_this(), index, sent, counts_for_breaker](StatusOr<InferResponse> result) {
      self->Answered(index, sent, counts_for_breaker, std::move(result));
    };
    if (pool) {
      pool->Infer(std::move(request), std::move(answered));
    } else {
      runner_->services_.dispatch(std::move(request), std::move(answered));
    }
  }

  void Answered(size_t index, TimePoint sent, bool counts_for_breaker, StatusOr<InferResponse> result) {
    const int64_t took_ns = NanosBetween(sent, runner_->services_.clock->Now());
    RouterTargetStats& stats = *runner_->stats_[index];
    stats.in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (counts_for_breaker) runner_->breakers_[index]->Record(result.status());
    const std::string where = Label() + " target '" + DescribeTarget(runner_->targets_[index]) + "'";
    if (!result.ok()) {
      stats.errors.fetch_add(1, std::memory_order_relaxed);
      runner_->target_errors_[index]->Increment();
      return Finish(Status(result.status().code(), where + ": " + result.status().message()));
    }
    stats.latency.Observe(took_ns);
    runner_->target_durations_[index]->Observe(NanosToSeconds(took_ns));
    queue_ns_ += result->queue_ns;
    compute_ns_ += result->compute_ns;
    if (tier_ && *tier_ + 1 < plan_.cascade->tiers.size()) {
      auto output = std::ranges::find_if(result->outputs, [&](const Tensor& t) { return t.name == plan_.cascade->output; });
      if (output == result->outputs.end()) {
        return Finish(Status::Internal(where + ": the answer has no output '" + plan_.cascade->output + "'"));
      }
      auto confidence = AnswerConfidence(*output, plan_.batched, plan_.cascade->measure);
      if (!confidence.ok()) return Finish(confidence.status().WithPrefix(where));
      if (*confidence < plan_.cascade->thresholds[*tier_]) return SendTier(*tier_ + 1);
    }
    InferResponse response = std::move(result).value();
    KeepAskedOutputs(&response);
    SetParameter(response.parameters, "routed_to", DescribeTarget(runner_->targets_[index]));
    if (tier_) SetParameter(response.parameters, "tier", static_cast<int64_t>(*tier_ + 1));
    Finish(std::move(response));
  }

  // The client's requested outputs, or without any, the router's own.
  void KeepAskedOutputs(InferResponse* response) const {
    const std::vector<std::string>& asked = request_->requested_outputs.empty() ? plan_.outputs : request_->requested_outputs;
    std::erase_if(response->outputs, [&](const Tensor& t) { return std::ranges::find(asked, t.name) == asked.end(); });
  }

  void Finish(StatusOr<InferResponse> result) {
    if (result.ok()) {
      result->model_name = request_->model_name;
      result->model_version = runner_->version_;
      result->id = request_->id;
      result->queue_ns = queue_ns_;
      result->compute_ns = compute_ns_;
    }
    InferCallback done = std::move(done_);
    std::shared_ptr<RouterRunner> runner = runner_;
    done(std::move(result));
    runner->RunAnswered();
  }

  const std::shared_ptr<RouterRunner> runner_;
  const RouterPlan& plan_;
  const std::unique_ptr<InferRequest> request_;
  InferCallback done_;
  const TimePoint start_;
  std::optional<TimePoint> deadline_;
  std::optional<double> complexity_;
  std::optional<size_t> tier_;  // in a cascade: the tier running now
  int64_t queue_ns_ = 0, compute_ns_ = 0;
};

RouterRunner::RouterRunner(std::shared_ptr<const RouterPlan> plan, int64_t version, RouterServices services)
    : plan_(std::move(plan)), version_(version), services_(std::move(services)) {}

StatusOr<std::shared_ptr<RouterRunner>> RouterRunner::Create(std::shared_ptr<const RouterPlan> plan, int64_t version,
                                                             RouterServices services) {
  std::shared_ptr<RouterRunner> runner(new RouterRunner(std::move(plan), version, std::move(services)));
  const RouterPlan& p = *runner->plan_;
  runner->targets_ = p.ServingTargets();
  for (const RouteRule& rule : p.rules) {
    for (const RouteTarget& read : TargetsRead(rule)) {
      if (std::ranges::find(runner->targets_, read) == runner->targets_.end()) runner->targets_.push_back(read);
    }
  }
  const size_t count = runner->targets_.size();
  for (size_t i = 0; i < count; ++i) {
    const RouteTarget& target = runner->targets_[i];
    runner->stats_.push_back(std::make_unique<RouterTargetStats>());
    auto policy = p.breakers.find(target.name);  // a pool's or a local model's breaker
    runner->breakers_.push_back(policy == p.breakers.end()
                                    ? nullptr
                                    : std::make_shared<CircuitBreaker>(policy->second, runner->services_.clock));
    std::shared_ptr<RemotePool> pool;
    if (target.kind == RouteTarget::Kind::kPool) {
      if (!runner->services_.make_pool) {
        return Status::FailedPrecondition("router '" + p.name + "': this server cannot reach remote pools");
      }
      ASSIGN_OR_RETURN(pool, runner->services_.make_pool(*p.FindPool(target.name)));
    }
    runner->pools_.push_back(std::move(pool));
    runner->forecasters_.emplace_back(runner->services_.forecast);
  }
  runner->counted_at_last_tick_.assign(count, 0);
  runner->latency_ring_.assign(count * kLatencyWindowSeconds, LatencyHistogram::Counts{});
  for (const RouteRule& rule : p.rules) {
    runner->rule_targets_.push_back(rule.target.kind == RouteTarget::Kind::kCascade
                                        ? std::nullopt
                                        : runner->TargetIndex(rule.target));
  }
  if (p.cascade) {
    for (const RouteTarget& tier : p.cascade->tiers) runner->tier_targets_.push_back(*runner->TargetIndex(tier));
  }
  runner->RegisterMetrics();
  return runner;
}

void RouterRunner::RegisterMetrics() {
  MetricsRegistry* metrics = services_.metrics;
  // Under the version's labels: the ModelManager removes them when the version leaves service.
  const MetricLabels base = ModelLabels(plan_->name, version_);
  auto labelled = [&](const char* key, const std::string& value) {
    MetricLabels labels = base;
    labels.emplace_back(key, value);
    return labels;
  };
  for (const RouteRule& rule : plan_->rules) {
    rule_matches_.push_back(metrics ? metrics->AddCounter("inferd_router_rule_matches_total", labelled("rule", rule.name))
                                    : std::make_shared<Counter>());
  }
  for (size_t i = 0; i < targets_.size(); ++i) {
    const MetricLabels labels = labelled("target", DescribeTarget(targets_[i]));
    target_requests_.push_back(metrics ? metrics->AddCounter("inferd_router_target_requests_total", labels)
                                       : std::make_shared<Counter>());
    target_errors_.push_back(metrics ? metrics->AddCounter("inferd_router_target_errors_total", labels)
                                     : std::make_shared<Counter>());
    target_durations_.push_back(metrics ? metrics->AddHistogram("inferd_router_target_duration_seconds", labels, DurationBuckets())
                                        : std::make_shared<Histogram>(DurationBuckets()));
    if (metrics == nullptr) continue;
    std::weak_ptr<RouterRunner> weak = weak_from_this();
    if (breakers_[i]) {
      metrics->AddScrapedValue("inferd_circuit_breaker_state", labels, [weak, i] {
        auto self = weak.lock();
        return self ? static_cast<double>(self->breakers_[i]->state()) : 0.0;
      });
    }
    if (pools_[i]) {
      MetricLabels forecast = labelled("pool", targets_[i].name);
      forecast.emplace_back("horizon", std::to_string(services_.forecast_horizon_s));
      metrics->AddScrapedValue("inferd_predicted_requests_per_second", forecast, [weak, i] {
        auto self = weak.lock();
        return self ? self->stats_[i]->predicted_rps.load(std::memory_order_relaxed) : 0.0;
      });
    }
  }
}

std::optional<size_t> RouterRunner::TargetIndex(const RouteTarget& target) const {
  for (size_t i = 0; i < targets_.size(); ++i) {
    if (targets_[i] == target) return i;
  }
  // A fallback or a read target named without its version matches the target by name.
  for (size_t i = 0; i < targets_.size(); ++i) {
    if (targets_[i].kind == target.kind && targets_[i].name == target.name) return i;
  }
  return std::nullopt;
}

std::string RouterRunner::ChannelState(size_t target) const {
  return pools_[target] ? pools_[target]->ChannelState() : "";
}

Status RouterRunner::Run(std::unique_ptr<InferRequest>& request, InferCallback& done) {
  if (!gate_.TryEnter()) return Status::Unavailable("router '" + plan_->name + "' is stopping");
  auto run = std::make_shared<RouterRun>(shared_from_this(), std::move(request), std::move(done));
  run->Start();
  return Status::Ok();
}

void RouterRunner::Tick() {
  const size_t slot = ticks_ % kLatencyWindowSeconds;
  for (size_t i = 0; i < targets_.size(); ++i) {
    RouterTargetStats& stats = *stats_[i];
    const LatencyHistogram::Counts now = stats.latency.Snapshot();
    // The ring's slot for this second holds the snapshot of kLatencyWindowSeconds ago.
    const LatencyHistogram::Counts window = LatencyHistogram::Between(latency_ring_[i * kLatencyWindowSeconds + slot], now);
    latency_ring_[i * kLatencyWindowSeconds + slot] = now;
    stats.recent_p99_ms.store(LatencyHistogram::Quantile(window, 0.99) * 1e3, std::memory_order_relaxed);
    if (!pools_[i]) continue;
    const uint64_t requests = stats.requests.load(std::memory_order_relaxed);
    forecasters_[i].AddSecond(static_cast<double>(requests - counted_at_last_tick_[i]));
    counted_at_last_tick_[i] = requests;
    stats.predicted_rps.store(forecasters_[i].Forecast(services_.forecast_horizon_s), std::memory_order_relaxed);
  }
  ++ticks_;
}

}  // namespace inferd
