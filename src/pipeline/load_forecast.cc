#include "pipeline/load_forecast.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace inferd {

Status ValidateForecastOptions(const ForecastOptions& o) {
  auto in = [](double x, double lo, double hi, bool lo_open) { return (lo_open ? x > lo : x >= lo) && x <= hi; };
  if (!in(o.alpha, 0, 1, true)) return Status::InvalidArgument("forecast alpha must be in (0, 1]");
  if (!in(o.beta, 0, 1, false)) return Status::InvalidArgument("forecast beta must be in [0, 1]");
  if (!in(o.gamma, 0, 1, false)) return Status::InvalidArgument("forecast gamma must be in [0, 1]");
  if (!in(o.phi, 0, 1, true)) return Status::InvalidArgument("forecast phi must be in (0, 1]");
  if (o.period_s < 0 || o.period_s == 1 || o.period_s > 7 * 24 * 3600) {
    return Status::InvalidArgument("forecast period must be 0 (none) or 2 seconds to a week, not " +
                                   std::to_string(o.period_s));
  }
  return Status::Ok();
}

LoadForecaster::LoadForecaster(ForecastOptions options) : options_(options) {
  if (options_.period_s > 0) season_.assign(static_cast<size_t>(options_.period_s), 0.0);
}

double LoadForecaster::Season(int64_t seconds_after_last) const {
  if (season_.empty() || seen_ < options_.period_s) return 0;
  // The season of second t is stored at t mod m; the last second added is seen_ - 1.
  const int64_t m = options_.period_s;
  return season_[static_cast<size_t>((seen_ - 1 + seconds_after_last) % m)];
}

void LoadForecaster::AddSecond(double y) {
  y = std::max(0.0, y);
  const int64_t t = seen_++;
  if (t == 0) {
    level_ = y;
    trend_ = 0;
  } else {
    const int64_t m = options_.period_s;
    const bool seasonal = m > 0 && t >= m;  // the first period has been seen
    const size_t slot = m > 0 ? static_cast<size_t>(t % m) : 0;
    const double season = seasonal ? season_[slot] : 0;
    const double previous = level_;
    level_ = options_.alpha * (y - season) + (1 - options_.alpha) * (previous + options_.phi * trend_);
    trend_ = options_.beta * (level_ - previous) + (1 - options_.beta) * options_.phi * trend_;
    if (seasonal) season_[slot] = options_.gamma * (y - level_) + (1 - options_.gamma) * season;
  }
  if (options_.period_s > 0 && t < options_.period_s) {
    first_period_.push_back(y);
    if (t + 1 == options_.period_s) {
      // The first period is in: its mean is the level, each second's offset from it its season.
      const double mean = std::accumulate(first_period_.begin(), first_period_.end(), 0.0) / options_.period_s;
      for (int64_t s = 0; s < options_.period_s; ++s) season_[static_cast<size_t>(s)] = first_period_[static_cast<size_t>(s)] - mean;
      level_ = mean;
      trend_ = 0;
      first_period_.clear();
      first_period_.shrink_to_fit();
    }
  }
}

double LoadForecaster::Forecast(int64_t horizon_s) const {
  if (seen_ == 0) return 0;
  horizon_s = std::max<int64_t>(1, horizon_s);
  double damped = 0, power = 1;
  for (int64_t h = 0; h < horizon_s; ++h) damped += (power *= options_.phi);
  return std::max(0.0, level_ + damped * trend_ + Season(horizon_s));
}

void ForecastBoard::Tick(const std::map<std::string, uint64_t>& totals) {
  std::erase_if(streams_, [&](const auto& entry) { return !totals.contains(entry.first); });
  auto predicted = std::make_shared<std::map<std::string, double, std::less<>>>();
  for (const auto& [model, total] : totals) {
    auto [it, fresh] = streams_.try_emplace(model, Stream{LoadForecaster(options_), total});
    Stream& stream = it->second;
    const uint64_t count = fresh || total < stream.last_total ? 0 : total - stream.last_total;
    stream.last_total = total;
    if (!fresh) stream.forecaster.AddSecond(static_cast<double>(count));
    (*predicted)[model] = stream.forecaster.Forecast(horizon_s_);
  }
  predicted_.store(std::move(predicted));
}

std::optional<double> ForecastBoard::Predicted(std::string_view model) const {
  const auto snapshot = predicted_.load();
  auto it = snapshot->find(model);
  if (it == snapshot->end()) return std::nullopt;
  return it->second;
}

std::map<std::string, double, std::less<>> ForecastBoard::All() const { return *predicted_.load(); }

}  // namespace inferd
