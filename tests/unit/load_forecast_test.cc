// The load forecaster: Holt on steady and trending rates, Holt-Winters on a periodic one (and
// better than Holt there), never negative, damped trends, and the options it refuses.
#include "pipeline/load_forecast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace inferd {
namespace {

TEST(LoadForecastTest, AConstantRateForecastsItself) {
  LoadForecaster forecaster({});
  EXPECT_EQ(forecaster.Forecast(10), 0);  // nothing seen
  for (int t = 0; t < 60; ++t) forecaster.AddSecond(250);
  EXPECT_NEAR(forecaster.Forecast(10), 250, 1e-9);
  EXPECT_NEAR(forecaster.trend(), 0, 1e-9);
}

TEST(LoadForecastTest, HoltFollowsALinearTrend) {
  ForecastOptions options;
  options.phi = 1;  // undamped: a straight line is extrapolated as one
  LoadForecaster forecaster(options);
  for (int t = 0; t < 300; ++t) forecaster.AddSecond(10 + 2.0 * t);
  const double truth = 10 + 2.0 * (299 + 10);
  EXPECT_NEAR(forecaster.Forecast(10), truth, 0.01 * truth);
  EXPECT_NEAR(forecaster.trend(), 2, 0.05);
}

TEST(LoadForecastTest, DampingShortensTheTrendsReach) {
  ForecastOptions damped;
  damped.phi = 0.9;
  LoadForecaster forecaster(damped);
  for (int t = 0; t < 300; ++t) forecaster.AddSecond(10 + 2.0 * t);
  const double last = 10 + 2.0 * 299;
  // level + (0.9 + ... + 0.9^10) * trend: about 5.9 seconds of trend, not 10.
  EXPECT_GT(forecaster.Forecast(10), last);
  EXPECT_LT(forecaster.Forecast(10), last + 2.0 * 10);
}

double Wave(int t) { return 500 + 300 * std::sin(2 * std::numbers::pi * t / 60.0); }

TEST(LoadForecastTest, HoltWintersLearnsAPeriodAndBeatsHoltOnIt) {
  ForecastOptions seasonal;
  seasonal.period_s = 60;
  seasonal.gamma = 0.3;
  LoadForecaster winters(seasonal);
  LoadForecaster holt({});
  double winters_error = 0, holt_error = 0;
  for (int t = 0; t < 600; ++t) {
    if (t >= 300) {  // judge on the last five periods, 10 s ahead
      winters_error += std::abs(winters.Forecast(10) - Wave(t - 1 + 10)) / Wave(t - 1 + 10);
      holt_error += std::abs(holt.Forecast(10) - Wave(t - 1 + 10)) / Wave(t - 1 + 10);
    }
    winters.AddSecond(Wave(t));
    holt.AddSecond(Wave(t));
  }
  winters_error /= 300;
  holt_error /= 300;
  EXPECT_LT(winters_error, 0.05);  // 1 - MAPE > 95% on a clean wave
  EXPECT_LT(winters_error, holt_error / 3);
}

TEST(LoadForecastTest, AFallingRateNeverForecastsBelowZero) {
  ForecastOptions options;
  options.phi = 1;
  options.beta = 0.5;
  LoadForecaster forecaster(options), with_negative(options);
  for (int t = 0; t < 24; ++t) {
    forecaster.AddSecond(500 - 20 * t);  // 500 down to 40
    with_negative.AddSecond(500 - 20 * t);
  }
  EXPECT_LT(forecaster.trend(), -10);
  EXPECT_EQ(forecaster.Forecast(30), 0);  // the line crosses zero; the forecast stops there
  forecaster.AddSecond(0);
  with_negative.AddSecond(-5);  // a negative count is read as 0
  EXPECT_EQ(forecaster.level(), with_negative.level());
}

TEST(LoadForecastTest, OptionsOutOfRangeAreRefused) {
  EXPECT_TRUE(ValidateForecastOptions({}).ok());
  EXPECT_FALSE(ValidateForecastOptions({.alpha = 0}).ok());
  EXPECT_FALSE(ValidateForecastOptions({.beta = 1.5}).ok());
  EXPECT_FALSE(ValidateForecastOptions({.phi = 0}).ok());
  EXPECT_FALSE(ValidateForecastOptions({.period_s = 1}).ok());
  EXPECT_TRUE(ValidateForecastOptions({.period_s = 86400}).ok());
}

TEST(LoadForecastTest, TheCounterHandsOverOneSecondAtATime) {
  RequestRateCounter counter;
  for (int i = 0; i < 7; ++i) counter.Count();
  EXPECT_EQ(counter.TakeSecond(), 7u);
  EXPECT_EQ(counter.TakeSecond(), 0u);
}

TEST(ForecastBoardTest, CountsPerSecondFromTotalsAndForgetsWhatLeft) {
  ForecastBoard board(ForecastOptions{}, 10);
  EXPECT_FALSE(board.Predicted("m").has_value());
  board.Tick({{"m", 1000}});  // the first sight sets the baseline: nothing counted yet
  EXPECT_EQ(*board.Predicted("m"), 0);
  for (uint64_t second = 1; second <= 60; ++second) board.Tick({{"m", 1000 + 50 * second}});
  EXPECT_NEAR(*board.Predicted("m"), 50, 1);  // 50 a second, steady
  board.Tick({{"m", 10}});  // a version left: the total fell; counting restarts from it
  EXPECT_GE(*board.Predicted("m"), 0);
  board.Tick({});
  EXPECT_FALSE(board.Predicted("m").has_value());
}

}  // namespace
}  // namespace inferd
