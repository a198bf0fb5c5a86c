#include "frontends/grpc/grpc_codec.h"

#include <gtest/gtest.h>

#include <cstring>

namespace inferd {
namespace {

using inference::ModelInferRequest;

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest* request, const std::string& name,
                                             const std::string& datatype, Shape shape) {
  auto* input = request->add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  for (int64_t dim : shape) input->add_shape(dim);
  return input;
}

ModelInferRequest Request() {
  ModelInferRequest request;
  request.set_model_name("m");
  return request;
}

StatusOr<std::unique_ptr<InferRequest>> Parse(const ModelInferRequest& request) {
  return ParseModelInferRequest(std::make_shared<const ModelInferRequest>(request));
}

std::string ErrorOf(const ModelInferRequest& request) {
  auto parsed = Parse(request);
  return parsed.ok() ? "" : parsed.status().message();
}

TEST(GrpcCodecTest, RawInputsPointIntoTheMessage) {
  ModelInferRequest request = Request();
  request.set_model_version("2");
  request.set_id("r1");
  AddInput(&request, "x", "FP32", {2, 3});
  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values.data()), 24));
  auto message = std::make_shared<const ModelInferRequest>(request);
  auto parsed = ParseModelInferRequest(message);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const InferRequest& r = **parsed;
  EXPECT_EQ(r.model_name, "m");
  EXPECT_EQ(r.model_version, 2);
  EXPECT_EQ(r.id, "r1");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].shape, (Shape{2, 3}));
  EXPECT_EQ(r.inputs[0].byte_size, 24u);
  EXPECT_EQ(r.inputs[0].values<float>()[5], 6.0f);
  // Zero copy: the tensor is the message's own bytes, kept alive by the tensor.
  EXPECT_EQ(static_cast<const void*>(r.inputs[0].data.get()),
            static_cast<const void*>(message->raw_input_contents(0).data()));
  std::weak_ptr<const ModelInferRequest> weak = message;
  message.reset();
  EXPECT_FALSE(weak.expired());
}

TEST(GrpcCodecTest, TypedContentsOfEveryFamily) {
  ModelInferRequest request = Request();
  AddInput(&request, "b", "BOOL", {2})->mutable_contents()->add_bool_contents(true);
  request.mutable_inputs(0)->mutable_contents()->add_bool_contents(false);
  auto* i8 = AddInput(&request, "i8", "INT8", {1})->mutable_contents();
  i8->add_int_contents(-7);
  auto* i64 = AddInput(&request, "i64", "INT64", {1})->mutable_contents();
  i64->add_int64_contents(int64_t{1} << 40);
  auto* u16 = AddInput(&request, "u16", "UINT16", {1})->mutable_contents();
  u16->add_uint_contents(65535);
  auto* u64 = AddInput(&request, "u64", "UINT64", {1})->mutable_contents();
  u64->add_uint64_contents(~uint64_t{0});
  auto* f32 = AddInput(&request, "f32", "FP32", {1})->mutable_contents();
  f32->add_fp32_contents(1.5f);
  auto* f64 = AddInput(&request, "f64", "FP64", {1})->mutable_contents();
  f64->add_fp64_contents(-2.25);
  auto* s = AddInput(&request, "s", "BYTES", {2})->mutable_contents();
  s->add_bytes_contents("hi");
  s->add_bytes_contents("");
  auto parsed = Parse(request);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto& inputs = (*parsed)->inputs;
  EXPECT_EQ(inputs[0].values<uint8_t>()[0], 1);
  EXPECT_EQ(inputs[0].values<uint8_t>()[1], 0);
  EXPECT_EQ(inputs[1].values<int8_t>()[0], -7);
  EXPECT_EQ(inputs[2].values<int64_t>()[0], int64_t{1} << 40);
  EXPECT_EQ(inputs[3].values<uint16_t>()[0], 65535);
  EXPECT_EQ(inputs[4].values<uint64_t>()[0], ~uint64_t{0});
  EXPECT_EQ(inputs[5].values<float>()[0], 1.5f);
  EXPECT_EQ(inputs[6].values<double>()[0], -2.25);
  // BYTES: each element a 4-byte little-endian length, then its bytes.
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(inputs[7].data.get()), inputs[7].byte_size),
            std::string("\x02\0\0\0hi\0\0\0\0", 10));
}

TEST(GrpcCodecTest, RefusesValuesTheTypeCannotHold) {
  ModelInferRequest request = Request();
  AddInput(&request, "x", "INT8", {1})->mutable_contents()->add_int_contents(300);
  EXPECT_NE(ErrorOf(request).find("out of range for INT8"), std::string::npos) << ErrorOf(request);
}

TEST(GrpcCodecTest, StructuralErrorsAreInvalidArgument) {
  struct Case {
    const char* what;
    std::function<void(ModelInferRequest*)> change;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"no model", [](ModelInferRequest* r) { r->clear_model_name(); }, "model_name is empty"},
      {"bad version", [](ModelInferRequest* r) { r->set_model_version("x1"); }, "not a positive integer"},
      {"zero version", [](ModelInferRequest* r) { r->set_model_version("0"); }, "not a positive integer"},
      {"no inputs", [](ModelInferRequest* r) { r->clear_inputs(); }, "no inputs"},
      {"unknown type", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_datatype("FP8"); },
       "unknown datatype 'FP8'"},
      {"negative dim", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_shape(0, -1); }, "non-negative"},
      {"too few values", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_shape(0, 3); },
       "needs 3 values, contents.fp32_contents has 2"},
      {"wrong field", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_datatype("INT32"); },
       "contents.int_contents has 0"},
      {"huge shape", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_shape(0, int64_t{1} << 62); },
       "input 'x'"},
      {"fp16 typed", [](ModelInferRequest* r) { r->mutable_inputs(0)->set_datatype("FP16"); },
       "send it in raw_input_contents"},
      {"raw count", [](ModelInferRequest* r) { r->add_raw_input_contents("abcdefgh"); r->add_raw_input_contents(""); },
       "raw_input_contents has 2 entries for 1 inputs"},
      {"raw and typed", [](ModelInferRequest* r) { r->add_raw_input_contents("abcdefgh"); },
       "contents must be empty when raw_input_contents is used"},
      {"unnamed output", [](ModelInferRequest* r) { r->add_outputs(); }, "requested output has no name"},
      {"string priority",
       [](ModelInferRequest* r) { (*r->mutable_parameters())["priority"].set_string_param("high"); },
       "parameter 'priority'"},
      {"negative timeout",
       [](ModelInferRequest* r) { (*r->mutable_parameters())["timeout"].set_int64_param(-5); },
       "parameter 'timeout'"},
  };
  for (const Case& c : cases) {
    ModelInferRequest request = Request();
    auto* contents = AddInput(&request, "x", "FP32", {2})->mutable_contents();
    contents->add_fp32_contents(1);
    contents->add_fp32_contents(2);
    ASSERT_EQ(ErrorOf(request), "");
    c.change(&request);
    auto parsed = Parse(request);
    ASSERT_FALSE(parsed.ok()) << c.what;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(parsed.status().message().find(c.expected), std::string::npos)
        << c.what << ": " << parsed.status().message();
  }
}

TEST(GrpcCodecTest, ReadsPriorityTimeoutAndRequestedOutputs) {
  ModelInferRequest request = Request();
  AddInput(&request, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1);
  (*request.mutable_parameters())["priority"].set_uint64_param(2);
  (*request.mutable_parameters())["timeout"].set_int64_param(5000);
  (*request.mutable_parameters())["something_else"].set_bool_param(true);  // kept for routers' param.NAME
  request.add_outputs()->set_name("y");
  auto parsed = Parse(request);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)->priority, 2u);
  EXPECT_EQ((*parsed)->timeout_us, 5000u);
  EXPECT_EQ((*parsed)->requested_outputs, std::vector<std::string>{"y"});
  ASSERT_EQ((*parsed)->parameters.size(), 1u);  // priority and timeout have fields of their own
  EXPECT_EQ((*parsed)->parameters[0].name, "something_else");
  EXPECT_EQ(std::get<bool>((*parsed)->parameters[0].value), true);
}

TEST(GrpcCodecTest, OtherParametersRoundTripBothWays) {
  InferRequest request;
  request.model_name = "router";
  request.parameters = {{"tier", std::string("edge")}, {"latency_budget_ms", int64_t{250}}, {"ratio", 0.5}};
  ModelInferRequest message;
  EncodeModelInferRequest(request, &message);
  auto shared = std::make_shared<ModelInferRequest>(message);
  AddInput(shared.get(), "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1);
  auto parsed = ParseModelInferRequest(shared);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const InferParameters& got = (*parsed)->parameters;
  EXPECT_EQ(std::get<std::string>(FindParameter(got, "tier")->value), "edge");
  EXPECT_EQ(std::get<int64_t>(FindParameter(got, "latency_budget_ms")->value), 250);
  EXPECT_EQ(std::get<double>(FindParameter(got, "ratio")->value), 0.5);

  InferResponse response;
  response.model_name = "router";
  response.model_version = 1;
  SetParameter(response.parameters, "routed_to", std::string("pool cloud"));
  SetParameter(response.parameters, "tier", int64_t{2});
  inference::ModelInferResponse encoded;
  EncodeModelInferResponse(response, &encoded);
  EXPECT_EQ(encoded.parameters().at("routed_to").string_param(), "pool cloud");
  EXPECT_EQ(encoded.parameters().at("tier").int64_param(), 2);
  auto back = ParseModelInferResponse(std::make_shared<inference::ModelInferResponse>(encoded));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<std::string>(FindParameter(back->parameters, "routed_to")->value), "pool cloud");
}

TEST(GrpcCodecTest, EncodesOutputsRaw) {
  InferResponse response;
  response.model_name = "m";
  response.model_version = 3;
  response.id = "r9";
  auto values = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{1, -2, 3, -4});
  Tensor y{.name = "y", .dtype = DataType::kInt32, .shape = {2, 2}};
  y.data = AliasData(values, values->data());
  y.byte_size = 16;
  response.outputs.push_back(y);
  Tensor empty{.name = "e", .dtype = DataType::kFp32, .shape = {0}};
  response.outputs.push_back(empty);
  inference::ModelInferResponse out;
  EncodeModelInferResponse(response, &out);
  EXPECT_EQ(out.model_name(), "m");
  EXPECT_EQ(out.model_version(), "3");
  EXPECT_EQ(out.id(), "r9");
  ASSERT_EQ(out.outputs_size(), 2);
  EXPECT_EQ(out.outputs(0).datatype(), "INT32");
  EXPECT_EQ(out.outputs(0).shape_size(), 2);
  ASSERT_EQ(out.raw_output_contents_size(), 2);
  ASSERT_EQ(out.raw_output_contents(0).size(), 16u);
  int32_t last = 0;
  std::memcpy(&last, out.raw_output_contents(0).data() + 12, 4);
  EXPECT_EQ(last, -4);
  EXPECT_TRUE(out.raw_output_contents(1).empty());
}

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

// The client's side of the codec against the server's.
TEST(GrpcClientCodecTest, RequestAndResponseRoundTrip) {
  auto values = std::make_shared<std::vector<float>>(std::vector<float>{1.5f, -2.5f});
  Tensor x{.name = "x", .dtype = DataType::kFp32, .shape = {1, 2}};
  x.data = AliasData(values, values->data());
  x.byte_size = 8;
  InferRequest request{.model_name = "m", .model_version = 3, .id = "q", .priority = 1, .timeout_us = 77};
  request.inputs = {x};
  request.requested_outputs = {"y"};
  auto message = std::make_shared<inference::ModelInferRequest>();
  EncodeModelInferRequest(request, message.get());
  auto parsed = ParseModelInferRequest(message);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ((*parsed)->model_version, 3);
  EXPECT_EQ((*parsed)->priority, 1u);
  EXPECT_EQ((*parsed)->timeout_us, 77u);
  EXPECT_EQ((*parsed)->requested_outputs, std::vector<std::string>{"y"});
  EXPECT_EQ((*parsed)->inputs[0].values<float>()[1], -2.5f);

  InferResponse response{.model_name = "m", .model_version = 3, .id = "q", .outputs = {x}};
  auto encoded = std::make_shared<inference::ModelInferResponse>();
  EncodeModelInferResponse(response, encoded.get());
  auto back = ParseModelInferResponse(encoded);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->model_version, 3);
  EXPECT_EQ(back->outputs[0].shape, (Shape{1, 2}));
  EXPECT_EQ(back->outputs[0].values<float>()[0], 1.5f);
  encoded->add_raw_output_contents("extra");
  EXPECT_FALSE(ParseModelInferResponse(encoded).ok());
}

TEST(GrpcCodecTest, TrafficAndRolloutMessages) {
  lifecycle::TrafficRequest request;
  request.set_model_name("m");
  EXPECT_EQ(ParseTrafficChange(request).status().code(), StatusCode::kInvalidArgument);  // nothing to set
  (*request.mutable_split()->mutable_weights())[1] = 95;
  (*request.mutable_split()->mutable_weights())[2] = 5;
  auto change = ParseTrafficChange(request);
  ASSERT_TRUE(change.ok());
  EXPECT_EQ(*change->split, (TrafficSplit{{1, 95}, {2, 5}}));
  EXPECT_FALSE(change->labels);
  (*request.mutable_labels()->mutable_labels())["stable"] = 0;
  EXPECT_EQ(ParseTrafficChange(request).status().code(), StatusCode::kInvalidArgument);

  lifecycle::RolloutPlan plan;
  EXPECT_EQ(ParseRolloutPlan(plan).status().code(), StatusCode::kInvalidArgument);  // no version
  plan.set_version(2);
  auto defaults = ParseRolloutPlan(plan);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->steps, (std::vector<uint32_t>{5, 20, 100}));
  EXPECT_EQ(defaults->max_error_rate, 0.01);
  plan.set_max_error_rate(0);
  plan.set_dwell_seconds(2.5);
  plan.add_steps(50);
  plan.add_steps(100);
  auto set = ParseRolloutPlan(plan);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->max_error_rate, 0);
  EXPECT_EQ(set->dwell.count(), 2500);
  EXPECT_EQ(set->steps, (std::vector<uint32_t>{50, 100}));
  lifecycle::RolloutPlan encoded;
  EncodeRolloutPlan(*set, &encoded);
  EXPECT_EQ(ParseRolloutPlan(encoded)->steps, set->steps);
  EXPECT_FALSE(ParseRolloutPlan(encoded)->agreement);

  plan.mutable_agreement()->set_min(0.9);
  auto guarded = ParseRolloutPlan(plan);
  ASSERT_TRUE(guarded.ok() && guarded->agreement);
  EXPECT_EQ(guarded->agreement->min_agreement, 0.9);
  EXPECT_EQ(guarded->agreement->mirror_percent, 10u);  // unset: the default
  EXPECT_EQ(guarded->agreement->compare, AgreementGuard::Compare::kClose);
  guarded->agreement->compare = AgreementGuard::Compare::kArgmax;
  guarded->agreement->mirror_percent = 30;
  EncodeRolloutPlan(*guarded, &encoded);
  auto decoded = ParseRolloutPlan(encoded);
  ASSERT_TRUE(decoded.ok() && decoded->agreement);
  EXPECT_EQ(decoded->agreement->compare, AgreementGuard::Compare::kArgmax);
  EXPECT_EQ(decoded->agreement->mirror_percent, 30u);
  plan.mutable_agreement()->set_compare("cosine");
  EXPECT_EQ(ParseRolloutPlan(plan).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd

namespace inferd {
namespace {

TEST(GrpcCodecTest, SharedMemoryInputsAndOutputsRoundTripAndKeepRawPositions) {
  auto values = std::make_shared<std::vector<float>>(std::vector<float>{1.5f, -2.5f});
  Tensor a{.name = "a", .dtype = DataType::kFp32, .shape = {2}};
  a.data = AliasData(values, values->data());
  a.byte_size = 8;
  Tensor b{.name = "b", .dtype = DataType::kFp32, .shape = {2}, .data = nullptr, .byte_size = 8};
  InferRequest request{.model_name = "m"};
  request.inputs = {b, a};  // the shared-memory input first: raw contents skip it
  request.input_regions = {{"b", {.region = "in", .offset = 64, .byte_size = 8}}};
  request.requested_outputs = {"y", "z"};
  request.output_regions = {{"y", {.region = "out", .byte_size = 100}}};
  auto message = std::make_shared<inference::ModelInferRequest>();
  EncodeModelInferRequest(request, message.get());
  EXPECT_EQ(message->raw_input_contents_size(), 1);
  auto parsed = ParseModelInferRequest(message);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ((*parsed)->inputs.size(), 2u);
  EXPECT_EQ((*parsed)->inputs[0].data, nullptr);
  EXPECT_EQ((*parsed)->inputs[0].byte_size, 8u);
  EXPECT_EQ((*parsed)->inputs[1].values<float>()[1], -2.5f);
  const SharedMemoryRef* in = FindRegion((*parsed)->input_regions, "b");
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->region, "in");
  EXPECT_EQ(in->offset, 64u);
  const SharedMemoryRef* out = FindRegion((*parsed)->output_regions, "y");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->byte_size, 100u);
  EXPECT_EQ(FindRegion((*parsed)->output_regions, "z"), nullptr);

  // The answer: y went to shared memory, z travels raw; both keep their raw_output_contents slot.
  Tensor y{.name = "y", .dtype = DataType::kFp32, .shape = {2}};
  InferResponse response{.model_name = "m", .model_version = 1, .outputs = {y, a}};
  response.outputs[1].name = "z";
  response.output_regions = {{"y", {.region = "out", .byte_size = 8}}};
  auto encoded = std::make_shared<inference::ModelInferResponse>();
  EncodeModelInferResponse(response, encoded.get());
  ASSERT_EQ(encoded->raw_output_contents_size(), 2);
  EXPECT_TRUE(encoded->raw_output_contents(0).empty());
  EXPECT_EQ(encoded->raw_output_contents(1).size(), 8u);
  EXPECT_EQ(encoded->outputs(0).parameters().at("shared_memory_region").string_param(), "out");
  auto back = ParseModelInferResponse(encoded);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_NE(FindRegion(back->output_regions, "y"), nullptr);
  EXPECT_EQ(FindRegion(back->output_regions, "y")->byte_size, 8u);
  EXPECT_EQ(back->outputs[1].values<float>()[0], 1.5f);
}

TEST(GrpcCodecTest, BadSharedMemoryParametersAreInvalidArgument) {
  auto with = [](auto edit) {
    ModelInferRequest request = Request();
    AddInput(&request, "x", "FP32", {2});
    edit(&request);
    return ErrorOf(request);
  };
  EXPECT_NE(with([](ModelInferRequest* r) {
              (*r->mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("r");
            }).find("needs both shared_memory_region"),
            std::string::npos);
  EXPECT_NE(with([](ModelInferRequest* r) {
              (*r->mutable_inputs(0)->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
            }).find("needs both"),
            std::string::npos);
  EXPECT_NE(with([](ModelInferRequest* r) {
              auto& parameters = *r->mutable_inputs(0)->mutable_parameters();
              parameters["shared_memory_region"].set_string_param("r");
              parameters["shared_memory_byte_size"].set_int64_param(-8);
            }).find("shared_memory_byte_size"),
            std::string::npos);
  EXPECT_NE(with([](ModelInferRequest* r) {
              auto& parameters = *r->mutable_inputs(0)->mutable_parameters();
              parameters["shared_memory_region"].set_string_param("r");
              parameters["shared_memory_byte_size"].set_int64_param(8);
              r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
            }).find("contents must be empty with shared_memory_region"),
            std::string::npos);
  EXPECT_NE(with([](ModelInferRequest* r) {
              auto& parameters = *r->mutable_inputs(0)->mutable_parameters();
              parameters["shared_memory_region"].set_string_param("r");
              parameters["shared_memory_byte_size"].set_int64_param(8);
              r->add_raw_input_contents("abcdefgh");
            }).find("raw_input_contents has 1 entries for 0 inputs"),
            std::string::npos);
  EXPECT_NE(with([](ModelInferRequest* r) {
              r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
              r->mutable_inputs(0)->mutable_contents()->add_fp32_contents(2);
              auto* output = r->add_outputs();
              output->set_name("y");
              (*output->mutable_parameters())["shared_memory_offset"].set_int64_param(4);
            }).find("output 'y'"),
            std::string::npos);
}

}  // namespace
}  // namespace inferd
