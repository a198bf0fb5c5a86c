// libFuzzer target for image_preprocess's decoder entry point: request bytes straight into
// TurboJPEG or libpng, then, for whatever decodes, the resize and normalisation.
// Input layout: the first byte picks gray or RGB, the rest is the encoded image.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/image/image_codec.h"
#include "backends/image/image_transform.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static inferd::ImageDecoder decoder;
  const int channels = (data[0] & 1) ? 1 : 3;
  auto image = decoder.Decode({data + 1, size - 1}, channels, int64_t{1} << 20);
  if (!image.ok()) return 0;
  inferd::ImageTransform transform;
  transform.width = 8;
  transform.height = 8;
  transform.channels = channels;
  transform.shorter_side = 9;
  std::vector<float> out(static_cast<size_t>(channels) * 64);
  inferd::TransformImage(*image, transform, out.data());
  return 0;
}
