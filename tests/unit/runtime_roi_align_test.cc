// RoiAlign (kernels/roi_align.cc): the conformance tests cover avg mode; these pin max mode (ONNX's
// reference takes the largest weighted corner) and the two coordinate transformations by hand.
#include <gtest/gtest.h>

#include "runtime/kernels/tensor_util.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace inferd::runtime {
namespace {

using namespace testing_util;

float RoiAlignOne(const std::string& mode, const std::string& transformation) {
  Tensor x, rois, indices;
  float* xv = AllocateOutputAs<float>(&x, DataType::kFp32, {1, 1, 2, 2}).value();
  const float plane[] = {1, 2, 3, 4};
  std::copy(plane, plane + 4, xv);
  float* box = AllocateOutputAs<float>(&rois, DataType::kFp32, {1, 4}).value();
  const float whole[] = {0, 0, 2, 2};
  std::copy(whole, whole + 4, box);
  *AllocateOutputAs<int64_t>(&indices, DataType::kInt64, {1}).value() = 0;
  Graph g = GraphBuilder()
                .Constant("x", x)
                .Constant("rois", rois)
                .Constant("indices", indices)
                .Op("RoiAlign", {"x", "rois", "indices"}, {"y"},
                    {{"mode", String(mode)}, {"coordinate_transformation_mode", String(transformation)},
                     {"sampling_ratio", Int(1)}})
                .Output("y")
                .graph();
  g.values[static_cast<size_t>(*g.FindValue("indices"))].dtype = DataType::kInt64;
  SessionOptions options;
  options.optimize = false;
  auto session = Session::FromGraph(g, options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> outputs;
  Status status = (*session)->Run({}, &outputs);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return ValuesOf<float>(outputs[0])[0];
}

TEST(RoiAlignTest, OneSampleAtTheCentre) {
  // half_pixel: the box [-0.5, 1.5]^2 has its one sample at (0.5, 0.5), a quarter of each pixel.
  EXPECT_FLOAT_EQ(RoiAlignOne("avg", "half_pixel"), 2.5f);
  EXPECT_FLOAT_EQ(RoiAlignOne("max", "half_pixel"), 1.0f);  // max of 0.25 * {1, 2, 3, 4}
  // output_half_pixel: the box [0, 2]^2 samples (1, 1), the last pixel.
  EXPECT_FLOAT_EQ(RoiAlignOne("avg", "output_half_pixel"), 4.0f);
}

}  // namespace
}  // namespace inferd::runtime
