// image_preprocess: encoded JPEG or PNG images in, a model's FP32 image tensor out.
//   input  : one TYPE_STRING input, dims [ 1 ]: one encoded image per request (per batch row).
//   output : one TYPE_FP32 output, dims [ C, H, W ] (layout NCHW) or [ H, W, C ] (NHWC), C 1 or 3.
// Parameters (all optional):
//   resize        "center_crop" (default: keep the aspect ratio, shorter side to shorter_side, crop
//                 the center to H x W) or "plain" (each side to the output's).
//   shorter_side  center_crop's resized shorter side, >= max(H, W); default max(H, W).
//   layout        "NCHW" (default) or "NHWC".
//   channel_order "RGB" (default) or "BGR".
//   scale         pixel multiplier applied first, default 1/255 (values in [0, 1]).
//   mean, std     per output channel, "0.485,0.456,0.406"; defaults 0 and 1.
//   max_pixels    largest decoded width x height accepted, default 16777216 (4096 x 4096).
// A bad image (not an image, truncated, too large) fails its own request with INVALID_ARGUMENT
// naming the input; the other requests of the batch get their tensors.
#include <charconv>
#include <cmath>

#include "backends/backend.h"
#include "backends/builtin/builtin_backends.h"
#include "backends/image/image_codec.h"
#include "backends/image/image_transform.h"
#include "common/bytes_elements.h"

namespace inferd {
namespace {

constexpr int64_t kDefaultMaxPixels = int64_t{4096} * 4096;

struct PreprocessSettings {
  ImageTransform transform;
  int64_t max_pixels = kDefaultMaxPixels;
};

StatusOr<std::vector<float>> ParseFloats(const std::string& text) {
  std::vector<float> values;
  const char* at = text.data();
  const char* end = text.data() + text.size();
  while (at < end) {
    while (at < end && *at == ' ') ++at;
    float value = 0;
    auto [next, error] = std::from_chars(at, end, value);
    if (error != std::errc() || !std::isfinite(value)) return Status::InvalidArgument("'" + text + "' is not a list of numbers");
    values.push_back(value);
    at = next;
    while (at < end && *at == ' ') ++at;
    if (at < end && *at++ != ',') return Status::InvalidArgument("'" + text + "' is not a comma-separated list");
  }
  return values;
}

StatusOr<int64_t> ParsePositive(const std::string& text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) {
    return Status::InvalidArgument("'" + text + "' is not a positive integer");
  }
  return value;
}

// The index of the parameter's value among `choices`; 0 (the first, the default) when absent.
StatusOr<size_t> ParseChoice(const ModelConfig& config, const std::string& key,
                             std::initializer_list<std::string_view> choices) {
  const std::string value = ConfigParameter(config, key).value_or(std::string(*choices.begin()));
  size_t index = 0;
  std::string allowed;
  for (std::string_view choice : choices) {
    if (value == choice) return index;
    allowed += (allowed.empty() ? "\"" : ", \"") + std::string(choice) + "\"";
    ++index;
  }
  return Status::InvalidArgument("parameters[" + key + "] is '" + value + "'; expected one of " + allowed);
}

Status ParseChannelValues(const ModelConfig& config, const std::string& key, int channels, std::array<float, 3>* out) {
  const auto text = ConfigParameter(config, key);
  if (!text) return Status::Ok();
  auto parsed = ParseFloats(*text);
  if (!parsed.ok()) return parsed.status().WithPrefix("parameters[" + key + "]");
  const std::vector<float>& values = *parsed;
  if (values.size() != static_cast<size_t>(channels)) {
    return Status::InvalidArgument("parameters[" + key + "] has " + std::to_string(values.size()) +
                                   " values for " + std::to_string(channels) + " channel(s)");
  }
  for (size_t i = 0; i < values.size(); ++i) (*out)[i] = values[i];
  return Status::Ok();
}

// Output dims [C, H, W] or [H, W, C] into the transform.
Status ReadOutputShape(const inference::ModelOutput& output, ImageTransform* transform) {
  if (output.data_type() != inference::TYPE_FP32) return Status::InvalidArgument("output '" + output.name() + "' must be TYPE_FP32");
  const bool nchw = transform->layout == TensorLayout::kNchw;
  if (output.dims_size() != 3) {
    return Status::InvalidArgument("output '" + output.name() + "' must have 3 dims, " +
                                   (nchw ? "[ C, H, W ] (layout NCHW)" : "[ H, W, C ] (layout NHWC)"));
  }
  const int64_t c = nchw ? output.dims(0) : output.dims(2);
  const int64_t h = nchw ? output.dims(1) : output.dims(0);
  const int64_t w = nchw ? output.dims(2) : output.dims(1);
  if (c != 1 && c != 3) return Status::InvalidArgument("output '" + output.name() + "' must have 1 or 3 channels");
  if (h <= 0 || w <= 0 || h > 16384 || w > 16384) {
    return Status::InvalidArgument("output '" + output.name() + "' needs fixed height and width (1 to 16384)");
  }
  transform->channels = static_cast<int>(c);
  transform->height = static_cast<int>(h);
  transform->width = static_cast<int>(w);
  return Status::Ok();
}

StatusOr<PreprocessSettings> ReadSettings(const ModelConfig& config) {
  if (config.input_size() != 1 || config.input(0).data_type() != inference::TYPE_STRING) {
    return Status::InvalidArgument("takes exactly one TYPE_STRING input (the encoded images)");
  }
  const auto& input = config.input(0);
  if (input.dims_size() != 1 || input.dims(0) != 1) {
    return Status::InvalidArgument("input '" + input.name() + "' must have dims [ 1 ]: one image per request");
  }
  if (config.output_size() != 1) return Status::InvalidArgument("has exactly one output (the image tensor)");
  PreprocessSettings settings;
  ImageTransform& transform = settings.transform;
  ASSIGN_OR_RETURN(size_t layout, ParseChoice(config, "layout", {"NCHW", "NHWC"}));
  transform.layout = layout == 0 ? TensorLayout::kNchw : TensorLayout::kNhwc;
  RETURN_IF_ERROR(ReadOutputShape(config.output(0), &transform));
  ASSIGN_OR_RETURN(size_t resize, ParseChoice(config, "resize", {"center_crop", "plain"}));
  transform.resize = resize == 0 ? ResizeMode::kCenterCrop : ResizeMode::kPlain;
  transform.shorter_side = std::max(transform.width, transform.height);
  if (auto side = ConfigParameter(config, "shorter_side")) {
    auto parsed = ParsePositive(*side);
    if (!parsed.ok()) return parsed.status().WithPrefix("parameters[shorter_side]");
    if (*parsed < transform.shorter_side || *parsed > 65536) {
      return Status::InvalidArgument("parameters[shorter_side] " + *side + " must be at least the output's larger side, " +
                                     std::to_string(transform.shorter_side));
    }
    transform.shorter_side = static_cast<int>(*parsed);
  }
  ASSIGN_OR_RETURN(size_t order, ParseChoice(config, "channel_order", {"RGB", "BGR"}));
  transform.bgr = order == 1;
  if (auto scale = ConfigParameter(config, "scale")) {
    auto parsed = ParseFloats(*scale);
    if (!parsed.ok() || parsed->size() != 1) return Status::InvalidArgument("parameters[scale] '" + *scale + "' is not a number");
    transform.scale = parsed->front();
  }
  RETURN_IF_ERROR(ParseChannelValues(config, "mean", transform.channels, &transform.mean));
  RETURN_IF_ERROR(ParseChannelValues(config, "std", transform.channels, &transform.std));
  for (int c = 0; c < transform.channels; ++c) {
    if (transform.std[static_cast<size_t>(c)] == 0) return Status::InvalidArgument("parameters[std] has a zero");
  }
  if (auto limit = ConfigParameter(config, "max_pixels")) {
    auto parsed = ParsePositive(*limit);
    if (!parsed.ok()) return parsed.status().WithPrefix("parameters[max_pixels]");
    settings.max_pixels = *parsed;
  }
  return settings;
}

class ImagePreprocessModel final : public Model {
 public:
  ImagePreprocessModel(const ModelConfig& config, PreprocessSettings settings)
      : input_name_(config.input(0).name()),
        output_(config.output(0)),
        batched_(config.max_batch_size() > 0),
        settings_(settings) {}

  Status Execute(const ExecutionBatch& batch, std::vector<Tensor>* outputs) override {
    const Tensor* input = batch.FindInput(input_name_);
    if (input == nullptr || input->dtype != DataType::kBytes) {
      return Status::InvalidArgument("image_preprocess needs its BYTES input '" + input_name_ + "'");
    }
    const int64_t rows = batched_ ? batch.batch_size : 1;
    const ImageTransform& transform = settings_.transform;
    const size_t row_values = static_cast<size_t>(transform.channels) * transform.height * transform.width;
    MutableBuffer buffer = AllocateBuffer(static_cast<size_t>(rows) * row_values * sizeof(float));
    auto* values = reinterpret_cast<float*>(buffer.get());
    int64_t row = 0;
    Status status;
    ForEachBytesElement(*input, [&](std::string_view element) {
      const std::span encoded(reinterpret_cast<const uint8_t*>(element.data()), element.size());
      if (!status.ok() || row >= rows) return;
      float* out = values + static_cast<size_t>(row) * row_values;
      auto image = decoder_.Decode(encoded, transform.channels, settings_.max_pixels);
      if (image.ok()) {
        TransformImage(*image, transform, out);
      } else {
        std::fill(out, out + row_values, 0.0f);
        status = batch.FailRow(row, image.status().WithPrefix("input '" + input_name_ + "'" +
                                                              (rows > 1 ? " (batch row " + std::to_string(row) + ")" : "")));
      }
      ++row;
    });
    RETURN_IF_ERROR(status);
    if (row != rows) {
      return Status::InvalidArgument("input '" + input_name_ + "' holds " + std::to_string(row) + " images for " +
                                     std::to_string(rows) + " rows");
    }
    Shape shape(output_.dims().begin(), output_.dims().end());
    if (batched_) shape.insert(shape.begin(), rows);
    outputs->clear();
    outputs->push_back({output_.name(), DataType::kFp32, std::move(shape), AliasData(buffer.memory, buffer.get()), buffer.size});
    return Status::Ok();
  }

 private:
  const std::string input_name_;
  const inference::ModelOutput output_;
  const bool batched_;
  const PreprocessSettings settings_;
  ImageDecoder decoder_;
};

class ImagePreprocessBackend final : public Backend {
 public:
  std::string_view name() const override { return "image_preprocess"; }

  StatusOr<std::unique_ptr<Model>> Load(const ModelConfig& config, const LoadOptions& options) override {
    (void)options;
    auto settings = ReadSettings(config);
    if (!settings.ok()) return settings.status().WithPrefix("model '" + config.name() + "': image_preprocess");
    return std::unique_ptr<Model>(new ImagePreprocessModel(config, std::move(settings).value()));
  }
};

}  // namespace

std::unique_ptr<Backend> MakeImagePreprocessBackend() { return std::make_unique<ImagePreprocessBackend>(); }

}  // namespace inferd
