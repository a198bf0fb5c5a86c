// Concat of blocked activations along channels, on oneDNN's concat (so that Inception/DenseNet-style
// branches stay in the blocked layout); every other Concat is the reference kernel's.
//
// Transpose and Slice on oneDNN's reorder: the op's strided view of its input (strided_view.h)
// becomes the reorder's source descriptor, so the copy is JIT-vectorized and multi-threaded where
// the reference walks one element at a time (attention's head transposes and the QKV split are
// ~10% of a transformer's time otherwise). 4-byte types only (oneDNN has no 64-bit integers);
// other types, reversed slices and empty results take the reference kernel.
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "runtime/kernels/dnnl/dnnl_context.h"
#include "runtime/kernels/dnnl/dnnl_layout.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/strided_view.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using namespace dnnl_kernels;
using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;
using ViewOf = std::function<StatusOr<StridedView>(Inputs)>;

std::optional<dnnl::memory::data_type> ReorderType(DataType type) {
  switch (type) {
    case DataType::kFp32: return dnnl::memory::data_type::f32;
    case DataType::kInt32: return dnnl::memory::data_type::s32;
    default: return std::nullopt;
  }
}

class DnnlStridedCopy final : public Kernel {
 public:
  DnnlStridedCopy(ViewOf view_of, std::unique_ptr<Kernel> fallback)
      : view_of_(std::move(view_of)), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    if (in.empty() || in[0] == nullptr) return fallback_->Run(in, out);
    const auto type = ReorderType(in[0]->dtype);
    auto view = view_of_(in);
    if (!type || !view.ok() || view->shape.empty() || view->shape.size() > DNNL_MAX_NDIMS) {
      return fallback_->Run(in, out);  // the reference words any error
    }
    for (size_t d = 0; d < view->shape.size(); ++d) {
      if (view->shape[d] <= 0 || view->strides[d] < 0) return fallback_->Run(in, out);
    }
    return Guarded("reorder", [&]() -> Status {
      std::vector<int64_t> strides = view->strides;
      // Strides of size-1 dims do not matter to the copy; oneDNN wants them non-zero.
      for (size_t d = 0; d < strides.size(); ++d) {
        if (view->shape[d] == 1) strides[d] = 1;
      }
      const dnnl::memory::desc from(ToDims(view->shape), *type, dnnl::memory::dims(strides.begin(), strides.end()));
      const dnnl::memory::desc to(ToDims(view->shape), *type, ContiguousStrides(view->shape));
      // The reorder is made once per view (oneDNN's own primitive cache is off, dnnl_context.h):
      // made on every run, its JIT compilation took longer than the copy (bert_encoder's QKV
      // Slices and head Transposes, 0.4-0.5 ms each for 3 MB).
      const auto& [reorder, implementation] = FindOrCreate(reorders_, std::tuple{in[0]->dtype, view->shape, strides}, [&] {
        return dnnl::reorder::primitive_desc(Engine(), from, Engine(), to, OwnScratchpad());
      });
      ASSIGN_OR_RETURN(uint8_t * dst, AllocateOutput(&out[0], in[0]->dtype, view->shape));
      const uint8_t* src = in[0]->data.get() + view->offset * static_cast<int64_t>(DataTypeSize(in[0]->dtype));
      RunPrimitive(reorder, {{DNNL_ARG_FROM, Wrap(from, src)}, {DNNL_ARG_TO, dnnl::memory(to, Engine(), dst)}});
      ThreadStream().wait();
      last_ = implementation;
      return Status::Ok();
    });
  }

  void ForgetShapeSet(ShapeSetId shape_set) override { reorders_.Forget(shape_set); }

 private:
  ViewOf view_of_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::reorder, std::tuple<DataType, Shape, std::vector<int64_t>>> reorders_;  // by view
  std::string last_;
};

// Blocked inputs (the layout pass marks a channel Concat blocked only when all of them are) in,
// a blocked output out. Channel counts that are not a multiple of the block would put padding in
// the middle of the output: those go through the reference kernel in plain layout.
class DnnlBlockedConcat final : public Kernel {
 public:
  DnnlBlockedConcat(int64_t axis, Layouts layouts, std::unique_ptr<Kernel> fallback)
      : axis_(axis), layouts_(std::move(layouts)), fallback_(std::move(fallback)) {}
  std::string Implementation() const override { return last_.empty() ? "reference" : "onednn:" + last_; }
  void ForgetShapeSet(ShapeSetId shape_set) override { primitives_.Forget(shape_set); }

  Status Run(Inputs in, Outputs out) override {
    last_.clear();
    if (!layouts_.output(0) || in.empty()) return RunFallback(*fallback_, layouts_, in, out);
    Shape out_shape;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor* t = in[i];
      if (t == nullptr || !layouts_.input(i) || t->dtype != DataType::kFp32 || t->shape.size() != 4 ||
          (axis_ != 1 && axis_ != -3) || t->shape[1] % ChannelBlock() != 0) {
        return RunFallback(*fallback_, layouts_, in, out);
      }
      if (out_shape.empty()) {
        out_shape = t->shape;
        out_shape[1] = 0;
      }
      for (int d : {0, 2, 3}) {
        if (t->shape[d] != out_shape[d]) return RunFallback(*fallback_, layouts_, in, out);
      }
      out_shape[1] += t->shape[1];
      shapes.push_back(t->shape);
    }
    return Guarded("Concat", [&]() -> Status {
      auto& primitive = FindOrCreate(primitives_, shapes, [&] {
        std::vector<dnnl::memory::desc> sources;
        for (const Shape& shape : shapes) sources.push_back(BlockedDesc(shape, layouts_.channels_last));
        return dnnl::concat::primitive_desc(BlockedDesc(out_shape, layouts_.channels_last), 1, sources, Engine(), OwnScratchpad());
      });
      ASSIGN_OR_RETURN(float* dst, AllocateWithDesc(&out[0], out_shape, BlockedDesc(out_shape, layouts_.channels_last)));
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DST, Wrap(BlockedDesc(out_shape, layouts_.channels_last), dst)}};
      for (size_t i = 0; i < in.size(); ++i) {
        args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), Wrap(BlockedDesc(shapes[i], layouts_.channels_last), in[i]->data.get()));
      }
      RunPrimitive(primitive.first, std::move(args));
      ThreadStream().wait();
      last_ = primitive.second;
      return Status::Ok();
    });
  }

 private:
  int64_t axis_;
  Layouts layouts_;
  std::unique_ptr<Kernel> fallback_;
  PrimitiveMap<dnnl::concat, std::vector<Shape>> primitives_;
  std::string last_;
};

}  // namespace

void RegisterDnnlDataMovementKernels(KernelRegistry* r) {
  KernelFactory concat_reference = FactoryBefore(*r, "Concat");
  r->Register("Concat", 4, [concat_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, concat_reference(node, opset));
    ASSIGN_OR_RETURN(Layouts layouts, ReadLayouts(node));
    if (!layouts.any()) return fallback;  // plain tensors: the reference kernel's row copies
    ASSIGN_OR_RETURN(int64_t axis, node.Int("axis", 0));
    return std::unique_ptr<Kernel>(std::make_unique<DnnlBlockedConcat>(axis, std::move(layouts), std::move(fallback)));
  });
  KernelFactory transpose_reference = FactoryBefore(*r, "Transpose");
  r->Register("Transpose", 1, [transpose_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, transpose_reference(node, opset));
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, node.Ints("perm"));
    ViewOf view_of = [perm](Inputs in) { return TransposeView(in[0]->shape, perm); };
    return std::unique_ptr<Kernel>(std::make_unique<DnnlStridedCopy>(std::move(view_of), std::move(fallback)));
  });
  KernelFactory slice_reference = FactoryBefore(*r, "Slice");
  r->Register("Slice", 1, [slice_reference](const Node& node, int opset) -> StatusOr<std::unique_ptr<Kernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> fallback, slice_reference(node, opset));
    ASSIGN_OR_RETURN(SliceAttributes attributes, ReadSliceAttributes(node));
    ViewOf view_of = [attributes, opset](Inputs in) { return SliceView(in, opset, attributes); };
    return std::unique_ptr<Kernel>(std::make_unique<DnnlStridedCopy>(std::move(view_of), std::move(fallback)));
  });
}

}  // namespace inferd::runtime
