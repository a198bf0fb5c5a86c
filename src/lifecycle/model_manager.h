// Which model versions are loaded, and the load / unload / reload operations on them.
//
// Readers (every inference) take an immutable snapshot of the serving table through one atomic
// shared_ptr load: no lock shared with loads. Loads and unloads of one model run one at a time
// (its lock, ModelLock); of different models at once, on the server's load threads. A load builds
// the new version completely (load + warmup) holding only its model's lock, then publishes a new
// table under write_mu_ (held for the copy, never for a load or a drain), then drains the
// versions that left the table.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "common/mutex.h"
#include "common/load_override.h"
#include "lifecycle/model_repository.h"
#include "lifecycle/model_state.h"
#include "lifecycle/model_version.h"
#include "lifecycle/response_cache.h"
#include "lifecycle/traffic.h"

namespace inferd {

class ModelManager {
 public:
  struct Options {
    std::vector<std::filesystem::path> repositories;
    int threads = 1;  // cores given to the process; divided among instances
    // Refuses loads the memory limit has no room for (lifecycle/memory_admission.h); null: none.
    std::shared_ptr<MemoryAdmission> memory_admission;
    // Where ensembles send their steps' requests: the server's door (route, validate, queue).
    StepDispatch step_dispatch;
    // What routers get of the server (their door, pools, load facts); metrics and clock are the
    // manager's own.
    RouterServices router_services;
    // Triton's response cache, shared by the versions whose config enables it; null: none
    // (--cache-size 0).
    std::shared_ptr<ResponseCache> response_cache;
    // Once SetLoadsAtIdlePriority(true): a load's work and the release of retired versions run
    // at SCHED_IDLE (common/low_priority.h), behind serving.
  };

  ModelManager(Options options, BackendRegistry* backends, MetricsRegistry* metrics, const Clock* clock);
  ~ModelManager();

  // Loads every model in the repositories (control mode none). Failures are recorded per model,
  // logged, and reported by Index() and AllReady(); they never stop the others.
  void LoadAll();
  // The model names in the repositories now (no config is read); refreshes the names State() knows.
  std::vector<std::string> RepositoryModels() const;
  // Loads or reloads one model from disk (control mode explicit: the load API). A version keeps
  // serving as it is when its config is unchanged. A version that fails to load leaves what
  // served before serving. Versions retired after a rollout load again.
  Status Load(const std::string& name);
  // The same for poll mode: versions in `changed_versions` (their files were replaced) load
  // again even with an unchanged config; retired versions stay retired unless they changed.
  Status Reload(const std::string& name, const std::set<int64_t>& changed_versions);
  // Load with Triton's overrides: a config instead of config.pbtxt, and with files, the model
  // loaded from them alone (written to a private folder for the load, removed after). The same
  // no-gap swap as Load; a malformed override fails the request and changes nothing.
  Status Load(const std::string& name, const LoadOverride& override);
  Status Unload(const std::string& name);
  void UnloadAll();

  // Start-up loads run at normal priority (nothing serves yet, and an idle-priority load would
  // wait for any other work on the machine); the server turns idle priority on once it serves.
  void SetLoadsAtIdlePriority(bool idle) { loads_at_idle_priority_.store(idle); }

  // Lists the repositories' model folders (no config is read), so that State() knows the models
  // that are not loaded (explicit control mode).
  void ScanNames();

  // version 0: the newest loaded version.
  StatusOr<std::shared_ptr<ModelVersion>> Find(std::string_view name, int64_t version) const;
  // The version that serves a request: the one it names, or (version 0) the one the model's
  // traffic split places its id on (lifecycle/traffic.h), or the newest. `mirror` is set when a
  // rollout's agreement guard may mirror the request (the split placed it on one of its pair).
  struct RoutedVersion {
    std::shared_ptr<ModelVersion> model;
    std::shared_ptr<TrafficMirror> mirror;
  };
  StatusOr<RoutedVersion> Route(std::string_view name, int64_t version, std::string_view request_id) const;

  // Sets a model's split and/or labels at run time. Every version given a weight above 0 or a
  // label must be loaded; the weights must not all be 0. Takes effect for the next request.
  Status SetTraffic(const std::string& name, std::optional<TrafficSplit> split,
                    std::optional<VersionLabelMap> labels);
  // The version serving `request` now in place of `stopped`, which a reload or unload retired in
  // the instant after the request was routed to it, when its serving config is the same (so the
  // request, validated for `stopped`, fits it as it is). NOT_FOUND otherwise.
  StatusOr<std::shared_ptr<ModelVersion>> Replacement(const ModelVersion& stopped, const InferRequest& request) const;
  // Starts (or, with null, stops) mirroring a loaded model's requests for a rollout's agreement guard.
  Status SetMirror(const std::string& name, std::shared_ptr<TrafficMirror> mirror);
  // A loaded model's split and labels (empty ones when none were set).
  StatusOr<ModelTraffic> Traffic(std::string_view name) const;
  // The loaded version other than `except` that takes the most traffic now: the heaviest in the
  // split, or without one the newest.
  StatusOr<int64_t> BusiestVersion(std::string_view name, int64_t except) const;
  // Unloads one version (a rollout's baseline after its retention) and keeps it out of later
  // reloads until its folder changes or the model is unloaded. Not the model's last version.
  Status RetireVersion(const std::string& name, int64_t version);
  std::vector<std::shared_ptr<ModelVersion>> AllLoaded() const;
  // The loaded versions of one model, ascending (empty when none).
  std::vector<std::shared_ptr<ModelVersion>> LoadedVersions(std::string_view name) const;
  // Every model in the repositories (listed on disk) with its versions' states: the repository
  // index API. Refreshes the names State() knows.
  std::vector<IndexEntry> Index() const;
  // The state of one version (0: the model's newest), from memory only: health probes ask this
  // every few seconds and must not touch the disk. Known names are those of the last scan
  // (start, load, unload, index) and of every model loaded or tried.
  ModelReadiness State(std::string_view name, int64_t version) const;
  // One model's index entries, from memory only (empty when the name is unknown).
  std::vector<IndexEntry> Entries(std::string_view name) const;
  bool AllReady() const;

 private:
  using VersionMap = std::map<int64_t, std::shared_ptr<ModelVersion>>;
  using ServingTable = std::map<std::string, VersionMap, std::less<>>;

  struct ModelRecord {
    bool wanted = false;  // should be loaded
    Status error;         // model-level error (config, versions, backend)
    std::map<int64_t, std::string> failed_versions;
    // The failed load was a reload: what served before serves on, so readiness holds (a bad push
    // must not take every replica out of service).
    bool still_serving = false;
    // Versions unloaded after a rollout's retention, left out of reloads (RetireVersion).
    std::set<int64_t> retired_versions;
  };

  using Retirees = std::vector<std::shared_ptr<ModelVersion>>;
  // kKeep: versions retired after a rollout stay out (poll reloads); kLoadAgain: they come back.
  enum class Retired { kKeep, kLoadAgain };
  Mutex& ModelLock(const std::string& name);
  // `chain`: the ensembles whose loads led here, outermost first (their members load first).
  Status LoadFolders(const std::string& name, const std::set<int64_t>& changed_versions, Retired retired,
                     std::vector<std::string> chain = {});
  // An ensemble's members (a router's local targets) load before it, each that is not loaded yet
  // (Triton loads an ensemble's composing models with it). A member that is one of `chain` is left
  // to the plan to refuse.
  void LoadMissingMembers(const std::string& name, std::vector<std::string> chain);
  // The member configs an ensemble's plan is checked against: the loaded ones, now.
  MemberConfigs LoadedConfigs() const;
  // Why an ensemble's or router's version cannot serve now (a step's or target's model is not
  // loaded, or was reloaded with a config it no longer fits), or OK; OK for every other model.
  Status CompositeReadiness(const ModelVersion& model) const;
  // The caller holds ModelLock(source.name) (a dynamic lock the annotations cannot name).
  Status LoadSource(const ModelSource& source, const std::set<int64_t>& changed_versions, Retired retired)
      EXCLUDES(write_mu_);
  void CountLoadFailure(const std::string& name);
  Status LoadOverridden(const std::string& name, const std::vector<std::filesystem::path>& repository_folders,
                        const LoadOverride& override) EXCLUDES(write_mu_);
  // What a load prepared: the completed config, the versions to serve (new ones not started
  // yet, listed in `started` too), or a model-level error.
  struct PreparedVersions {
    Status error;
    ModelConfig config;
    VersionMap versions;
    std::vector<std::shared_ptr<ModelVersion>> started;
  };
  // Validates the source and prepares its changed versions (ModelVersion::Prepare); a version
  // that fails is recorded in `record` and what served keeps serving.
  PreparedVersions PrepareVersions(const ModelSource& source, const std::set<int64_t>& changed_versions,
                                   const VersionMap& serving, ModelRecord* record);
  StatusOr<std::shared_ptr<ModelVersion>> PrepareVersion(const ModelConfig& config, Backend* backend,
                                                         const std::filesystem::path& model_dir, int64_t version);
  // An ensemble's version: no backend, no files; `plan` was checked against the members.
  StatusOr<std::shared_ptr<ModelVersion>> PrepareEnsembleVersion(const ModelConfig& config,
                                                                 std::shared_ptr<const EnsemblePlan> plan,
                                                                 const std::filesystem::path& model_dir, int64_t version);
  StatusOr<std::shared_ptr<ModelVersion>> PrepareRouterVersion(const ModelConfig& config,
                                                               std::shared_ptr<const RouterPlan> plan, int64_t version);
  // Makes `table` the one requests see; returns the versions that left it, to be drained (by
  // DrainRetired, after write_mu_ is released: a drain waits for their requests).
  Retirees Publish(ServingTable table) REQUIRES(write_mu_);
  void DrainRetired(Retirees retired) EXCLUDES(write_mu_);
  void ReleaseRetired(Retirees retired);
  // Records a model-level failure; what serves keeps serving.
  Status FailModel(const std::string& name, ModelRecord record, Status error) EXCLUDES(write_mu_);
  int IntraOpThreads(const ModelConfig& config) const;
  // Keeps the keys of a scan (model name -> folders or sources) as the names State() knows.
  template <typename ByName>
  void RememberNames(const ByName& by_name) const {
    MutexLock lock(&index_mu_);
    repository_names_.clear();
    for (const auto& entry : by_name) repository_names_.insert(entry.first);
  }
  std::vector<IndexEntry> EntriesLocked(std::string_view name, const ServingTable& table) const REQUIRES(index_mu_);

  const Options options_;
  BackendRegistry* backends_;
  MetricsRegistry* metrics_;
  const Clock* clock_;

  Mutex locks_mu_;
  std::map<std::string, std::unique_ptr<Mutex>, std::less<>> model_locks_ GUARDED_BY(locks_mu_);
  Mutex write_mu_;  // guards the records and the table: held to copy and publish, never to load
  std::map<std::string, ModelRecord, std::less<>> records_ GUARDED_BY(write_mu_);
  ServingTable table_ GUARDED_BY(write_mu_);  // the latest published copy
  std::atomic<std::shared_ptr<const ServingTable>> snapshot_;
  TrafficTable traffic_;  // changed without write_mu_: a rollback must not wait for a load
  std::atomic<bool> loads_at_idle_priority_{false};
  // A copy of records_ for readers, so Index() never waits behind a slow load.
  mutable Mutex index_mu_;
  std::map<std::string, ModelRecord, std::less<>> index_records_ GUARDED_BY(index_mu_);
  // Model names in the repositories at the last scan.
  mutable std::set<std::string, std::less<>> repository_names_ GUARDED_BY(index_mu_);
};

}  // namespace inferd
