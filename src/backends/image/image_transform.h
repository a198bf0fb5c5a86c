// Turning a decoded image into a model's input tensor: resize (bilinear), optionally keeping the
// aspect ratio and center-cropping, then per-channel normalisation, channel order and layout.
//
// The resize is PIL's bilinear resample (what torchvision.transforms.Resize does to PIL images):
// a triangle filter whose support widens with the downscale factor, so shrinking averages every
// source pixel instead of sampling four. Each pass rounds to 8 bits, as PIL's 8-bit images do, so
// a model sees the pixels it was trained on with a PIL pipeline. Only the output rows and columns
// inside the crop are computed.
#pragma once

#include <array>
#include <cstdint>

#include "backends/image/image_codec.h"

namespace inferd {

enum class ResizeMode {
  kCenterCrop,  // scale the shorter side to `shorter_side`, keep the aspect ratio, crop the center
  kPlain,       // scale each side to the output's, whatever the aspect ratio
};

enum class TensorLayout { kNchw, kNhwc };

struct ImageTransform {
  int width = 224;   // the output's
  int height = 224;
  int channels = 3;  // 1 or 3
  ResizeMode resize = ResizeMode::kCenterCrop;
  int shorter_side = 224;  // kCenterCrop: >= max(width, height)
  TensorLayout layout = TensorLayout::kNchw;
  bool bgr = false;  // channel order of the output (the decoded image is RGB)
  // value = (pixel * scale - mean[c]) / std[c], c in the output's channel order
  float scale = 1.0f / 255.0f;
  std::array<float, 3> mean{0, 0, 0};
  std::array<float, 3> std{1, 1, 1};
};

// The region of the resized image that the output keeps.
struct ResizePlan {
  int resized_width = 0;
  int resized_height = 0;
  int left = 0;  // first kept column / row of the resized image
  int top = 0;
};
ResizePlan PlanResize(int image_width, int image_height, const ImageTransform& transform);

// Writes transform.channels * height * width floats at `out`, in the transform's layout.
// `image.channels` must equal transform.channels.
void TransformImage(const DecodedImage& image, const ImageTransform& transform, float* out);

}  // namespace inferd
