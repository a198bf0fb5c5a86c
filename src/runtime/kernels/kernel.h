// One kernel per node. A kernel is built at load from its node (attributes are checked there, so a
// bad model fails at load, never at run time) and runs many times.
//
// Run gets one pointer per node input (nullptr where an optional input is absent) and fills one
// Tensor per node output. Kernels never keep pointers to their inputs between runs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/ir/graph.h"
#include "runtime/run_context.h"

namespace inferd::runtime {

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status Run(std::span<const Tensor* const> inputs, std::span<Tensor> outputs) = 0;
  // What ran last: "reference", or "onednn:<oneDNN's implementation name>" (for --dump-graph and
  // for tests that must know the fast path really ran).
  virtual std::string Implementation() const { return "reference"; }
  // Whether output 0 may take over input `input`'s buffer when this node is the last to read it:
  // the memory plan then gives both one arena slot, which saves a copy (a convolution's fused
  // residual Add otherwise copies the residual into its output first) or a pass over fresh memory.
  // A kernel that says so must produce the right output when out[0]'s slot is that input's buffer.
  virtual bool OutputMayReuseInput(size_t /*input*/) const { return false; }
  // The session forgot one of its input shape sets (SessionOptions::max_shape_sets): drop what was
  // prepared for it and for no shape set still kept (kernels/shape_plans.h does the bookkeeping).
  // What every shape shares, such as a layer's weights in its settled form, stays.
  virtual void ForgetShapeSet(ShapeSetId /*shape_set*/) {}
};

using KernelFactory = std::function<StatusOr<std::unique_ptr<Kernel>>(const Node& node, int opset)>;

// Op type -> factory, for the default ONNX domain and inferd's own (filed as "inferd.<op>"). A factory handles every opset from the one it
// was registered with; it reads `opset` where an op's signature changed (e.g. Squeeze's axes moved
// from an attribute to an input in opset 13).
class KernelRegistry {
 public:
  void Register(std::string op_type, int since_opset, KernelFactory factory);
  // nullptr when the op (in that domain and opset) has no kernel.
  const KernelFactory* Find(std::string_view op_type, std::string_view domain, int opset) const;
  std::vector<std::string> OpTypes() const;

  // The fast kernels (oneDNN), each falling back to its reference kernel where it cannot run.
  static const KernelRegistry& Default();
  // Reference kernels only: plain C++, what the fast paths are tested against.
  static const KernelRegistry& Reference();

 private:
  struct Entry {
    int since_opset;
    KernelFactory factory;
  };
  std::map<std::string, std::vector<Entry>, std::less<>> entries_;
};

// Registration, one function per kernel family (kernels/*.cc).
void RegisterElementwiseKernels(KernelRegistry* registry);
void RegisterShapeKernels(KernelRegistry* registry);
void RegisterReduceKernels(KernelRegistry* registry);
void RegisterNnKernels(KernelRegistry* registry);
void RegisterResizeKernels(KernelRegistry* registry);
void RegisterAttentionKernels(KernelRegistry* registry);
void RegisterSequenceKernels(KernelRegistry* registry);
void RegisterIndexKernels(KernelRegistry* registry);
void RegisterLossKernels(KernelRegistry* registry);
void RegisterQuantizeKernels(KernelRegistry* registry);
void RegisterEinsumKernels(KernelRegistry* registry);  // Einsum, Det
void RegisterGridSampleKernels(KernelRegistry* registry);
void RegisterRnnKernels(KernelRegistry* registry);  // RNN, GRU, LSTM (reference)
void RegisterControlFlowKernels(KernelRegistry* registry);  // If, Loop, Scan, SequenceMap
void RegisterQuantizedLinearKernels(KernelRegistry* registry);
void RegisterSignalKernels(KernelRegistry* registry);  // DFT, STFT, MelWeightMatrix
void RegisterRoiAlignKernels(KernelRegistry* registry);  // MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv
// oneDNN kernels for ops already registered by the reference families (which they fall back to).
void RegisterDnnlConvKernels(KernelRegistry* registry);
void RegisterDnnlMatmulKernels(KernelRegistry* registry);
void RegisterDnnlEltwiseKernels(KernelRegistry* registry);
void RegisterDnnlPoolKernels(KernelRegistry* registry);
void RegisterDnnlBinaryKernels(KernelRegistry* registry);
void RegisterDnnlDataMovementKernels(KernelRegistry* registry);
void RegisterDnnlNormKernels(KernelRegistry* registry);
void RegisterDnnlReduceKernels(KernelRegistry* registry);
void RegisterDnnlAttentionKernels(KernelRegistry* registry);
void RegisterDnnlResizeKernels(KernelRegistry* registry);
// inferd.Reorder, which only the layout pass creates (it has no reference kernel: plain is the
// only layout without oneDNN).
void RegisterDnnlLayoutKernels(KernelRegistry* registry);

// A kernel made from a lambda, for the many ops whose only state is a few attributes.
template <typename Fn>
class LambdaKernel final : public Kernel {
 public:
  explicit LambdaKernel(Fn fn) : fn_(std::move(fn)) {}
  Status Run(std::span<const Tensor* const> inputs, std::span<Tensor> outputs) override {
    return fn_(inputs, outputs);
  }

 private:
  Fn fn_;
};

template <typename Fn>
StatusOr<std::unique_ptr<Kernel>> MakeKernel(Fn fn) {
  return std::unique_ptr<Kernel>(std::make_unique<LambdaKernel<Fn>>(std::move(fn)));
}

}  // namespace inferd::runtime
