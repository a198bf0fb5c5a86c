// oneDNN resampling for the Resize and Upsample cases whose ONNX definition is what oneDNN
// computes (FP32, 3-D to 5-D, batch and channels kept, the scale per spatial dim equal to
// output / input):
//   - linear with half_pixel (or pytorch_half_pixel with every output size above 1): oneDNN
//     maps output x to (x + 0.5) / F - 0.5 and clamps at the edges, as ONNX's reference does;
//   - nearest with half_pixel + round_prefer_ceil: oneDNN rounds that same coordinate half up;
//   - nearest with asymmetric + floor (PyTorch's nearest upsampling, Upsample) when every factor
//     is a whole number: floor(x / F) equals floor((x + 0.5) / F) then.
// Everything else runs on the reference kernel (kernels/resize.cc).
#include <cmath>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/resize.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

// The oneDNN algorithm that computes this resize exactly as ONNX defines it, if one does.
std::optional<dnnl::algorithm> OneDnnAlgorithm(const ResizeAttributes& a, const Shape& in, const ResizeGeometry& g) {
  const size_t rank = in.size();
  if (rank < 3 || rank > 5 || g.out_shape[0] != in[0] || g.out_shape[1] != in[1]) return std::nullopt;
  bool whole_factors = true, outputs_above_one = true;
  for (size_t d = 2; d < rank; ++d) {
    if (in[d] == 0 || g.out_shape[d] == 0) return std::nullopt;
    const double factor = static_cast<double>(g.out_shape[d]) / static_cast<double>(in[d]);
    // ONNX maps coordinates with the given scale, oneDNN with output / input.
    if (std::abs(factor - g.scale[d]) > 1e-6 * factor) return std::nullopt;
    whole_factors &= g.out_shape[d] % in[d] == 0;
    outputs_above_one &= g.out_shape[d] > 1;
  }
  if (a.mode == ResizeMode::kLinear) {
    if (a.coordinates == "half_pixel" || (a.coordinates == "pytorch_half_pixel" && outputs_above_one)) {
      return dnnl::algorithm::resampling_linear;
    }
    return std::nullopt;
  }
  if (a.mode == ResizeMode::kNearest) {
    if ((a.coordinates == "half_pixel" && a.nearest_mode == "round_prefer_ceil") ||
        (a.coordinates == "asymmetric" && a.nearest_mode == "floor" && whole_factors)) {
      return dnnl::algorithm::resampling_nearest;
    }
  }
  return std::nullopt;
}

class DnnlResize final : public Kernel {
 public:
  DnnlResize(ResizeAttributes attributes, int opset, std::vector<float> upsample_scales, bool upsample,
             std::unique_ptr<Kernel> fallback)
      : attributes_(std::move(attributes)),
        opset_(opset),
        upsample_scales_(std::move(upsample_scales)),
        upsample_(upsample),
        fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { primitives_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    const Tensor* x = InputAt(in, 0);
    if (x == nullptr || x->dtype != DataType::kFp32) return fallback_->Run(in, out);
    ResizeRequest request;
    if (upsample_) {
      request.scales = upsample_scales_;
      if (opset_ >= 9) {
        const Tensor* scales = InputAt(in, 1);
        if (scales == nullptr || scales->dtype != DataType::kFp32) return fallback_->Run(in, out);
        request.scales.assign(ValuesOf<float>(*scales), ValuesOf<float>(*scales) + ElementsOf(*scales));
      }
    } else {
      ASSIGN_OR_RETURN(request, ReadResizeInputs(in, opset_));
    }
    auto geometry = ResolveResize(x->shape, request);
    if (!geometry.ok()) return fallback_->Run(in, out);  // the reference kernel words the error
    const std::optional<dnnl::algorithm> algorithm = OneDnnAlgorithm(attributes_, x->shape, *geometry);
    if (!algorithm) return fallback_->Run(in, out);
    return Guarded("Resize", [&]() -> Status {
      auto& [primitive, implementation] = FindOrCreate(primitives_, std::make_pair(x->shape, geometry->out_shape), [&] {
        return dnnl::resampling_forward::primitive_desc(
            dnnl::resampling_forward::desc(dnnl::prop_kind::forward_inference, *algorithm, PlainDesc(ToDims(x->shape)),
                                           PlainDesc(ToDims(geometry->out_shape))),
            OwnScratchpad(), Engine());
      });
      if (implementation.rfind("ref", 0) == 0) return fallback_->Run(in, out);
      ASSIGN_OR_RETURN(float* dst, AllocateOutputAs<float>(&out[0], DataType::kFp32, geometry->out_shape));
      RunPrimitive(primitive, {{DNNL_ARG_SRC, Wrap(PlainDesc(ToDims(x->shape)), x->data.get())},
                                         {DNNL_ARG_DST, Wrap(PlainDesc(ToDims(geometry->out_shape)), dst)}});
      ThreadStream().wait();
      last_ = implementation;
      return Status::Ok();
    });
  }

 private:
  ResizeAttributes attributes_;
  int opset_;
  std::vector<float> upsample_scales_;
  bool upsample_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::resampling_forward, std::pair<Shape, Shape>> primitives_;
  std::string last_;
};

}  // namespace

void RegisterDnnlResizeKernels(KernelRegistry* r) {
  for (const char* op : {"Resize", "Upsample"}) {
    const bool upsample = std::string_view(op) == "Upsample";
    KernelFactory reference = FactoryBefore(*r, op);
    if (!reference) continue;
    r->Register(op, upsample ? 7 : 10, [reference, upsample](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, reference(node, opset));
      ASSIGN_OR_RETURN(ResizeAttributes attributes, ReadResizeAttributes(node, opset, upsample));
      std::vector<float> scales;
      if (upsample) {
        ASSIGN_OR_RETURN(scales, node.Floats("scales"));
      }
      return std::unique_ptr<Kernel>(
          std::make_unique<DnnlResize>(std::move(attributes), opset, std::move(scales), upsample, std::move(fallback)));
    });
  }
}

}  // namespace inferd::runtime
