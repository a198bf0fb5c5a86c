#include "backends/image/image_codec.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <string>

namespace inferd {
namespace {

Status TooManyPixels(int64_t width, int64_t height, int64_t max_pixels) {
  return Status::InvalidArgument("image is " + std::to_string(width) + "x" + std::to_string(height) + " = " +
                                 std::to_string(width * height) + " pixels, above the limit of " +
                                 std::to_string(max_pixels) + " (parameters[max_pixels])");
}

Status CheckSize(int64_t width, int64_t height, int64_t max_pixels) {
  if (width <= 0 || height <= 0) return Status::InvalidArgument("image has no pixels");
  if (width > max_pixels || height > max_pixels || width * height > max_pixels) {
    return TooManyPixels(width, height, max_pixels);
  }
  return Status::Ok();
}

}  // namespace

ImageFormat SniffImageFormat(std::span<const uint8_t> encoded) {
  static constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (encoded.size() >= 3 && encoded[0] == 0xff && encoded[1] == 0xd8 && encoded[2] == 0xff) return ImageFormat::kJpeg;
  if (encoded.size() >= 8 && std::memcmp(encoded.data(), kPngSignature, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

ImageDecoder::ImageDecoder() : jpeg_(tjInitDecompress()) {}

ImageDecoder::~ImageDecoder() {
  if (jpeg_ != nullptr) tjDestroy(jpeg_);
}

StatusOr<DecodedImage> ImageDecoder::Decode(std::span<const uint8_t> encoded, int channels, int64_t max_pixels) {
  if (channels != 1 && channels != 3) return Status::InvalidArgument("images decode to 1 or 3 channels");
  switch (SniffImageFormat(encoded)) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(encoded, channels, max_pixels);
    case ImageFormat::kPng:
      return DecodePng(encoded, channels, max_pixels);
    case ImageFormat::kUnknown:
      break;
  }
  return Status::InvalidArgument("not a JPEG or PNG image (" + std::to_string(encoded.size()) +
                                 " bytes, no JPEG or PNG signature)");
}

// A handle that failed can answer the next header with 0 x 0 (libjpeg-turbo 2.1): start afresh.
void ImageDecoder::ResetJpeg() {
  if (jpeg_ != nullptr) tjDestroy(jpeg_);
  jpeg_ = tjInitDecompress();
}

Status ImageDecoder::FailJpeg(const char* what) {
  Status error = Status::InvalidArgument(what + std::string(tjGetErrorStr2(jpeg_)));
  ResetJpeg();
  return error;
}

StatusOr<DecodedImage> ImageDecoder::DecodeJpeg(std::span<const uint8_t> encoded, int channels, int64_t max_pixels) {
  if (jpeg_ == nullptr) return Status::Internal("TurboJPEG could not start a decompressor");
  // TurboJPEG's API takes a non-const buffer but does not write to it.
  auto* data = const_cast<unsigned char*>(encoded.data());
  const auto size = static_cast<unsigned long>(encoded.size());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(jpeg_, data, size, &width, &height, &subsampling, &colorspace) != 0) {
    return FailJpeg("corrupt JPEG header: ");
  }
  if (Status checked = CheckSize(width, height, max_pixels); !checked.ok()) {
    ResetJpeg();
    return checked;
  }
  DecodedImage image{width, height, channels, {}};
  image.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * static_cast<size_t>(channels));
  // A warning (a truncated file: "Premature end of JPEG file") is an error here: libjpeg would
  // fill the missing rows with gray and the model would classify a half-gray picture. The scan
  // limit stops progressive JPEGs built to take minutes.
  const int flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
  if (tjDecompress2(jpeg_, data, size, image.pixels.data(), width, 0, height, channels == 3 ? TJPF_RGB : TJPF_GRAY,
                    flags) != 0) {
    return FailJpeg("corrupt or truncated JPEG: ");
  }
  return image;
}

StatusOr<DecodedImage> ImageDecoder::DecodePng(std::span<const uint8_t> encoded, int channels, int64_t max_pixels) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&png, encoded.data(), encoded.size()) == 0) {
    Status error = Status::InvalidArgument(std::string("corrupt PNG header: ") + png.message);
    png_image_free(&png);
    return error;
  }
  if (Status size = CheckSize(png.width, png.height, max_pixels); !size.ok()) {
    png_image_free(&png);
    return size;
  }
  // Read with alpha when the file has it and drop it afterwards: letting libpng remove it would
  // composite onto black, which PIL's convert() (what users' Python preprocessing does) does not.
  const bool has_alpha = (png.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  const int read_channels = channels + (has_alpha ? 1 : 0);
  png.format = (channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY) | (has_alpha ? PNG_FORMAT_FLAG_ALPHA : 0);
  const size_t pixels = static_cast<size_t>(png.width) * png.height;
  std::vector<uint8_t> read(pixels * static_cast<size_t>(read_channels));
  if (png_image_finish_read(&png, nullptr, read.data(), 0, nullptr) == 0) {
    Status error = Status::InvalidArgument(std::string("corrupt or truncated PNG: ") + png.message);
    png_image_free(&png);
    return error;
  }
  DecodedImage image{static_cast<int>(png.width), static_cast<int>(png.height), channels, {}};
  png_image_free(&png);
  if (!has_alpha) {
    image.pixels = std::move(read);
    return image;
  }
  image.pixels.resize(pixels * static_cast<size_t>(channels));
  for (size_t p = 0; p < pixels; ++p) {
    std::memcpy(&image.pixels[p * static_cast<size_t>(channels)], &read[p * static_cast<size_t>(read_channels)],
                static_cast<size_t>(channels));
  }
  return image;
}

}  // namespace inferd
