#include "lifecycle/model_manager.h"

#include "common/low_priority.h"
#include "lifecycle/mirror.h"
#include "pipeline/ensemble_plan.h"
#include "pipeline/router_plan.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <unistd.h>

#include <atomic>
#include <fstream>

namespace inferd {

namespace fs = std::filesystem;

ModelManager::ModelManager(Options options, BackendRegistry* backends, MetricsRegistry* metrics,
                           const Clock* clock)
    : options_(std::move(options)), backends_(backends), metrics_(metrics), clock_(clock) {
  snapshot_.store(std::make_shared<const ServingTable>());
}

ModelManager::~ModelManager() { UnloadAll(); }

Mutex& ModelManager::ModelLock(const std::string& name) {
  MutexLock lock(&locks_mu_);
  std::unique_ptr<Mutex>& mu = model_locks_[name];
  if (!mu) mu = std::make_unique<Mutex>();
  return *mu;
}

void ModelManager::LoadAll() {
  const std::map<std::string, ModelSource> sources = ScanRepositories(options_.repositories);
  RememberNames(sources);
  for (const auto& [name, source] : sources) {
    MutexLock model_lock(&ModelLock(name));
    Status status = LoadSource(source, {}, Retired::kLoadAgain);
    if (!status.ok()) spdlog::error("failed to load model '{}': {}", name, status.message());
  }
}

std::vector<std::string> ModelManager::RepositoryModels() const {
  const auto folders = ListModelFolders(options_.repositories);
  RememberNames(folders);
  std::vector<std::string> names;
  for (const auto& [name, paths] : folders) names.push_back(name);
  return names;
}

Status ModelManager::Load(const std::string& name) { return LoadFolders(name, {}, Retired::kLoadAgain); }

Status ModelManager::Reload(const std::string& name, const std::set<int64_t>& changed_versions) {
  return LoadFolders(name, changed_versions, Retired::kKeep);
}

Status ModelManager::LoadFolders(const std::string& name, const std::set<int64_t>& changed_versions, Retired retired,
                                 std::vector<std::string> chain) {
  LoadMissingMembers(name, std::move(chain));  // before this model's lock: a load holds one model's lock only
  MutexLock model_lock(&ModelLock(name));
  // Only this model's config is read, not every model's.
  auto folders = ListModelFolders(options_.repositories);
  RememberNames(folders);
  auto it = folders.find(name);
  if (it == folders.end()) return Status::NotFound("model '" + name + "' is not in any model repository");
  Status status = LoadSource(ReadModelSource(name, it->second), changed_versions, retired);
  if (!status.ok()) spdlog::error("failed to load model '{}': {}", name, status.message());
  return status;
}

void ModelManager::LoadMissingMembers(const std::string& name, std::vector<std::string> chain) {
  const auto folders = ListModelFolders(options_.repositories);
  auto it = folders.find(name);
  if (it == folders.end()) return;
  const ModelSource source = ReadModelSource(name, it->second);
  if (!source.status.ok() || !IsComposite(*source.config)) return;
  chain.push_back(name);
  const bool router = IsRouter(*source.config);
  for (const std::string& member : router ? RouterMembers(*source.config) : EnsembleMembers(*source.config)) {
    if (std::ranges::find(chain, member) != chain.end() || Find(member, 0).ok()) continue;
    spdlog::info("{} '{}': loading its {} '{}'", router ? "router" : "ensemble", name,
                 router ? "target model" : "step model", member);
    (void)LoadFolders(member, {}, Retired::kLoadAgain, chain);  // a failure is the member's; the plan reports it
  }
}

MemberConfigs ModelManager::LoadedConfigs() const {
  return [this](const std::string& model, int64_t version) -> StatusOr<ModelConfig> {
    auto found = Find(model, version);
    if (found.ok()) return (*found)->config();
    if (version == 0 || !Find(model, 0).ok()) return Status::NotFound("model '" + model + "' is not loaded");
    return Status::NotFound("model '" + model + "' has no loaded version " + std::to_string(version));
  };
}

Status ModelManager::CompositeReadiness(const ModelVersion& model) const {
  if (model.ensemble() != nullptr) return PlanEnsemble(model.config(), LoadedConfigs()).status();
  if (model.router() != nullptr) return PlanRouter(model.config(), LoadedConfigs()).status();
  return Status::Ok();
}

Status ModelManager::Load(const std::string& name, const LoadOverride& override) {
  if (override.empty()) return Load(name);
  MutexLock model_lock(&ModelLock(name));
  auto folders = ListModelFolders(options_.repositories);
  RememberNames(folders);
  auto it = folders.find(name);
  Status status = LoadOverridden(name, it == folders.end() ? std::vector<fs::path>() : it->second, override);
  if (!status.ok()) spdlog::error("failed to load model '{}': {}", name, status.message());
  return status;
}

namespace {

// Writes Triton's "file:" contents below a new private folder; returns the model folder in it.
StatusOr<fs::path> WriteOverrideFiles(const std::string& name, const std::map<std::string, std::string>& files) {
  // The name comes from the request's path: "." or ".." would put the folder outside its root.
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return Status::InvalidArgument("'" + name + "' cannot be the name of a model loaded from file overrides");
  }
  static std::atomic<uint64_t> loads{0};
  const fs::path root = fs::temp_directory_path() / ("inferd-load-" + std::to_string(::getpid()) + "-" +
                                                     std::to_string(loads.fetch_add(1)));
  const fs::path model_dir = root / name;
  for (const auto& [path, contents] : files) {
    const fs::path relative = fs::path(path).lexically_normal();
    const std::string first = relative.begin() == relative.end() ? "" : relative.begin()->string();
    if (relative.is_absolute() || VersionFolderNumber(first) == 0 ||
        std::distance(relative.begin(), relative.end()) < 2) {
      fs::remove_all(root);
      return Status::InvalidArgument("model '" + name + "': file override 'file:" + path +
                                     "' must name a file inside a version folder, like 'file:1/model.onnx'");
    }
    std::error_code error;
    fs::create_directories((model_dir / relative).parent_path(), error);
    std::ofstream out(model_dir / relative, std::ios::binary);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (error || !out) {
      fs::remove_all(root);
      return Status::Internal("model '" + name + "': cannot write the file override " + path + " under " + root.string());
    }
  }
  return model_dir;
}

}  // namespace

Status ModelManager::LoadOverridden(const std::string& name, const std::vector<fs::path>& repository_folders,
                                    const LoadOverride& override) {
  fs::path private_root;
  ModelSource source;
  if (override.files.empty()) {
    if (repository_folders.empty()) return Status::NotFound("model '" + name + "' is not in any model repository");
    source = ReadModelSource(name, repository_folders);
  } else {
    if (override.config_json.empty()) {
      return Status::InvalidArgument("model '" + name + "': file overrides need a config override (Triton's \"config\" parameter)");
    }
    ASSIGN_OR_RETURN(fs::path model_dir, WriteOverrideFiles(name, override.files));
    private_root = model_dir.parent_path();
    source = ReadModelSource(name, {model_dir});
  }
  Status status = Status::Ok();
  if (!override.config_json.empty()) {
    auto config = ParseModelConfigJson(override.config_json, name, source.dir);
    if (config.ok()) {
      source.config = std::move(config).value();
      source.status = Status::Ok();
    } else {
      status = config.status();  // the request is malformed: nothing changes
    }
  }
  // Versions given as files are new files whatever the config says: they load again, as in Triton.
  std::set<int64_t> overridden_versions;
  for (const auto& [path, contents] : override.files) {
    const std::string folder = path.substr(0, path.find('/'));
    if (!folder.empty() && std::all_of(folder.begin(), folder.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        folder.size() < 18) {
      overridden_versions.insert(std::stoll(folder));
    }
  }
  if (status.ok()) status = LoadSource(source, overridden_versions, Retired::kLoadAgain);
  // What was loaded is in memory now; the files were only the way there.
  if (!private_root.empty()) fs::remove_all(private_root);
  return status;
}

int ModelManager::IntraOpThreads(const ModelConfig& config) const {
  // The config's own count wins: the user (or `inferd tune`) chose it, oversubscription included.
  if (auto threads = IntraOpThreadCount(config); threads.ok() && *threads > 0) return *threads;
  // An instance placed on CPUs (parameters[cpus]) runs a team of as many threads as it has CPUs.
  if (auto cpus = InstanceCpus(config); cpus.ok() && !cpus->empty()) return static_cast<int>(cpus->front().size());
  // Instances x intra-op threads must not exceed the cores given to the process.
  return std::max(1, options_.threads / InstanceCount(config));
}

namespace {

// parameters[cpus] names only CPUs the process may run on (its affinity mask at start: taskset,
// a cpuset cgroup, Kubernetes' static CPU manager).
Status CheckPlacement(const ModelConfig& config) {
  ASSIGN_OR_RETURN(std::vector<CpuList> placement, InstanceCpus(config));
  if (placement.empty()) return Status::Ok();
  static const CpuList allowed = CurrentThreadCpus();
  CpuList missing;
  for (const CpuList& cpus : placement) {
    for (int cpu : cpus) {
      if (!std::binary_search(allowed.begin(), allowed.end(), cpu)) missing.push_back(cpu);
    }
  }
  if (missing.empty()) return Status::Ok();
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  return Status::InvalidArgument("model '" + config.name() + "': parameters[cpus] names CPUs " + FormatCpuList(missing) +
                                 ", which this process may not run on (it may run on " + FormatCpuList(allowed) + ")");
}

}  // namespace

StatusOr<std::shared_ptr<ModelVersion>> ModelManager::PrepareVersion(const ModelConfig& config, Backend* backend,
                                                                  const fs::path& model_dir,
                                                                  int64_t version) {
  const fs::path version_dir = model_dir / std::to_string(version);
  std::string file = config.default_model_filename().empty() ? backend->DefaultModelFilename()
                                                             : config.default_model_filename();
  if (!file.empty() && !fs::exists(version_dir / file)) {
    return Status::NotFound("model '" + config.name() + "' version " + std::to_string(version) +
                            ": model file " + (version_dir / file).string() + " is missing");
  }
  RETURN_IF_ERROR(CheckPlacement(config));
  for (const auto& group : config.instance_group()) {
    if (group.kind() == inference::ModelInstanceGroup::KIND_GPU) {
      spdlog::warn("model '{}': KIND_GPU requested; inferd executes on CPU", config.name());
    }
  }
  ModelVersion::LoadContext context{backend, metrics_, clock_, IntraOpThreads(config), options_.memory_admission.get(),
                                    options_.response_cache.get()};
  return ModelVersion::Prepare(config, version, version_dir, context);
}

StatusOr<std::shared_ptr<ModelVersion>> ModelManager::PrepareEnsembleVersion(const ModelConfig& config,
                                                                             std::shared_ptr<const EnsemblePlan> plan,
                                                                             const fs::path& model_dir, int64_t version) {
  ModelVersion::LoadContext context{nullptr, metrics_, clock_, 1, nullptr, options_.response_cache.get()};
  return ModelVersion::PrepareEnsemble(config, version, std::move(plan), options_.step_dispatch, model_dir, context);
}

StatusOr<std::shared_ptr<ModelVersion>> ModelManager::PrepareRouterVersion(const ModelConfig& config,
                                                                           std::shared_ptr<const RouterPlan> plan,
                                                                           int64_t version) {
  ModelVersion::LoadContext context{nullptr, metrics_, clock_, 1, nullptr, options_.response_cache.get()};
  return ModelVersion::PrepareRouter(config, version, std::move(plan), options_.router_services, context);
}

namespace {

// The config as it matters to a loaded version: the parameters that only steer traffic between
// versions are left out, so changing them does not reload the versions.
std::string ServingConfigBytes(const ModelConfig& config) {
  ModelConfig serving = config;
  for (const char* key : {"traffic_split", "version_labels", "rollback_retention_seconds"}) {
    serving.mutable_parameters()->erase(key);
  }
  return serving.SerializeAsString();
}

// A split in the config must give its shares to versions the version_policy loads (or that were
// retired after a rollout on purpose: the split in force no longer names them).
Status CheckSplitVersions(const ModelConfig& config, const std::vector<int64_t>& versions,
                          const std::set<int64_t>& retired) {
  auto split = TrafficSplitParameter(config);
  if (!split.ok()) return split.status();
  for (const auto& [version, weight] : *split) {
    if (weight > 0 && !retired.contains(version) && std::find(versions.begin(), versions.end(), version) == versions.end()) {
      return Status::InvalidArgument("model '" + config.name() + "': parameters[traffic_split] gives version " +
                                     std::to_string(version) + " a share, but it is not loaded (not on disk, or not "
                                     "selected by version_policy)");
    }
  }
  return Status::Ok();
}

}  // namespace

void ModelManager::CountLoadFailure(const std::string& name) {
  metrics_->AddCounter("inferd_model_load_failures_total", {{"model", name}})->Increment();
}

ModelManager::PreparedVersions ModelManager::PrepareVersions(const ModelSource& source,
                                                           const std::set<int64_t>& changed_versions,
                                                           const VersionMap& serving, ModelRecord* record) {
  const std::string& name = source.name;
  PreparedVersions prepared;
  if (!source.status.ok()) return {source.status};
  prepared.config = *source.config;
  ModelConfig& config = prepared.config;
  const bool ensemble = IsEnsemble(config), router = IsRouter(config);
  Backend* backend = nullptr;
  if (!ensemble && !router) {
    auto selected = backends_->Select(config);
    if (!selected.ok()) return {selected.status()};
    backend = *selected;
  }
  if (source.versions.empty()) {
    return {Status::NotFound("model '" + name + "': no version folder (a positive integer) in " + source.dir.string())};
  }
  std::vector<int64_t> on_disk;
  for (int64_t version : source.versions) {
    if (!record->retired_versions.contains(version)) on_disk.push_back(version);
  }
  std::vector<int64_t> versions = SelectVersions(config.version_policy(), on_disk);
  if (versions.empty()) {
    return {Status::NotFound("model '" + name + "': version_policy selects none of the versions on disk")};
  }
  // What config.pbtxt left out comes from the newest served version's model file.
  Status completed = backend == nullptr ? Status::Ok() : backend->CompleteConfig(source.dir / std::to_string(versions.back()), &config);
  if (completed.ok()) completed = ValidateModelConfig(config, "model '" + name + "' (completed config)");
  if (completed.ok()) completed = CheckSplitVersions(config, versions, record->retired_versions);
  if (!completed.ok()) return {completed};
  // An ensemble's steps are checked against its members as they are loaded now, every load.
  std::shared_ptr<const EnsemblePlan> plan;
  if (ensemble) {
    auto planned = PlanEnsemble(config, LoadedConfigs());
    if (!planned.ok()) return {planned.status()};
    plan = std::make_shared<const EnsemblePlan>(std::move(planned).value());
  }
  std::shared_ptr<const RouterPlan> router_plan;
  if (router) {
    auto planned = PlanRouter(config, LoadedConfigs());
    if (!planned.ok()) return {planned.status()};
    router_plan = std::make_shared<const RouterPlan>(std::move(planned).value());
  }
  const std::string config_bytes = ServingConfigBytes(config);
  for (int64_t version : versions) {
    auto current = serving.find(version);
    if (current != serving.end() && ServingConfigBytes(current->second->config()) == config_bytes &&
        !changed_versions.contains(version)) {
      prepared.versions[version] = current->second;  // unchanged: keep serving it
      continue;
    }
    auto model = ensemble ? PrepareEnsembleVersion(config, plan, source.dir, version)
                 : router ? PrepareRouterVersion(config, router_plan, version)
                          : PrepareVersion(config, backend, source.dir, version);
    if (model.ok()) {
      prepared.versions[version] = *model;
      prepared.started.push_back(std::move(model).value());
    } else {
      record->failed_versions[version] = model.status().message();
      spdlog::error("{}", model.status().message());
      if (current != serving.end()) {
        prepared.versions[version] = current->second;  // keep the old one serving, with its metrics
      } else {
        metrics_->RemoveSeries(ModelLabels(name, version));  // bound by the failed attempt
      }
    }
  }
  return prepared;
}

Status ModelManager::LoadSource(const ModelSource& source, const std::set<int64_t>& changed_versions,
                                Retired retired) {
  const std::string& name = source.name;
  ModelRecord record{.wanted = true};
  VersionMap serving;  // what serves now; only this model's lock holder changes it
  {
    MutexLock lock(&write_mu_);
    if (auto it = table_.find(name); it != table_.end()) serving = it->second;
    if (auto previous = records_.find(name); previous != records_.end() && retired == Retired::kKeep) {
      for (int64_t version : previous->second.retired_versions) {
        if (!changed_versions.contains(version)) record.retired_versions.insert(version);
      }
    }
  }
  // The expensive part runs at idle CPU priority (common/low_priority.h) and holds no lock that
  // other models' loads or any request wait on. Instance threads are started after it, from here.
  PreparedVersions prepared;
  RunAtIdlePriority(loads_at_idle_priority_.load(),
                    [&] { prepared = PrepareVersions(source, changed_versions, serving, &record); });
  if (!prepared.error.ok()) return FailModel(name, std::move(record), prepared.error);
  for (const auto& model : prepared.started) model->Start();
  VersionMap loaded = std::move(prepared.versions);
  const ModelConfig& config = prepared.config;
  if (!record.failed_versions.empty()) {
    // A new version that fails to load does not retire the ones it was to replace (version_policy
    // latest{1} with a broken version 3 keeps 2 serving): a failed load never leaves a model with
    // less than it served.
    CountLoadFailure(name);
    record.still_serving = !serving.empty();
    for (const auto& [version, model] : serving) loaded.emplace(version, model);
  }
  Status status = record.failed_versions.empty()
                      ? Status::Ok()
                      : Status::InvalidArgument(record.failed_versions.begin()->second);
  Retirees retirees;
  {
    MutexLock lock(&write_mu_);
    ServingTable next = table_;
    next[name] = std::move(loaded);
    records_[name] = std::move(record);
    retirees = Publish(std::move(next));
  }
  traffic_.ApplyConfig(config);
  DrainRetired(std::move(retirees));
  return status;
}

Status ModelManager::FailModel(const std::string& name, ModelRecord record, Status error) {
  CountLoadFailure(name);
  record.error = error;
  Retirees retirees;
  {
    MutexLock lock(&write_mu_);
    record.still_serving = table_.contains(name) && !table_.at(name).empty();
    records_[name] = std::move(record);
    retirees = Publish(table_);  // the same table; the index records change
  }
  DrainRetired(std::move(retirees));
  return error;
}

ModelManager::Retirees ModelManager::Publish(ServingTable table) {
  Retirees retired;
  for (const auto& [name, versions] : table_) {
    for (const auto& [version, model] : versions) {
      auto it = table.find(name);
      bool kept = it != table.end() && it->second.contains(version) && it->second.at(version) == model;
      if (!kept) retired.push_back(model);
    }
  }
  for (auto it = table.begin(); it != table.end();) {
    it = it->second.empty() ? table.erase(it) : std::next(it);
  }
  table_ = std::move(table);
  snapshot_.store(std::make_shared<const ServingTable>(table_));
  {
    MutexLock lock(&index_mu_);
    index_records_ = records_;
  }
  return retired;
}

void ModelManager::DrainRetired(Retirees retired) {
  if (retired.empty()) return;
  // Freeing what a version held (and trimming the heap after) is work too: at idle priority.
  RunAtIdlePriority(loads_at_idle_priority_.load(), [&] { ReleaseRetired(std::move(retired)); });
}

void ModelManager::ReleaseRetired(Retirees retired) {
  // Versions that left the table take no new requests; their queued and running ones finish.
  for (auto& model : retired) {
    model->StopAndDrain();
    // A reload of the same version shares these series; they go only when the version does.
    if (!Find(model->name(), model->version()).ok()) {
      metrics_->RemoveSeries(ModelLabels(model->name(), model->version()));
    }
    spdlog::info("unloaded model '{}' version {}", model->name(), model->version());
  }
  // What the versions held was freed by the threads that used it (instance threads, which are
  // new at every load) into glibc's per-thread arenas, where it stays resident until trimmed:
  // without this, RSS stepped up over the first load/unload cycles and stayed there.
  retired.clear();
  TrimHeap();
}

Status ModelManager::Unload(const std::string& name) {
  MutexLock model_lock(&ModelLock(name));
  Retirees retirees;
  {
    MutexLock lock(&write_mu_);
    if (!records_.contains(name) && !table_.contains(name)) {
      return Status::NotFound("model '" + name + "' is not loaded");
    }
    records_.erase(name);
    ServingTable next = table_;
    next.erase(name);
    retirees = Publish(std::move(next));
  }
  traffic_.Remove(name);
  DrainRetired(std::move(retirees));
  return Status::Ok();
}

Status ModelManager::RetireVersion(const std::string& name, int64_t version) {
  MutexLock model_lock(&ModelLock(name));
  Retirees retirees;
  {
    MutexLock lock(&write_mu_);
    auto model = table_.find(name);
    if (model == table_.end() || !model->second.contains(version)) {
      return Status::NotFound("model '" + name + "' has no loaded version " + std::to_string(version));
    }
    if (model->second.size() == 1) {
      return Status::FailedPrecondition("model '" + name + "': version " + std::to_string(version) +
                                        " is its only loaded version");
    }
    records_[name].retired_versions.insert(version);
    ServingTable next = table_;
    next[name].erase(version);
    retirees = Publish(std::move(next));
  }
  DrainRetired(std::move(retirees));
  return Status::Ok();
}

StatusOr<ModelManager::RoutedVersion> ModelManager::Route(std::string_view name, int64_t version,
                                                          std::string_view request_id) const {
  if (version != 0) {
    ASSIGN_OR_RETURN(auto named, Find(name, version));
    return RoutedVersion{std::move(named), nullptr};
  }
  std::shared_ptr<const ModelTraffic> traffic = traffic_.Find(name);
  if (traffic == nullptr || traffic->split.empty()) {
    ASSIGN_OR_RETURN(auto newest, Find(name, 0));
    return RoutedVersion{std::move(newest), nullptr};
  }
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  auto model = table->find(name);
  if (model == table->end()) return Status::NotFound("unknown model '" + std::string(name) + "'");
  const VersionMap& loaded = model->second;
  const int64_t chosen = PickVersion(traffic->split, TrafficTicket(request_id),
                                     [&loaded](int64_t v) { return loaded.contains(v); });
  RoutedVersion routed{chosen == 0 ? loaded.rbegin()->second : loaded.at(chosen), nullptr};
  if (traffic->mirror != nullptr && traffic->mirror->PeerOf(routed.model->version()) != 0) routed.mirror = traffic->mirror;
  return routed;
}

StatusOr<std::shared_ptr<ModelVersion>> ModelManager::Replacement(const ModelVersion& stopped,
                                                                  const InferRequest& request) const {
  ASSIGN_OR_RETURN(RoutedVersion routed, Route(request.model_name, request.model_version, request.id));
  if (routed.model.get() == &stopped || routed.model->stopped() ||
      ServingConfigBytes(routed.model->config()) != ServingConfigBytes(stopped.config())) {
    return Status::NotFound("model '" + request.model_name + "': no version took the place of the one retired");
  }
  return std::move(routed.model);
}

Status ModelManager::SetMirror(const std::string& name, std::shared_ptr<TrafficMirror> mirror) {
  if (!snapshot_.load()->contains(name)) return Status::NotFound("model '" + name + "' is not loaded");
  traffic_.SetMirror(name, std::move(mirror));
  return Status::Ok();
}

Status ModelManager::SetTraffic(const std::string& name, std::optional<TrafficSplit> split,
                                std::optional<VersionLabelMap> labels) {
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  auto model = table->find(name);
  if (model == table->end()) return Status::NotFound("model '" + name + "' is not loaded");
  const VersionMap& loaded = model->second;
  if (split) {
    uint64_t total = 0;
    for (const auto& [version, weight] : *split) {
      if (weight > 0 && !loaded.contains(version)) {
        return Status::InvalidArgument("model '" + name + "': version " + std::to_string(version) +
                                       " is given a share of traffic but is not loaded");
      }
      total += weight;
    }
    if (!split->empty() && total == 0) {
      return Status::InvalidArgument("model '" + name + "': the traffic split's weights add up to 0");
    }
  }
  if (labels) {
    for (const auto& [label, version] : *labels) {
      if (!loaded.contains(version)) {
        return Status::InvalidArgument("model '" + name + "': label '" + label + "' names version " +
                                       std::to_string(version) + ", which is not loaded");
      }
    }
  }
  if (split) traffic_.SetSplit(name, std::move(*split));
  if (labels) traffic_.SetLabels(name, std::move(*labels));
  return Status::Ok();
}

StatusOr<ModelTraffic> ModelManager::Traffic(std::string_view name) const {
  if (!snapshot_.load()->contains(name)) return Status::NotFound("model '" + std::string(name) + "' is not loaded");
  std::shared_ptr<const ModelTraffic> traffic = traffic_.Find(name);
  return traffic ? *traffic : ModelTraffic{};
}

StatusOr<int64_t> ModelManager::BusiestVersion(std::string_view name, int64_t except) const {
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  auto model = table->find(name);
  if (model == table->end()) return Status::NotFound("model '" + std::string(name) + "' is not loaded");
  int64_t busiest = 0;
  uint32_t most = 0;
  if (std::shared_ptr<const ModelTraffic> traffic = traffic_.Find(name)) {
    for (const auto& [version, weight] : traffic->split) {
      if (version != except && weight > most && model->second.contains(version)) {
        busiest = version;
        most = weight;
      }
    }
  }
  for (auto it = model->second.rbegin(); busiest == 0 && it != model->second.rend(); ++it) {
    if (it->first != except) busiest = it->first;
  }
  if (busiest == 0) {
    return Status::FailedPrecondition("model '" + std::string(name) + "' has no loaded version besides " +
                                      std::to_string(except) + " to compare it with");
  }
  return busiest;
}

void ModelManager::UnloadAll() {
  Retirees retirees;
  {
    MutexLock lock(&write_mu_);
    records_.clear();
    retirees = Publish({});
  }
  DrainRetired(std::move(retirees));
}

StatusOr<std::shared_ptr<ModelVersion>> ModelManager::Find(std::string_view name, int64_t version) const {
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  auto model = table->find(name);
  if (model == table->end()) return Status::NotFound("unknown model '" + std::string(name) + "'");
  if (version == 0) return model->second.rbegin()->second;
  auto it = model->second.find(version);
  if (it == model->second.end()) {
    return Status::NotFound("model '" + std::string(name) + "' has no loaded version " +
                            std::to_string(version));
  }
  return it->second;
}

std::vector<std::shared_ptr<ModelVersion>> ModelManager::AllLoaded() const {
  std::vector<std::shared_ptr<ModelVersion>> all;
  // Held in a local: a range-for over `*snapshot_.load()` would drop the temporary shared_ptr
  // before the loop runs, and a load publishing meanwhile would free the table under it.
  const std::shared_ptr<const ServingTable> table = snapshot_.load();
  for (const auto& [name, versions] : *table) {
    for (const auto& [version, model] : versions) all.push_back(model);
  }
  return all;
}

std::vector<std::shared_ptr<ModelVersion>> ModelManager::LoadedVersions(std::string_view name) const {
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  std::vector<std::shared_ptr<ModelVersion>> versions;
  if (auto model = table->find(name); model != table->end()) {
    for (const auto& [version, loaded] : model->second) versions.push_back(loaded);
  }
  return versions;
}

void ModelManager::ScanNames() { RememberNames(ListModelFolders(options_.repositories)); }

std::vector<IndexEntry> ModelManager::EntriesLocked(std::string_view name, const ServingTable& table) const {
  std::vector<IndexEntry> entries;
  if (auto serving = table.find(name); serving != table.end()) {
    for (const auto& [version, model] : serving->second) {
      const ModelVersion::Timings timings = model->timings();
      const Status readiness = CompositeReadiness(*model);
      entries.push_back({std::string(name), version, readiness.ok() ? ModelState::kReady : ModelState::kUnavailable,
                         readiness.message(), timings.load_seconds, timings.warmup_seconds,
                         timings.first_request_seconds});
    }
  }
  if (auto record = index_records_.find(name); record != index_records_.end()) {
    for (const auto& [version, reason] : record->second.failed_versions) {
      entries.push_back({std::string(name), version, ModelState::kUnavailable, reason});
    }
    if (!record->second.error.ok()) {
      entries.push_back({std::string(name), 0, ModelState::kUnavailable, record->second.error.message()});
    }
  }
  if (entries.empty() && repository_names_.contains(name)) {
    entries.push_back({std::string(name), 0, ModelState::kNotLoaded, ""});
  }
  return entries;
}

std::vector<IndexEntry> ModelManager::Entries(std::string_view name) const {
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  MutexLock lock(&index_mu_);
  return EntriesLocked(name, *table);
}

std::vector<IndexEntry> ModelManager::Index() const {
  const auto folders = ListModelFolders(options_.repositories);
  RememberNames(folders);
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  MutexLock lock(&index_mu_);
  std::vector<IndexEntry> entries;
  for (const auto& [name, paths] : folders) {
    for (IndexEntry& entry : EntriesLocked(name, *table)) entries.push_back(std::move(entry));
  }
  return entries;
}

ModelReadiness ModelManager::State(std::string_view name, int64_t version) const {
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  if (auto serving = table->find(name); serving != table->end()) {
    auto it = version == 0 ? std::prev(serving->second.end()) : serving->second.find(version);
    if (it != serving->second.end()) {
      const Status readiness = CompositeReadiness(*it->second);
      if (!readiness.ok()) return {ModelState::kUnavailable, readiness.message()};
      return {ModelState::kReady, ""};
    }
  }
  const std::string label = "model '" + std::string(name) + "'";
  MutexLock lock(&index_mu_);
  const std::vector<IndexEntry> entries = EntriesLocked(name, *table);
  for (const IndexEntry& entry : entries) {
    // A failed version, or the model as a whole (not loaded, or its config broken).
    if (version == 0 || entry.version == version || entry.version == 0) {
      return {entry.state, entry.reason.empty() ? label + " is not loaded" : entry.reason};
    }
  }
  if (entries.empty()) return {ModelState::kUnknown, "unknown " + label};
  return {ModelState::kUnknown, label + " has no version " + std::to_string(version)};
}

bool ModelManager::AllReady() const {
  std::shared_ptr<const ServingTable> table = snapshot_.load();
  MutexLock lock(&index_mu_);
  for (const auto& [name, record] : index_records_) {
    if (!record.wanted) continue;
    const bool failed = !record.error.ok() || !record.failed_versions.empty();
    if (!table->contains(name) || (failed && !record.still_serving)) return false;
    if (!CompositeReadiness(*table->at(name).rbegin()->second).ok()) return false;
  }
  return true;
}

}  // namespace inferd
