#include "core/model_view.h"

#include "lifecycle/model_version.h"

namespace inferd {

ModelView::ModelView(std::shared_ptr<const ModelVersion> model) : model_(std::move(model)) {}

const ModelConfig& ModelView::config() const { return model_->config(); }
const std::string& ModelView::name() const { return model_->name(); }
int64_t ModelView::version() const { return model_->version(); }
const ModelStats& ModelView::stats() const { return model_->stats(); }

}  // namespace inferd
