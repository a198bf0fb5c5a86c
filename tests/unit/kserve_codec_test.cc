#include "frontends/http/kserve_codec.h"
#include "frontends/http/lifecycle_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace inferd {
namespace {

StatusOr<ParsedInferRequest> Parse(const std::string& body,
                                   std::optional<size_t> json_length = std::nullopt) {
  return ParseInferRequest(std::make_shared<const std::string>(body), json_length);
}

std::string ErrorOf(const std::string& body, std::optional<size_t> json_length = std::nullopt) {
  auto parsed = Parse(body, json_length);
  return parsed.ok() ? "" : parsed.status().message();
}

TEST(KServeCodecTest, ParsesNestedAndFlatData) {
  for (const char* data : {"[[1,2,3],[4,5,6]]", "[1,2,3,4,5,6]"}) {
    auto parsed =
        Parse(std::string(R"({"id":"r1","inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":)") +
              data + "}]}");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const Tensor& x = parsed->request->inputs[0];
    EXPECT_EQ(parsed->request->id, "r1");
    EXPECT_EQ(x.shape, (Shape{2, 3}));
    EXPECT_EQ(x.byte_size, 24u);
    EXPECT_EQ(x.values<float>()[5], 6.0f);
  }
}

TEST(KServeCodecTest, KeepsOtherRequestParametersAndWritesResponseOnes) {
  auto parsed = Parse(R"({"parameters":{"priority":1,"tier":"gold","latency_budget_ms":300,"ratio":0.25,"fast":true},)"
                      R"("inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const InferParameters& got = parsed->request->parameters;
  ASSERT_EQ(got.size(), 4u);  // priority has its own field
  EXPECT_EQ(std::get<std::string>(FindParameter(got, "tier")->value), "gold");
  EXPECT_EQ(std::get<int64_t>(FindParameter(got, "latency_budget_ms")->value), 300);
  EXPECT_EQ(std::get<double>(FindParameter(got, "ratio")->value), 0.25);
  EXPECT_EQ(std::get<bool>(FindParameter(got, "fast")->value), true);
  EXPECT_NE(ErrorOf(R"({"parameters":{"tier":[1]},"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})")
                .find("parameter 'tier' must be a number, a string or a bool"),
            std::string::npos);
  InferResponse response;
  response.model_name = "r";
  SetParameter(response.parameters, "routed_to", std::string("model light"));
  SetParameter(response.parameters, "tier", int64_t{1});
  const std::string body = EncodeInferResponse(response, {}).body;
  EXPECT_NE(body.find(R"("parameters":{"routed_to":"model light","tier":1})"), std::string::npos) << body;
}

TEST(KServeCodecTest, ParsesEveryDatatype) {
  struct Case {
    const char* type;
    const char* data;
    size_t bytes;
  };
  for (const Case& c :
       {Case{"BOOL", "[true,false]", 2}, Case{"UINT8", "[0,255]", 2}, Case{"UINT16", "[1,65535]", 4},
        Case{"UINT32", "[1,2]", 8}, Case{"UINT64", "[1,18446744073709551615]", 16},
        Case{"INT8", "[-128,127]", 2}, Case{"INT16", "[-1,1]", 4}, Case{"INT32", "[-5,5]", 8},
        Case{"INT64", "[-9223372036854775808,1]", 16}, Case{"FP16", "[1.5,-2]", 4},
        Case{"BF16", "[1.5,-2]", 4}, Case{"FP32", "[1.5,-2]", 8}, Case{"FP64", "[1.5,-2]", 16}}) {
    auto parsed = Parse(std::string(R"({"inputs":[{"name":"x","shape":[2],"datatype":")") + c.type +
                        "\",\"data\":" + c.data + "}]}");
    ASSERT_TRUE(parsed.ok()) << c.type << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->request->inputs[0].byte_size, c.bytes) << c.type;
  }
}

TEST(KServeCodecTest, RejectsOutOfRangeAndWrongTypes) {
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[256]}]})")
                .find("not a valid UINT8"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[-129]}]})"), "");
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":["a"]}]})"), "");
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[1],"datatype":"BOOL","data":[1]}]})"), "");
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FLOAT","data":[1]}]})")
                .find("unknown datatype"),
            std::string::npos);
}

TEST(KServeCodecTest, ParsesBytes) {
  auto parsed = Parse(R"({"inputs":[{"name":"s","shape":[2],"datatype":"BYTES","data":["hi",""]}]})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->request->inputs[0].byte_size, 4u + 2 + 4);
}

TEST(KServeCodecTest, ClearErrorsForBadBodies) {
  EXPECT_NE(ErrorOf("{not json").find("malformed JSON"), std::string::npos);
  EXPECT_NE(ErrorOf("[1,2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(ErrorOf("{}").find("'inputs'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"inputs":[]})").find("empty"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]})")
                .find("needs 3 elements, data has 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1,2]}]})")
                .find("more elements"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(R"({"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}]})").find("non-negative"),
      std::string::npos);
  // A huge shape is refused before any allocation.
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[100000000000],"datatype":"FP32","data":[1]}]})")
                .find("too large"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32"}]})").find("needs 'data'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]} trailing)"), "");
}

std::string Binary(const std::string& json, const std::string& tail) { return json + tail; }

TEST(KServeCodecTest, BinaryInputsPointIntoTheBodyWhenAligned) {
  for (size_t padding = 0; padding < 4; ++padding) {
    const std::string json =
        R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]})" +
        std::string(padding, ' ');
    float value = 3.5f;
    // std::string storage is at least 8-byte aligned, so the offset alone decides alignment.
    auto body = std::make_shared<const std::string>(json + std::string(reinterpret_cast<char*>(&value), 4));
    auto parsed = ParseInferRequest(body, json.size());
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const Tensor& a = parsed->request->inputs[0];
    EXPECT_EQ(a.values<float>()[0], 3.5f);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data.get()) % 4, 0u);
    const bool in_body = a.data.get() == reinterpret_cast<const uint8_t*>(body->data()) + json.size();
    EXPECT_EQ(in_body, json.size() % 4 == 0) << "padding " << padding;
  }
}

TEST(KServeCodecTest, BinaryInputsAndOutputEncoding) {
  const std::string json =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},)"
      R"({"name":"b","shape":[1],"datatype":"INT32","data":[7]}],)"
      R"("outputs":[{"name":"o","parameters":{"binary_data":true}}]})";
  float values[2] = {1.5f, 2.5f};
  std::string tail(reinterpret_cast<char*>(values), 8);
  auto body = std::make_shared<const std::string>(Binary(json, tail));
  auto parsed = ParseInferRequest(body, json.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Tensor& a = parsed->request->inputs[0];
  EXPECT_EQ(a.values<float>()[1], 2.5f);
  EXPECT_TRUE(parsed->encoding.IsBinary("o"));
  EXPECT_FALSE(parsed->encoding.IsBinary("other"));
}

TEST(KServeCodecTest, BinaryLengthErrors) {
  const std::string json =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  EXPECT_NE(ErrorOf(json + std::string(8, '\0'), json.size() + 100).find("larger than the body"),
            std::string::npos);
  EXPECT_NE(ErrorOf(json + std::string(4, '\0'), json.size()).find("exceeds"), std::string::npos);
  EXPECT_NE(ErrorOf(json + std::string(12, '\0'), json.size()).find("not claimed"), std::string::npos);
}

TEST(KServeCodecTest, RequestParameters) {
  auto parsed = Parse(R"({"parameters":{"priority":2,"timeout":500,"binary_data_output":true},)"
                      R"("inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->request->priority, 2u);
  EXPECT_EQ(parsed->request->timeout_us, 500u);
  EXPECT_TRUE(parsed->encoding.IsBinary("anything"));
  EXPECT_NE(
      ErrorOf(
          R"({"parameters":{"priority":-1},"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})"),
      "");
}

TEST(KServeCodecTest, EncodesJsonAndBinaryOutputs) {
  auto storage = std::make_shared<std::vector<float>>(std::vector<float>{1.5f, -2});
  InferResponse response{
      "m", 3, "req", {{"y", DataType::kFp32, {1, 2}, AliasData(storage, storage->data()), 8}}};
  EncodedResponse json = EncodeInferResponse(response, {});
  EXPECT_FALSE(json.json_length.has_value());
  EXPECT_EQ(
      json.body,
      R"({"model_name":"m","model_version":"3","id":"req","outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"data":[1.5,-2.0]}]})");
  EncodedResponse binary = EncodeInferResponse(response, {.binary_by_default = true});
  ASSERT_TRUE(binary.json_length.has_value());
  EXPECT_EQ(binary.body.size(), *binary.json_length + 8);
  EXPECT_NE(binary.body.find("\"binary_data_size\":8"), std::string::npos);
  float tail[2];
  std::memcpy(tail, binary.body.data() + *binary.json_length, 8);
  EXPECT_EQ(tail[1], -2.0f);
}

TEST(KServeCodecTest, NanAndInfinityOutputsStayValidJson) {
  auto storage = std::make_shared<std::vector<float>>(std::vector<float>{std::nanf(""), 1.0f / 0.0f});
  InferResponse response{"m", 1, "", {{"y", DataType::kFp32, {2}, AliasData(storage, storage->data()), 8}}};
  EXPECT_NE(EncodeInferResponse(response, {}).body.find("\"data\":[NaN,Infinity]"), std::string::npos);
}

TEST(KServeCodecTest, ErrorJsonEscapes) { EXPECT_EQ(ErrorJson("a \"b\""), R"({"error":"a \"b\""})"); }

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

Tensor Int32Tensor(const std::string& name, std::vector<int32_t> values, Shape shape) {
  auto owned = std::make_shared<std::vector<int32_t>>(std::move(values));
  Tensor tensor{.name = name, .dtype = DataType::kInt32, .shape = std::move(shape)};
  tensor.data = AliasData(owned, owned->data());
  tensor.byte_size = owned->size() * 4;
  return tensor;
}

// The client's encoder feeds the server's parser, in both encodings.
TEST(KServeClientCodecTest, EncodedRequestParsesBack) {
  InferRequest request{.model_name = "m", .id = "r7", .priority = 2, .timeout_us = 900};
  request.inputs.push_back(Int32Tensor("a", {1, -2, 3, -4}, {2, 2}));
  request.requested_outputs = {"y"};
  for (bool binary : {true, false}) {
    EncodedRequest encoded = EncodeInferRequest(request, binary);
    EXPECT_EQ(encoded.json_length.has_value(), binary);
    auto parsed = ParseInferRequest(std::make_shared<const std::string>(encoded.body), encoded.json_length);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const InferRequest& back = *parsed->request;
    EXPECT_EQ(back.id, "r7");
    EXPECT_EQ(back.priority, 2u);
    EXPECT_EQ(back.timeout_us, 900u);
    EXPECT_EQ(back.requested_outputs, std::vector<std::string>{"y"});
    ASSERT_EQ(back.inputs.size(), 1u);
    EXPECT_EQ(back.inputs[0].shape, (Shape{2, 2}));
    EXPECT_EQ(back.inputs[0].values<int32_t>()[3], -4);
    EXPECT_EQ(parsed->encoding.IsBinary("y"), binary);
  }
}

// The server's encoder feeds the client's parser, binary and JSON outputs alike.
TEST(KServeClientCodecTest, EncodedResponseParsesBack) {
  InferResponse response{.model_name = "m", .model_version = 4, .id = "r1"};
  response.outputs.push_back(Int32Tensor("y", {5, 6, 7}, {1, 3}));
  response.outputs.push_back(Int32Tensor("z", {8}, {1, 1}));
  OutputEncoding encoding{.binary_outputs = {"y"}};
  EncodedResponse encoded = EncodeInferResponse(response, encoding);
  auto parsed = ParseInferResponse(std::make_shared<const std::string>(encoded.body), encoded.json_length);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->model_name, "m");
  EXPECT_EQ(parsed->model_version, 4);
  EXPECT_EQ(parsed->id, "r1");
  ASSERT_EQ(parsed->outputs.size(), 2u);
  EXPECT_EQ(parsed->outputs[0].values<int32_t>()[2], 7);
  EXPECT_EQ(parsed->outputs[1].values<int32_t>()[0], 8);
  EXPECT_FALSE(ParseInferResponse(std::make_shared<const std::string>("{\"outputs\": 3}"), std::nullopt).ok());
}

TEST(KServeCodecTest, LoadRequestOverrides) {
  auto empty = ParseLoadRequest("");
  ASSERT_TRUE(empty.ok() && empty->empty());
  auto no_parameters = ParseLoadRequest("{}");
  ASSERT_TRUE(no_parameters.ok() && no_parameters->empty());
  auto both = ParseLoadRequest(R"({"parameters": {"config": "{\"max_batch_size\": 2}", "file:1/model.onnx": "aGk="}})");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->config_json, R"({"max_batch_size": 2})");
  ASSERT_EQ(both->files.size(), 1u);
  EXPECT_EQ(both->files.at("1/model.onnx"), "hi");
  for (const char* bad : {"[]", "{\"parameters\": 3}", R"({"parameters": {"config": 3}})",
                          R"({"parameters": {"file:1/m": "@@"}})", R"({"parameters": {"x": "y"}})", R"({"other": 1})"}) {
    EXPECT_EQ(ParseLoadRequest(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(LifecycleCodecTest, TrafficRequests) {
  auto both = ParseTrafficRequest(R"({"split": {"1": 95, "2": 5}, "labels": {"stable": 1, "canary": "2"}})");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(*both->split, (TrafficSplit{{1, 95}, {2, 5}}));
  EXPECT_EQ(both->labels->at("canary"), 2);
  auto again = ParseTrafficRequest(EncodeTrafficRequest(*both));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again->split, *both->split);
  EXPECT_EQ(*again->labels, *both->labels);
  auto clear = ParseTrafficRequest(R"({"split": {}})");
  ASSERT_TRUE(clear.ok() && clear->split->empty() && !clear->labels);
  for (const char* bad : {"", "[]", "{}", R"({"split": []})", R"({"split": {"x": 1}})", R"({"split": {"1": -1}})",
                          R"({"split": {"0": 5}})", R"({"split": {"1": 2000000}})", R"({"labels": {"a": 0}})",
                          R"({"labels": {"": 1}})", R"({"other": 1})"}) {
    EXPECT_EQ(ParseTrafficRequest(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(LifecycleCodecTest, RolloutRequests) {
  auto plan = ParseRolloutRequest(R"({"version": 3, "baseline": "2", "steps": [10, 100], "dwell_seconds": 1.5,
      "max_error_rate": 0, "max_p99_ratio": 3, "min_requests": 5, "retention_seconds": 60})");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(plan->rollback);
  EXPECT_EQ(plan->plan.version, 3);
  EXPECT_EQ(plan->plan.baseline, 2);
  EXPECT_EQ(plan->plan.steps, (std::vector<uint32_t>{10, 100}));
  EXPECT_EQ(plan->plan.dwell.count(), 1500);
  EXPECT_EQ(plan->plan.max_error_rate, 0);
  EXPECT_EQ(plan->plan.min_requests, 5u);
  EXPECT_EQ(plan->plan.retention_seconds, 60);
  auto defaults = ParseRolloutRequest(R"({"version": 2})");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->plan.steps, (std::vector<uint32_t>{5, 20, 100}));
  EXPECT_FALSE(defaults->plan.retention_seconds);
  auto round_trip = ParseRolloutRequest(EncodeRolloutPlan(plan->plan));
  ASSERT_TRUE(round_trip.ok()) << round_trip.status().message();
  EXPECT_EQ(round_trip->plan.steps, plan->plan.steps);
  EXPECT_EQ(round_trip->plan.dwell, plan->plan.dwell);
  EXPECT_EQ(round_trip->plan.retention_seconds, 60);
  EXPECT_EQ(round_trip->plan.baseline, 2);
  auto rollback = ParseRolloutRequest(R"({"action": "rollback"})");
  ASSERT_TRUE(rollback.ok() && rollback->rollback);
  for (const char* bad : {"", "{}", R"({"version": 0})", R"({"version": 2, "steps": 5})", R"({"version": 2, "steps": [500]})",
                          R"({"version": 2, "dwell_seconds": -1})", R"({"version": 2, "min_requests": 1.5})",
                          R"({"version": 2, "color": "blue"})", R"({"action": "promote"})", R"({"action": "rollback", "version": 2})"}) {
    EXPECT_EQ(ParseRolloutRequest(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(LifecycleCodecTest, RolloutAgreementGuard) {
  auto plan = ParseRolloutRequest(
      R"({"version": 2, "agreement": {"min": 0.95, "mirror_percent": 25, "compare": "argmax", "tolerance": 0.01}})");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_TRUE(plan->plan.agreement);
  EXPECT_EQ(plan->plan.agreement->min_agreement, 0.95);
  EXPECT_EQ(plan->plan.agreement->mirror_percent, 25u);
  EXPECT_EQ(plan->plan.agreement->compare, AgreementGuard::Compare::kArgmax);
  EXPECT_EQ(plan->plan.agreement->tolerance, 0.01);
  auto defaults = ParseRolloutRequest(R"({"version": 2, "agreement": {"min": 0.9}})");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->plan.agreement->mirror_percent, 10u);
  EXPECT_EQ(defaults->plan.agreement->compare, AgreementGuard::Compare::kClose);
  EXPECT_FALSE(ParseRolloutRequest(R"({"version": 2})")->plan.agreement);
  // What the server answers holds the plan among other fields; a client reads the plan back.
  rapidjson::Document state;
  const std::string encoded = EncodeRolloutPlan(plan->plan);
  state.Parse(encoded.c_str());
  state.AddMember("state", "running", state.GetAllocator());
  auto read = ReadRolloutPlanFields(state);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_TRUE(read->agreement);
  EXPECT_EQ(read->agreement->mirror_percent, 25u);
  EXPECT_EQ(read->agreement->compare, AgreementGuard::Compare::kArgmax);
  EXPECT_EQ(read->version, 2);
  for (const char* bad : {R"({"version": 2, "agreement": 0.9})", R"({"version": 2, "agreement": {}})",
                          R"({"version": 2, "agreement": {"min": -1}})",
                          R"({"version": 2, "agreement": {"min": 0.9, "mirror_percent": 0}})",
                          R"({"version": 2, "agreement": {"min": 0.9, "mirror_percent": 101}})",
                          R"({"version": 2, "agreement": {"min": 0.9, "compare": "cosine"}})",
                          R"({"version": 2, "agreement": {"min": 0.9, "tolerance": "small"}})",
                          R"({"version": 2, "agreement": {"min": 0.9, "shadow": true}})"}) {
    EXPECT_EQ(ParseRolloutRequest(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(LifecycleCodecTest, FeedbackIsOneItemOrABatchWhoseBadItemsAreKeptAsInvalid) {
  auto one = ParseFeedbackRequest(R"({"id": "r1", "label": "cat"})");
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].id, "r1");
  EXPECT_EQ(std::get<std::string>((*one)[0].labels.at(0)), "cat");

  auto batch = ParseFeedbackRequest(
      R"({"feedback": [{"id": "a", "label": [1, 2.5]}, {"id": 7, "label": 1}, {"id": "b"}, {"id": "c", "label": []}, 3]})");
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  ASSERT_EQ(batch->size(), 5u);
  EXPECT_TRUE((*batch)[0].well_formed);
  EXPECT_EQ(std::get<double>((*batch)[0].labels.at(1)), 2.5);
  for (size_t i = 1; i < 5; ++i) EXPECT_FALSE((*batch)[i].well_formed) << i;

  for (const char* bad : {"", "[]", R"({"label": 1})", R"({"id": "", "label": 1})", R"({"feedback": 1})",
                          R"({"feedback": [], "id": "a"})"}) {
    auto parsed = ParseFeedbackRequest(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

TEST(KServeCodecTest, SharedMemoryInputsAndOutputs) {
  auto parsed = Parse(
      R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":{"shared_memory_region":"in",)"
      R"("shared_memory_byte_size":8,"shared_memory_offset":16}},{"name":"z","shape":[1],"datatype":"FP32","data":[3]}],)"
      R"("outputs":[{"name":"y","parameters":{"shared_memory_region":"out","shared_memory_byte_size":64}},{"name":"w"}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const InferRequest& request = *parsed->request;
  EXPECT_EQ(request.inputs[0].data, nullptr);
  EXPECT_EQ(request.inputs[0].byte_size, 8u);
  ASSERT_EQ(request.input_regions.size(), 1u);
  EXPECT_EQ(request.input_regions[0].second.offset, 16u);
  EXPECT_EQ(request.inputs[1].values<float>()[0], 3.0f);
  EXPECT_EQ(request.requested_outputs, (std::vector<std::string>{"y", "w"}));
  ASSERT_NE(FindRegion(request.output_regions, "y"), nullptr);
  EXPECT_EQ(FindRegion(request.output_regions, "y")->byte_size, 64u);

  // The answer names the region and the bytes written, and has no data for that output.
  InferResponse response{.model_name = "m", .outputs = {Tensor{.name = "y", .dtype = DataType::kFp32, .shape = {2}}}};
  response.output_regions = {{"y", {.region = "out", .byte_size = 8}}};
  const std::string body = EncodeInferResponse(response, {.binary_by_default = true}).body;
  EXPECT_NE(body.find(R"("parameters":{"shared_memory_region":"out","shared_memory_byte_size":8})"), std::string::npos) << body;
  EXPECT_EQ(body.find("\"data\""), std::string::npos) << body;
  auto back = ParseInferResponse(std::make_shared<const std::string>(body), std::nullopt);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_NE(FindRegion(back->output_regions, "y"), nullptr);

  // The client's encoding parses back to the same references.
  InferRequest client{.model_name = "m"};
  client.inputs = request.inputs;
  client.input_regions = request.input_regions;
  client.requested_outputs = {"y"};
  client.output_regions = request.output_regions;
  EncodedRequest encoded = EncodeInferRequest(client, /*binary=*/true);
  auto again = ParseInferRequest(std::make_shared<const std::string>(encoded.body), encoded.json_length);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->request->input_regions[0].second.region, "in");
  EXPECT_EQ(again->request->inputs[1].values<float>()[0], 3.0f);
  EXPECT_EQ(again->request->output_regions[0].second.region, "out");
}

TEST(KServeCodecTest, BadSharedMemoryParameters) {
  const std::string head = R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32",)";
  EXPECT_NE(ErrorOf(head + R"("parameters":{"shared_memory_region":"r"}}]})").find("needs both shared_memory_region"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"("parameters":{"shared_memory_byte_size":4}}]})").find("needs both"), std::string::npos);
  EXPECT_NE(ErrorOf(head + R"("parameters":{"shared_memory_region":"r","shared_memory_byte_size":-4}}]})")
                .find("shared_memory_byte_size' must be a non-negative integer"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"("data":[1],"parameters":{"shared_memory_region":"r","shared_memory_byte_size":4}}]})")
                .find("must be absent with shared_memory_region"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"("data":[1]}],"outputs":[{"name":"y","parameters":{"shared_memory_region":3,)"
                           R"("shared_memory_byte_size":4}}]})")
                .find("output 'y'"),
            std::string::npos);
}

}  // namespace
}  // namespace inferd
