#include "lifecycle/mirror.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lifecycle/traffic.h"

namespace inferd {

namespace {

bool IsFloating(DataType type) {
  return type == DataType::kFp16 || type == DataType::kBf16 || type == DataType::kFp32 || type == DataType::kFp64;
}

double FloatAt(const Tensor& tensor, size_t i) {
  switch (tensor.dtype) {
    case DataType::kFp16:
      return HalfToFloat(tensor.values<uint16_t>()[i]);
    case DataType::kBf16: {
      const uint32_t bits = static_cast<uint32_t>(tensor.values<uint16_t>()[i]) << 16;
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      return value;
    }
    case DataType::kFp32:
      return tensor.values<float>()[i];
    default:
      return tensor.values<double>()[i];
  }
}

bool CloseValues(const Tensor& baseline, const Tensor& candidate, double tolerance, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const double a = FloatAt(baseline, i), b = FloatAt(candidate, i);
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) return false;
      continue;
    }
    if (!(std::abs(a - b) <= tolerance * (1 + std::abs(a)))) return false;
  }
  return true;
}

size_t ArgmaxOfRow(const Tensor& tensor, size_t begin, size_t length) {
  size_t best = begin;
  for (size_t i = begin + 1; i < begin + length; ++i) {
    if (FloatAt(tensor, i) > FloatAt(tensor, best)) best = i;
  }
  return best - begin;
}

bool SameArgmax(const Tensor& baseline, const Tensor& candidate, size_t count) {
  const size_t row = baseline.shape.empty() ? count : static_cast<size_t>(baseline.shape.back());
  if (row == 0) return true;
  for (size_t begin = 0; begin < count; begin += row) {
    if (ArgmaxOfRow(baseline, begin, row) != ArgmaxOfRow(candidate, begin, row)) return false;
  }
  return true;
}

bool TensorsAgree(const AgreementGuard& guard, const Tensor& baseline, const Tensor& candidate) {
  if (baseline.dtype != candidate.dtype || baseline.shape != candidate.shape ||
      baseline.byte_size != candidate.byte_size) {
    return false;
  }
  if (!IsFloating(baseline.dtype)) return std::ranges::equal(baseline.bytes(), candidate.bytes());
  const size_t count = baseline.byte_size / DataTypeSize(baseline.dtype);
  return guard.compare == AgreementGuard::Compare::kArgmax ? SameArgmax(baseline, candidate, count)
                                                           : CloseValues(baseline, candidate, guard.tolerance, count);
}

}  // namespace

bool OutputsAgree(const AgreementGuard& guard, std::span<const Tensor> baseline, std::span<const Tensor> candidate) {
  if (baseline.size() != candidate.size()) return false;
  for (const Tensor& expected : baseline) {
    auto same_name = [&](const Tensor& t) { return t.name == expected.name; };
    auto found = std::ranges::find_if(candidate, same_name);
    if (found == candidate.end() || !TensorsAgree(guard, expected, *found)) return false;
  }
  return true;
}

TrafficMirror::TrafficMirror(int64_t baseline, int64_t candidate, AgreementGuard guard, Counters counters)
    : baseline_(baseline), candidate_(candidate), guard_(guard), counters_(std::move(counters)) {}

int64_t TrafficMirror::PeerOf(int64_t served) const {
  if (served == baseline_) return candidate_;
  if (served == candidate_) return baseline_;
  return 0;
}

void TrafficMirror::Count(std::atomic<uint64_t>& count, const std::shared_ptr<Counter>& metric) {
  count.fetch_add(1, std::memory_order_relaxed);
  if (metric != nullptr) metric->Increment();
}

bool TrafficMirror::TryBegin() {
  if (TrafficTicket({}) % 100 >= guard_.mirror_percent) return false;
  if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= kMaxInFlight) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    Count(skipped_, counters_.skipped);
    return false;
  }
  return true;
}

void TrafficMirror::Finish(const StatusOr<std::vector<Tensor>>& baseline,
                           const StatusOr<std::vector<Tensor>>& candidate) {
  if (!baseline.ok()) {
    Count(skipped_, counters_.skipped);  // nothing to compare with: not the candidate's doing
  } else if (candidate.ok() && OutputsAgree(guard_, *baseline, *candidate)) {
    Count(agreed_, counters_.agreed);
  } else {
    Count(disagreed_, counters_.disagreed);
  }
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

MirrorCounts TrafficMirror::Counts() const {
  const uint64_t agreed = agreed_.load(std::memory_order_relaxed);
  return {agreed + disagreed_.load(std::memory_order_relaxed), agreed, skipped_.load(std::memory_order_relaxed)};
}

void MirrorPair::Record(int64_t version, StatusOr<std::vector<Tensor>> outputs) {
  (version == mirror_->baseline() ? baseline_ : candidate_) = std::move(outputs);
  // The release publishes this side's answer; the acquire of the second side reads the first's.
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) mirror_->Finish(*baseline_, *candidate_);
}

}  // namespace inferd
