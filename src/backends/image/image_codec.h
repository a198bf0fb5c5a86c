// Decoding encoded images (JPEG through libjpeg-turbo's TurboJPEG API, PNG through libpng's
// simplified API) into 8-bit pixels, for the image_preprocess backend. Untrusted bytes come
// straight from requests, so every failure is a value: not an image, a truncated or corrupt file,
// or one whose header declares more pixels than the caller allows (checked before any pixel
// buffer is allocated, so a 60000 x 60000 header costs nothing).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"

namespace inferd {

struct DecodedImage {
  int width = 0;
  int height = 0;
  int channels = 0;             // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // height rows of width * channels bytes, top row first
};

enum class ImageFormat { kUnknown, kJpeg, kPng };
// By the file's signature (magic bytes).
ImageFormat SniffImageFormat(std::span<const uint8_t> encoded);

// One decoder per thread: it holds a TurboJPEG handle, which is not thread-safe.
class ImageDecoder {
 public:
  ImageDecoder();
  ~ImageDecoder();
  ImageDecoder(const ImageDecoder&) = delete;
  ImageDecoder& operator=(const ImageDecoder&) = delete;

  // `channels`: 3 decodes to RGB, 1 to gray. An alpha channel is dropped (as PIL's
  // convert("RGB") does). INVALID_ARGUMENT for anything that is not a whole JPEG or PNG image
  // of at most `max_pixels` pixels.
  StatusOr<DecodedImage> Decode(std::span<const uint8_t> encoded, int channels, int64_t max_pixels);

 private:
  StatusOr<DecodedImage> DecodeJpeg(std::span<const uint8_t> encoded, int channels, int64_t max_pixels);
  void ResetJpeg();
  Status FailJpeg(const char* what);
  static StatusOr<DecodedImage> DecodePng(std::span<const uint8_t> encoded, int channels, int64_t max_pixels);

  void* jpeg_ = nullptr;  // tjhandle
};

}  // namespace inferd
