// Request-rate forecasts for routers and autoscalers (issue 17): from per-second request counts,
// the rate `horizon` seconds ahead, by exponential smoothing, a small model whose state a person
// can read (a level, a trend, and with a period, one seasonal offset per second of the period).
//
//   Holt's linear trend (no period):
//     level_t = alpha * y_t + (1 - alpha) * (level_{t-1} + trend_{t-1})
//     trend_t = beta * (level_t - level_{t-1}) + (1 - beta) * trend_{t-1}
//     forecast(h) = level_t + h * trend_t
//   Holt-Winters, additive, with a period of m seconds:
//     level_t = alpha * (y_t - season_{t-m}) + (1 - alpha) * (level_{t-1} + trend_{t-1})
//     trend_t as above
//     season_t = gamma * (y_t - level_t) + (1 - gamma) * season_{t-m}
//     forecast(h) = level_t + h * trend_t + season_{t-m+1+((h-1) mod m)}
// Forecasts are never negative. Until the first period has been seen, Holt-Winters runs as Holt
// (seasons start at 0 and learn from the second period on, once the first period's mean is the
// level). The trend is damped by `phi` per step ahead (phi = 1: undamped), so a burst's slope does
// not run away over a 10 s horizon: forecast(h) = level + (phi + ... + phi^h) * trend.
//
// Not thread-safe: one owner feeds it once a second (RequestRateCounter does the counting).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inferd {

struct ForecastOptions {
  double alpha = 0.3;   // level smoothing, (0, 1]
  double beta = 0.1;    // trend smoothing, [0, 1]
  double gamma = 0.1;   // seasonal smoothing, [0, 1]; used with a period
  double phi = 0.98;    // trend damping per second ahead, (0, 1]
  int64_t period_s = 0; // 0: Holt; else Holt-Winters with this period (>= 2 seconds)
};

Status ValidateForecastOptions(const ForecastOptions& options);

class LoadForecaster {
 public:
  explicit LoadForecaster(ForecastOptions options);

  // One second's request count, in order, one call per second (a quiet second is a 0).
  void AddSecond(double count);
  // Requests per second `horizon_s` seconds after the last second added (>= 1); 0 before any.
  double Forecast(int64_t horizon_s) const;

  int64_t seconds_seen() const { return seen_; }
  double level() const { return level_; }
  double trend() const { return trend_; }

 private:
  double Season(int64_t seconds_after_last) const;

  const ForecastOptions options_;
  int64_t seen_ = 0;
  double level_ = 0;
  double trend_ = 0;
  std::vector<double> season_;       // by second of the period; empty without a period
  std::vector<double> first_period_; // counts of the first period, to start the level from
};

// Counts requests from any thread; the forecaster's owner takes one second's count at a time.
class RequestRateCounter {
 public:
  void Count() { count_.fetch_add(1, std::memory_order_relaxed); }
  // The count since the last call (or since the start), reset to 0.
  uint64_t TakeSecond() { return count_.exchange(0, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> count_{0};
};

// Forecasts of a server's models' request rates (what routers' predicted_rps(model M) and
// inferd_predicted_requests_per_second read): fed once a second by one owner from each model's
// requests so far, read from any thread (one atomic snapshot, no lock).
class ForecastBoard {
 public:
  ForecastBoard(ForecastOptions options, int64_t horizon_s) : options_(options), horizon_s_(horizon_s) {}

  // Once a second: each model's requests answered so far (summed over its versions). A model
  // missing from `totals` is forgotten; a total below the last one (a version left) restarts the
  // count from it.
  void Tick(const std::map<std::string, uint64_t>& totals);
  // The forecast horizon_s ahead; nullopt for a model not ticked yet.
  std::optional<double> Predicted(std::string_view model) const;
  std::map<std::string, double, std::less<>> All() const;
  int64_t horizon_s() const { return horizon_s_; }

 private:
  struct Stream {
    LoadForecaster forecaster;
    uint64_t last_total = 0;
  };
  const ForecastOptions options_;
  const int64_t horizon_s_;
  std::map<std::string, Stream> streams_;  // the ticking thread's
  std::atomic<std::shared_ptr<const std::map<std::string, double, std::less<>>>> predicted_{
      std::make_shared<const std::map<std::string, double, std::less<>>>()};
};

}  // namespace inferd
