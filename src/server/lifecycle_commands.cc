#include "server/lifecycle_commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>
#include <thread>

#include "config/model_config.h"

namespace inferd {
namespace {

void PrintTraffic(const std::string& model, const client::TrafficInfo& info) {
  std::string split, labels;
  for (const auto& [version, weight] : info.split) split += (split.empty() ? "" : ",") + std::to_string(version) + ":" + std::to_string(weight);
  for (const auto& [label, version] : info.labels) labels += (labels.empty() ? "" : ",") + label + "=" + std::to_string(version);
  std::printf("model %s\nsplit  %s\nlabels %s\n", model.c_str(), split.empty() ? "none (the newest version takes all)" : split.c_str(),
              labels.empty() ? "none" : labels.c_str());
}

void PrintRollout(const std::string& model, const client::RolloutInfo& info) {
  std::printf("model %s: version %lld against baseline %lld, %s, step %u of %zu (%u%%), %.1f s of %.1f s\n", model.c_str(),
              static_cast<long long>(info.plan.version), static_cast<long long>(info.plan.baseline), info.state.c_str(),
              info.step, info.plan.steps.size(), info.percent, info.in_step_seconds,
              static_cast<double>(info.plan.dwell.count()) / 1e3);
  std::printf("  this step: %llu requests, %llu errors, p99 %.3f ms; baseline %llu requests, p99 %.3f ms\n",
              static_cast<unsigned long long>(info.requests), static_cast<unsigned long long>(info.errors), info.p99_ms,
              static_cast<unsigned long long>(info.baseline_requests), info.baseline_p99_ms);
  if (info.plan.agreement) {
    std::printf("  mirrored %u%%: %llu compared, %llu agreed (at least %.3f wanted), %llu skipped\n",
                info.plan.agreement->mirror_percent, static_cast<unsigned long long>(info.mirrored.compared),
                static_cast<unsigned long long>(info.mirrored.agreed), info.plan.agreement->min_agreement,
                static_cast<unsigned long long>(info.mirrored.skipped));
  }
  if (!info.reason.empty()) std::printf("  rolled back: %s\n", info.reason.c_str());
  if (info.state == "completed") {
    if (info.baseline_retired) {
      std::printf("  baseline version %lld unloaded after its retention\n", static_cast<long long>(info.plan.baseline));
    } else {
      std::printf("  baseline version %lld stays loaded %lld s more for a rollback\n",
                  static_cast<long long>(info.plan.baseline), static_cast<long long>(info.retire_in_seconds));
    }
  }
}

StatusOr<std::vector<uint32_t>> ParseSteps(const std::string& text) {
  std::vector<uint32_t> steps;
  std::istringstream list(text);
  for (std::string step; std::getline(list, step, ',');) {
    if (step.empty() || step.size() > 3 || step.find_first_not_of("0123456789") != std::string::npos) {
      return Status::InvalidArgument("--steps '" + text + "' is not a list of percents like 5,20,100");
    }
    steps.push_back(static_cast<uint32_t>(std::stoul(step)));
  }
  return steps;
}

StatusOr<TrafficChange> ChangeFrom(const TrafficFlags& flags) {
  TrafficChange change;
  if (flags.split == "none") {
    change.split.emplace();
  } else if (!flags.split.empty()) {
    ASSIGN_OR_RETURN(auto split, ParseTrafficSplit(flags.split));
    change.split = TrafficSplit(split.begin(), split.end());
  }
  if (!flags.labels.empty()) {
    change.labels.emplace();
    for (const std::string& entry : flags.labels) {
      const size_t eq = entry.find('=');
      const std::string version = eq == std::string::npos ? "" : entry.substr(eq + 1);
      if (eq == 0 || version.empty() || version.size() > 18 || version.find_first_not_of("0123456789") != std::string::npos) {
        return Status::InvalidArgument("--label '" + entry + "' is not LABEL=VERSION");
      }
      (*change.labels)[entry.substr(0, eq)] = std::stoll(version);
    }
  }
  return change;
}

}  // namespace

void AddTrafficFlags(CLI::App* command, TrafficFlags* flags) {
  AddConnectionFlags(command, &flags->connection);
  command->add_option("model", flags->model, "Model name")->required();
  command->add_option("--split", flags->split,
                      "Set the split of requests that name no version: VERSION:WEIGHT,... (e.g. 1:95,2:5); "
                      "'none': the newest version takes all");
  command->add_option("--label", flags->labels, "Set the version labels: LABEL=VERSION, repeatable (all labels at once)");
}

int RunTraffic(const TrafficFlags& flags) {
  auto client = ConnectFrom(flags.connection);
  if (!client.ok()) return Fail(client.status());
  auto change = ChangeFrom(flags);
  if (!change.ok()) return Fail(change.status());
  const bool set = change->split || change->labels;
  auto info = set ? (*client)->SetTraffic(flags.model, *change) : (*client)->GetTraffic(flags.model);
  if (!info.ok()) return Fail(info.status());
  PrintTraffic(flags.model, *info);
  return 0;
}

void AddRolloutFlags(CLI::App* command, RolloutFlags* flags) {
  AddConnectionFlags(command, &flags->connection);
  command->add_option("model", flags->model, "Model name")->required();
  command->add_option("--version", flags->version, "Start a rollout of this version (without it: show the rollout)");
  command->add_option("--baseline", flags->baseline, "The version it replaces (default: the busiest now)");
  command->add_option("--steps", flags->steps, "Percents of traffic, rising to 100")->capture_default_str();
  command->add_option("--dwell", flags->dwell_seconds, "Seconds per step")->capture_default_str();
  command->add_option("--max-error-rate", flags->max_error_rate, "Guard: the new version's error rate in a step")
      ->capture_default_str();
  command->add_option("--max-p99-ratio", flags->max_p99_ratio, "Guard: its p99 / the baseline's in a step")
      ->capture_default_str();
  command->add_option("--min-requests", flags->min_requests, "Requests in a step before the guards are judged")
      ->capture_default_str();
  command->add_option("--retention", flags->retention_seconds,
                      "Seconds the baseline stays loaded after 100% (default: the config's rollback_retention_seconds)");
  command->add_option("--min-agreement", flags->min_agreement,
                      "Guard: mirror requests to the other version; roll back when their answers agree less often");
  command->add_option("--mirror-percent", flags->mirror_percent, "Share of requests mirrored (with --min-agreement)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  command->add_option("--agreement", flags->agreement_compare, "How answers are compared: close or argmax")
      ->check(CLI::IsMember({"close", "argmax"}))
      ->capture_default_str();
  command->add_option("--agreement-tolerance", flags->agreement_tolerance, "close: |a - b| <= tolerance * (1 + |a|)")
      ->capture_default_str();
  command->add_flag("--rollback", flags->rollback, "Send all traffic back to the baseline now");
  command->add_flag("--watch", flags->watch, "Print the state every second until the rollout completes, or rolls back (exit status 3)");
}

int RunRollout(const RolloutFlags& flags) {
  auto client = ConnectFrom(flags.connection);
  if (!client.ok()) return Fail(client.status());
  StatusOr<client::RolloutInfo> info = Status::NotFound("");
  if (flags.rollback) {
    info = (*client)->RollbackRollout(flags.model);
  } else if (flags.version > 0) {
    auto steps = ParseSteps(flags.steps);
    if (!steps.ok()) return Fail(steps.status());
    RolloutPlan plan{.version = flags.version,
                     .baseline = flags.baseline,
                     .steps = *steps,
                     .dwell = std::chrono::milliseconds(static_cast<int64_t>(flags.dwell_seconds * 1e3)),
                     .max_error_rate = flags.max_error_rate,
                     .max_p99_ratio = flags.max_p99_ratio,
                     .min_requests = flags.min_requests,
                     .retention_seconds = flags.retention_seconds};
    if (flags.min_agreement) {
      plan.agreement = AgreementGuard{
          .min_agreement = *flags.min_agreement,
          .mirror_percent = flags.mirror_percent,
          .compare = flags.agreement_compare == "argmax" ? AgreementGuard::Compare::kArgmax
                                                         : AgreementGuard::Compare::kClose,
          .tolerance = flags.agreement_tolerance};
    }
    info = (*client)->StartRollout(flags.model, plan);
  } else {
    info = (*client)->GetRollout(flags.model);
  }
  while (true) {
    if (!info.ok()) return Fail(info.status());
    PrintRollout(flags.model, *info);
    if (!flags.watch || info->state != "running") break;
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    info = (*client)->GetRollout(flags.model);
  }
  return info->state == "rolled_back" && flags.watch ? 3 : 0;
}

}  // namespace inferd
