// image_preprocess: decoding (JPEG, PNG, the ways an image is bad), PIL-compatible resizing, the
// torchvision resize-and-crop arithmetic, normalisation and layouts, and one bad image failing only
// its own row of a batch. Expected resize pixels were computed with PIL (Image.resize, BILINEAR).
#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include <cstring>

#include "backends/backend.h"
#include "backends/image/image_codec.h"
#include "backends/image/image_transform.h"

namespace inferd {
namespace {

// The 7 x 5 RGB test image: byte i is (7 * i) % 256, rows top first.
std::vector<uint8_t> TestPixels() {
  std::vector<uint8_t> pixels(7 * 5 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7 % 256);
  return pixels;
}

std::string EncodePng(const std::vector<uint8_t>& pixels, int width, int height, int channels) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(width);
  png.height = static_cast<png_uint_32>(height);
  png.format = channels == 4 ? PNG_FORMAT_RGBA : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  png_alloc_size_t size = 0;
  EXPECT_NE(png_image_write_to_memory(&png, nullptr, &size, 0, pixels.data(), 0, nullptr), 0);
  std::string out(size, '\0');
  EXPECT_NE(png_image_write_to_memory(&png, out.data(), &size, 0, pixels.data(), 0, nullptr), 0);
  out.resize(size);
  return out;
}

std::string EncodeJpeg(const std::vector<uint8_t>& pixels, int width, int height) {
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(handle, pixels.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_444, 95, 0), 0);
  std::string out(reinterpret_cast<const char*>(jpeg), size);
  tjFree(jpeg);
  tjDestroy(handle);
  return out;
}

std::span<const uint8_t> Bytes(const std::string& text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

TEST(ImageCodecTest, PngDecodesToItsPixelsAndDropsAlpha) {
  ImageDecoder decoder;
  auto image = decoder.Decode(Bytes(EncodePng(TestPixels(), 7, 5, 3)), 3, 1000);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->width, 7);
  EXPECT_EQ(image->height, 5);
  EXPECT_EQ(image->pixels, TestPixels());

  std::vector<uint8_t> rgba = {10, 20, 30, 0, 40, 50, 60, 128};  // 2 x 1, alpha 0 and 128
  auto dropped = decoder.Decode(Bytes(EncodePng(rgba, 2, 1, 4)), 3, 1000);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(dropped->pixels, (std::vector<uint8_t>{10, 20, 30, 40, 50, 60}));
}

TEST(ImageCodecTest, JpegDecodesCloseToItsPixels) {
  std::vector<uint8_t> flat(16 * 16 * 3);
  for (size_t i = 0; i < flat.size(); i += 3) {
    flat[i] = 200;
    flat[i + 1] = 100;
    flat[i + 2] = 50;
  }
  ImageDecoder decoder;
  auto image = decoder.Decode(Bytes(EncodeJpeg(flat, 16, 16)), 3, 1000);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->pixels.size(), flat.size());
  for (size_t i = 0; i < flat.size(); ++i) EXPECT_NEAR(image->pixels[i], flat[i], 3) << i;
  auto gray = decoder.Decode(Bytes(EncodeJpeg(flat, 16, 16)), 1, 1000);
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(gray->pixels.size(), 256u);
}

TEST(ImageCodecTest, BadImagesAreInvalidArgumentsThatSayWhy) {
  ImageDecoder decoder;
  auto not_image = decoder.Decode(Bytes("hello, not a picture"), 3, 1000);
  EXPECT_EQ(not_image.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(not_image.status().message().find("not a JPEG or PNG"), std::string::npos);

  const std::string jpeg = EncodeJpeg(std::vector<uint8_t>(64 * 64 * 3, 90), 64, 64);
  auto truncated = decoder.Decode(Bytes(jpeg.substr(0, jpeg.size() / 2)), 3, 100000);
  EXPECT_EQ(truncated.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(truncated.status().message().find("JPEG"), std::string::npos) << truncated.status().message();
  // The decoder recovers: libjpeg-turbo's handle, left as the failure left it, read the next
  // header as 0 x 0.
  EXPECT_TRUE(decoder.Decode(Bytes(jpeg), 3, 100000).ok());
  EXPECT_FALSE(decoder.Decode(Bytes(jpeg.substr(0, jpeg.size() - 40)), 3, 100000).ok());
  EXPECT_TRUE(decoder.Decode(Bytes(jpeg), 3, 100000).ok());

  const std::string png = EncodePng(TestPixels(), 7, 5, 3);
  auto cut_png = decoder.Decode(Bytes(png.substr(0, png.size() - 20)), 3, 1000);
  EXPECT_EQ(cut_png.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cut_png.status().message().find("PNG"), std::string::npos);

  auto too_large = decoder.Decode(Bytes(jpeg), 3, 64 * 63);
  EXPECT_EQ(too_large.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_large.status().message().find("64x64 = 4096 pixels"), std::string::npos) << too_large.status().message();
}

TEST(ImageTransformTest, PlainBilinearMatchesPil) {
  DecodedImage image{7, 5, 3, TestPixels()};
  ImageTransform transform;
  transform.width = 3;
  transform.height = 4;
  transform.resize = ResizeMode::kPlain;
  transform.layout = TensorLayout::kNhwc;
  transform.scale = 1;
  std::vector<float> out(3 * 4 * 3);
  TransformImage(image, transform, out.data());
  // PIL: Image.fromarray(pixels).resize((3, 4), Image.BILINEAR)
  const std::vector<int> pil = {55,  62,  69,  100, 103, 110, 122, 102, 109, 120, 127, 134, 165, 163, 170, 156, 99,  106,
                                142, 149, 156, 143, 150, 95,  82,  89,  96,  121, 128, 135, 148, 155, 135, 147, 154, 161};
  for (size_t i = 0; i < pil.size(); ++i) EXPECT_NEAR(out[i], pil[i], 1.0) << i;

  DecodedImage stripes{4, 1, 1, {0, 255, 0, 255}};
  ImageTransform halve;
  halve.width = 2;
  halve.height = 1;
  halve.channels = 1;
  halve.resize = ResizeMode::kPlain;
  halve.scale = 1;
  std::vector<float> two(2);
  TransformImage(stripes, halve, two.data());
  EXPECT_EQ(two, (std::vector<float>{109, 146}));  // PIL's answer: the filter averages, not samples
}

TEST(ImageTransformTest, CenterCropFollowsTorchvision) {
  ImageTransform transform;  // 224 x 224
  transform.shorter_side = 256;
  // Resize(256) of 500 x 375: 341 x 256; CenterCrop(224): left round(58.5) = 58, top 16.
  ResizePlan landscape = PlanResize(500, 375, transform);
  EXPECT_EQ(landscape.resized_width, 341);
  EXPECT_EQ(landscape.resized_height, 256);
  EXPECT_EQ(landscape.left, 58);
  EXPECT_EQ(landscape.top, 16);
  ResizePlan portrait = PlanResize(300, 451, transform);
  EXPECT_EQ(portrait.resized_width, 256);
  EXPECT_EQ(portrait.resized_height, 384);
  EXPECT_EQ(portrait.left, 16);
  EXPECT_EQ(portrait.top, 80);
}

TEST(ImageTransformTest, NormalisesPerChannelInEitherLayoutAndOrder) {
  DecodedImage image{1, 1, 3, {255, 0, 51}};
  ImageTransform transform;
  transform.width = 1;
  transform.height = 1;
  transform.resize = ResizeMode::kPlain;
  transform.mean = {0.5f, 0.5f, 0.5f};
  transform.std = {0.5f, 0.25f, 0.1f};
  std::vector<float> rgb(3);
  TransformImage(image, transform, rgb.data());
  EXPECT_NEAR(rgb[0], 1.0f, 1e-6);   // (1 - 0.5) / 0.5
  EXPECT_NEAR(rgb[1], -2.0f, 1e-6);  // (0 - 0.5) / 0.25
  EXPECT_NEAR(rgb[2], -3.0f, 1e-6);  // (0.2 - 0.5) / 0.1
  transform.bgr = true;
  std::vector<float> bgr(3);
  TransformImage(image, transform, bgr.data());
  EXPECT_NEAR(bgr[0], (0.2f - 0.5f) / 0.5f, 1e-6);  // blue first, with channel 0's mean and std
  EXPECT_NEAR(bgr[2], (1.0f - 0.5f) / 0.1f, 1e-5);

  DecodedImage two{2, 1, 3, {1, 2, 3, 4, 5, 6}};
  ImageTransform layout;
  layout.width = 2;
  layout.height = 1;
  layout.resize = ResizeMode::kPlain;
  layout.scale = 1;
  std::vector<float> nchw(6), nhwc(6);
  TransformImage(two, layout, nchw.data());
  layout.layout = TensorLayout::kNhwc;
  TransformImage(two, layout, nhwc.data());
  EXPECT_EQ(nchw, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(nhwc, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

ModelConfig PreprocessConfig() {
  auto config = ParseModelConfigText(R"(
    name: "pre" backend: "image_preprocess" max_batch_size: 4
    input [ { name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] } ]
    output [ { name: "PIXELS" data_type: TYPE_FP32 dims: [ 3, 4, 4 ] } ]
    parameters [ { key: "resize" value: { string_value: "plain" } } ])",
                                     "test");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

Tensor ImagesTensor(const std::vector<std::string>& images) {
  auto storage = std::make_shared<std::string>();
  for (const std::string& image : images) {
    const auto length = static_cast<uint32_t>(image.size());
    storage->append(reinterpret_cast<const char*>(&length), 4);
    storage->append(image);
  }
  return {"IMAGE", DataType::kBytes, {static_cast<int64_t>(images.size()), 1}, AliasData(storage, storage->data()),
          storage->size()};
}

TEST(ImagePreprocessBackendTest, ABadImageFailsOnlyItsRow) {
  BackendRegistry registry = BackendRegistry::WithBuiltins();
  const ModelConfig config = PreprocessConfig();
  auto backend = registry.Select(config);
  ASSERT_TRUE(backend.ok());
  auto model = (*backend)->Load(config, {});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::string good = EncodePng(TestPixels(), 7, 5, 3);
  ExecutionBatch batch;
  batch.batch_size = 3;
  batch.inputs.push_back(ImagesTensor({good, "garbage", good}));
  RowFailures failures;
  batch.row_failures = &failures;
  batch.row_offset = 5;
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*model)->Execute(batch, &outputs).ok());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].shape, (Shape{3, 3, 4, 4}));
  EXPECT_EQ(failures.Find(5, 1), nullptr);
  ASSERT_NE(failures.Find(6, 1), nullptr);
  EXPECT_NE(failures.Find(6, 1)->message().find("input 'IMAGE' (batch row 1)"), std::string::npos);
  EXPECT_EQ(failures.Find(7, 1), nullptr);
  const auto values = outputs[0].values<float>();
  EXPECT_EQ(std::vector<float>(values.begin(), values.begin() + 48),
            std::vector<float>(values.begin() + 96, values.begin() + 144));  // rows 0 and 2 agree

  batch.row_failures = nullptr;  // no collector: the whole execution fails
  auto whole = (*model)->Execute(batch, &outputs);
  EXPECT_EQ(whole.code(), StatusCode::kInvalidArgument);
}

TEST(ImagePreprocessBackendTest, RefusesConfigsItCannotServe) {
  BackendRegistry registry = BackendRegistry::WithBuiltins();
  ModelConfig config = PreprocessConfig();
  auto backend = registry.Select(config);
  ASSERT_TRUE(backend.ok());
  ModelConfig bad_layout = config;
  (*bad_layout.mutable_parameters())["layout"].set_string_value("CHWN");
  EXPECT_NE((*backend)->Load(bad_layout, {}).status().message().find("parameters[layout]"), std::string::npos);
  ModelConfig bad_mean = config;
  (*bad_mean.mutable_parameters())["mean"].set_string_value("0.5,0.5");
  EXPECT_NE((*backend)->Load(bad_mean, {}).status().message().find("2 values for 3 channel(s)"), std::string::npos);
  ModelConfig bad_side = config;
  (*bad_side.mutable_parameters())["shorter_side"].set_string_value("2");
  EXPECT_FALSE((*backend)->Load(bad_side, {}).ok());
  ModelConfig bad_output = config;
  bad_output.mutable_output(0)->set_data_type(inference::TYPE_UINT8);
  EXPECT_FALSE((*backend)->Load(bad_output, {}).ok());
}

}  // namespace
}  // namespace inferd
