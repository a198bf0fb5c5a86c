// TF Serving REST bodies (frontends/http/tfserving_codec): both request formats, BYTES as strings
// and {"b64"}, every malformed shape of body a client can send, and both response formats.
#include "frontends/http/tfserving_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "frontends/http/json_values.h"

namespace inferd {
namespace {

const std::vector<TfTensorSpec> kOneInput = {{"x", DataType::kFp32}};
const std::vector<TfTensorSpec> kTwoInputs = {{"a", DataType::kInt32}, {"b", DataType::kBytes}};

std::string ErrorOf(const std::string& body, const std::vector<TfTensorSpec>& inputs = kOneInput) {
  auto parsed = ParseTfPredictRequest(body, inputs);
  return parsed.ok() ? "" : parsed.status().message();
}

std::vector<std::string> Strings(const Tensor& t) {
  std::vector<std::string> out;
  ForEachBytesElement(t, [&](std::string_view s) { out.emplace_back(s); });
  return out;
}

TEST(TfServingCodecTest, RowFormatStacksInstancesAlongANewBatchDim) {
  auto parsed = ParseTfPredictRequest(R"({"instances": [[1, 2, 3], [4, 5, 6]]})", kOneInput);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->format, TfFormat::kRow);
  EXPECT_EQ(parsed->instances, 2);
  const Tensor& x = parsed->request->inputs[0];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.shape, (Shape{2, 3}));
  EXPECT_EQ(x.values<float>()[4], 5.0f);
}

TEST(TfServingCodecTest, NamedInstancesWithStringsAndBase64) {
  auto parsed = ParseTfPredictRequest(
      R"({"signature_name": "serving_default", "instances": [{"a": [1, 2], "b": "hi"}, {"a": [3, 4], "b": {"b64": "AAH/"}}]})",
      kTwoInputs);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Tensor& a = parsed->request->inputs[0];
  const Tensor& b = parsed->request->inputs[1];
  EXPECT_EQ(a.shape, (Shape{2, 2}));
  EXPECT_EQ(a.values<int32_t>()[3], 4);
  EXPECT_EQ(b.shape, (Shape{2}));
  EXPECT_EQ(Strings(b), (std::vector<std::string>{"hi", std::string("\x00\x01\xff", 3)}));
}

TEST(TfServingCodecTest, ColumnarFormatTakesShapesAsGiven) {
  auto parsed = ParseTfPredictRequest(R"({"inputs": {"a": [[1], [2], [3]], "b": ["x"]}})", kTwoInputs);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->format, TfFormat::kColumnar);
  EXPECT_EQ(parsed->request->inputs[0].shape, (Shape{3, 1}));
  EXPECT_EQ(parsed->request->inputs[1].shape, (Shape{1}));
  auto bare = ParseTfPredictRequest(R"({"inputs": 2.5})", kOneInput);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->request->inputs[0].shape, (Shape{}));
}

TEST(TfServingCodecTest, BadBodiesAreClearErrors) {
  EXPECT_NE(ErrorOf("{\"instances\": [1,").find("malformed JSON"), std::string::npos);
  EXPECT_NE(ErrorOf("[1, 2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(ErrorOf("{}").find("exactly one of 'instances'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"instances": [1], "inputs": [1]})").find("exactly one"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"instances": []})").find("non-empty"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"instances": [[1, 2], [3]]})").find("ragged"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"inputs": [[1, 2], 3]})").find("ragged"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"instances": [{"y": 1}]})").find("unknown input 'y'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"instances": ["a"]})").find("not a valid FP32"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"instances": [1]})", kTwoInputs).find("must name the inputs"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"instances": [{"a": 1, "b": "x"}, {"a": 2}]})", kTwoInputs).find("same inputs"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"instances": [{"a": 1, "b": {"b64": "!!"}}]})", kTwoInputs).find("not valid base64"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"signature_name": "other", "instances": [1]})").find("unknown signature"), std::string::npos);
}

Tensor FloatTensor(const std::string& name, Shape shape, std::vector<float> values) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  auto owner = std::make_shared<std::vector<float>>(std::move(values));
  t.byte_size = owner->size() * sizeof(float);
  t.data = AliasData(owner, owner->data());
  return t;
}

Tensor BytesTensor(const std::string& name, const std::vector<std::string>& values) {
  auto owner = std::make_shared<std::string>();
  for (const std::string& v : values) {
    const auto length = static_cast<uint32_t>(v.size());
    owner->append(reinterpret_cast<const char*>(&length), 4);
    owner->append(v);
  }
  Tensor t;
  t.name = name;
  t.dtype = DataType::kBytes;
  t.shape = {static_cast<int64_t>(values.size())};
  t.byte_size = owner->size();
  t.data = AliasData(owner, owner->data());
  return t;
}

TEST(TfServingCodecTest, ResponsesInBothFormats) {
  InferResponse one;
  one.outputs.push_back(FloatTensor("y", {2, 2}, {1, 2, 3, 4}));
  EXPECT_EQ(*EncodeTfPredictResponse(one, TfFormat::kRow, 2), R"({"predictions":[[1.0,2.0],[3.0,4.0]]})");
  EXPECT_EQ(*EncodeTfPredictResponse(one, TfFormat::kColumnar, 0), R"({"outputs":[[1.0,2.0],[3.0,4.0]]})");
  InferResponse two = one;
  two.outputs.push_back(BytesTensor("label_bytes", {"a", std::string("\xff", 1)}));
  EXPECT_EQ(*EncodeTfPredictResponse(two, TfFormat::kRow, 2),
            R"({"predictions":[{"y":[1.0,2.0],"label_bytes":{"b64":"YQ=="}},{"y":[3.0,4.0],"label_bytes":{"b64":"/w=="}}]})");
  EXPECT_EQ(*EncodeTfPredictResponse(two, TfFormat::kColumnar, 0),
            R"({"outputs":{"y":[[1.0,2.0],[3.0,4.0]],"label_bytes":[{"b64":"YQ=="},{"b64":"/w=="}]}})");
  // An output without one entry per instance cannot be split into rows.
  auto mismatch = EncodeTfPredictResponse(one, TfFormat::kRow, 3);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("columnar"), std::string::npos);
}

TEST(TfServingCodecTest, NanAndInfinityStayValidJson) {
  InferResponse response;
  response.outputs.push_back(FloatTensor("y", {3}, {std::nanf(""), 1.0f / 0.0f, -1.0f / 0.0f}));
  EXPECT_EQ(*EncodeTfPredictResponse(response, TfFormat::kColumnar, 0), R"({"outputs":[NaN,Infinity,-Infinity]})");
}

TEST(TfServingCodecTest, Base64RoundTrips) {
  for (const std::string& text : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\x00\xff\x10", 3)}) {
    EXPECT_EQ(Base64Decode(Base64Encode(text)), text);
  }
  EXPECT_EQ(Base64Encode("hello"), "aGVsbG8=");
  EXPECT_EQ(Base64Decode("aGVsbG8"), "hello");  // padding optional
  EXPECT_FALSE(Base64Decode("a").has_value());
}

}  // namespace
}  // namespace inferd
