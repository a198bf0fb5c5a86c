// Linear algebra, reference kernels: Einsum and Det.
//
// Einsum: every label gets a size; the kernel walks the whole label space once,
// adding each product of operand elements to its output element. A label repeated in one operand
// reads its diagonal; labels missing from the output are summed. "..." stands for the same
// broadcast dims in every operand; without "->" the output is the ellipsis dims then the labels
// seen once, in alphabetical order (numpy's rule).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/tensor_util.h"

namespace inferd::runtime {
namespace {

using Inputs = std::span<const Tensor* const>;
using Outputs = std::span<Tensor>;

// Ellipsis dims become labels '0', '1'... (right-aligned), which no real label can be.
constexpr char kEllipsisLabel = '0';

struct Equation {
  std::vector<std::string> inputs;  // labels per operand, ellipsis still as '.'
  std::string output;
  bool explicit_output = false;
};

StatusOr<Equation> ParseEquation(const std::string& text) {
  Equation e;
  std::string compact;
  for (char c : text) {
    if (c != ' ') compact += c;
  }
  const size_t arrow = compact.find("->");
  const std::string left = compact.substr(0, arrow);
  if (arrow != std::string::npos) {
    e.explicit_output = true;
    e.output = compact.substr(arrow + 2);
  }
  size_t start = 0;
  while (true) {
    const size_t comma = left.find(',', start);
    e.inputs.push_back(left.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const std::string& term : e.inputs) {
    for (size_t i = 0; i < term.size(); ++i) {
      const char c = term[i];
      const bool dot = c == '.';
      if (!dot && !std::isalpha(static_cast<unsigned char>(c))) return Status::InvalidArgument("Einsum: bad label '" + std::string(1, c) + "'");
      if (dot && term.compare(i, 3, "...") != 0) return Status::InvalidArgument("Einsum: '.' outside '...'");
      if (dot) i += 2;
    }
  }
  return e;
}

// `term` with its "..." replaced by `ellipsis` placeholder labels for an operand of `rank`.
StatusOr<std::string> Expand(const std::string& term, size_t rank, size_t ellipsis_rank) {
  const size_t dots = term.find("...");
  if (dots == std::string::npos) {
    if (term.size() != rank) return Status::InvalidArgument("Einsum: term '" + term + "' does not match its operand's rank");
    return term;
  }
  const size_t named = term.size() - 3;
  if (rank < named) return Status::InvalidArgument("Einsum: term '" + term + "' has more labels than its operand dims");
  const size_t own = rank - named;
  std::string labels;
  for (size_t i = ellipsis_rank - own; i < ellipsis_rank; ++i) labels += static_cast<char>(kEllipsisLabel + i);
  return term.substr(0, dots) + labels + term.substr(dots + 3);
}

StatusOr<std::unique_ptr<Kernel>> MakeEinsum(const Node& node, int) {
  ASSIGN_OR_RETURN(std::string text, node.String("equation", ""));
  ASSIGN_OR_RETURN(Equation equation, ParseEquation(text));
  if (equation.inputs.size() != node.inputs.size()) return Status::InvalidArgument(node.Describe() + ": one term per input");
  return MakeKernel([equation](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, equation.inputs.size(), "Einsum"));
    const DataType dtype = in[0]->dtype;
    size_t ellipsis_rank = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      if (in[k]->dtype != dtype) return Status::InvalidArgument("Einsum: operand types differ");
      if (equation.inputs[k].find("...") != std::string::npos) {
        ellipsis_rank = std::max(ellipsis_rank, in[k]->shape.size() - (equation.inputs[k].size() - 3));
      }
    }
    std::map<char, int64_t> sizes;
    std::map<char, int> uses;
    std::vector<std::string> terms;
    for (size_t k = 0; k < in.size(); ++k) {
      ASSIGN_OR_RETURN(std::string term, Expand(equation.inputs[k], in[k]->shape.size(), ellipsis_rank));
      for (size_t d = 0; d < term.size(); ++d) {
        const int64_t size = in[k]->shape[d];
        auto [it, added] = sizes.emplace(term[d], size);
        // Ellipsis dims broadcast (1 against n); named labels must agree.
        if (!added && it->second != size) {
          if (term[d] < 'A' && (it->second == 1 || size == 1)) {
            it->second = std::max(it->second, size);
          } else {
            return Status::InvalidArgument("Einsum: label '" + std::string(1, term[d]) + "' has two sizes");
          }
        }
        ++uses[term[d]];
      }
      terms.push_back(std::move(term));
    }
    std::string output;
    if (equation.explicit_output) {
      ASSIGN_OR_RETURN(output, Expand(equation.output, equation.output.find("...") == std::string::npos
                                                            ? equation.output.size()
                                                            : equation.output.size() - 3 + ellipsis_rank,
                                      ellipsis_rank));
    } else {
      for (size_t i = 0; i < ellipsis_rank; ++i) output += static_cast<char>(kEllipsisLabel + i);
      for (const auto& [label, count] : uses) {
        if (label >= 'A' && count == 1) output += label;
      }
    }
    // The label space: every label, output ones first.
    std::string labels = output;
    for (const auto& [label, size] : sizes) {
      if (labels.find(label) == std::string::npos) labels += label;
    }
    Shape space, out_shape;
    for (char label : labels) {
      if (sizes.count(label) == 0) return Status::InvalidArgument("Einsum: output label '" + std::string(1, label) + "' is in no input");
      space.push_back(sizes[label]);
    }
    for (char label : output) out_shape.push_back(sizes[label]);
    // Per operand, the stride of each label (0 where absent or broadcast; summed where repeated).
    std::vector<std::vector<int64_t>> strides(in.size(), std::vector<int64_t>(labels.size(), 0));
    for (size_t k = 0; k < in.size(); ++k) {
      const std::vector<int64_t> own = ContiguousStrides(in[k]->shape);
      for (size_t d = 0; d < terms[k].size(); ++d) {
        if (in[k]->shape[d] != 1) strides[k][labels.find(terms[k][d])] += own[d];
      }
    }
    std::vector<int64_t> out_strides(labels.size(), 0);
    const std::vector<int64_t> own = ContiguousStrides(out_shape);
    for (size_t d = 0; d < output.size(); ++d) out_strides[d] = own[d];
    return DispatchNumeric(dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], dtype, out_shape));
      std::fill(dst, dst + ElementsOf(out[0]), T{});
      std::vector<const T*> data;
      for (const Tensor* t : in) data.push_back(ValuesOf<T>(*t));
      std::vector<int64_t> index(labels.size(), 0);
      const int64_t total = ElementsOf(Tensor{.shape = space});
      for (int64_t flat = 0; flat < total; ++flat) {
        int64_t rest = flat, out_at = 0;
        for (size_t d = labels.size(); d-- > 0;) {
          index[d] = rest % space[d];
          rest /= space[d];
          out_at += index[d] * out_strides[d];
        }
        T product = T{1};
        for (size_t k = 0; k < data.size(); ++k) {
          int64_t at = 0;
          for (size_t d = 0; d < labels.size(); ++d) at += index[d] * strides[k][d];
          product = static_cast<T>(product * data[k][at]);
        }
        dst[out_at] = static_cast<T>(dst[out_at] + product);
      }
      return Status::Ok();
    });
  });
}

// Det: the determinant of each [M, M] matrix in the last two dims (LU with partial pivoting).
StatusOr<std::unique_ptr<Kernel>> MakeDet(const Node&, int) {
  return MakeKernel([](Inputs in, Outputs out) -> Status {
    RETURN_IF_ERROR(RequireInputs(in, 1, "Det"));
    const Tensor& x = *in[0];
    if (x.shape.size() < 2 || x.shape.end()[-1] != x.shape.end()[-2]) return Status::InvalidArgument("Det needs [..., M, M]");
    const int64_t m = x.shape.back();
    const Shape shape(x.shape.begin(), x.shape.end() - 2);
    return DispatchFloat(x.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      ASSIGN_OR_RETURN(T * dst, AllocateOutputAs<T>(&out[0], x.dtype, shape));
      const T* src = ValuesOf<T>(x);
      std::vector<double> a(static_cast<size_t>(m * m));
      for (int64_t k = 0; k < ElementsOf(out[0]); ++k) {
        std::copy(src + k * m * m, src + (k + 1) * m * m, a.begin());
        double det = 1;
        for (int64_t c = 0; c < m && det != 0; ++c) {
          int64_t pivot = c;
          for (int64_t r = c + 1; r < m; ++r) {
            if (std::abs(a[r * m + c]) > std::abs(a[pivot * m + c])) pivot = r;
          }
          if (a[pivot * m + c] == 0) {
            det = 0;
            break;
          }
          if (pivot != c) {
            for (int64_t j = 0; j < m; ++j) std::swap(a[c * m + j], a[pivot * m + j]);
            det = -det;
          }
          det *= a[c * m + c];
          for (int64_t r = c + 1; r < m; ++r) {
            const double factor = a[r * m + c] / a[c * m + c];
            for (int64_t j = c; j < m; ++j) a[r * m + j] -= factor * a[c * m + j];
          }
        }
        dst[k] = static_cast<T>(det);
      }
      return Status::Ok();
    });
  });
}

}  // namespace

void RegisterEinsumKernels(KernelRegistry* r) {
  r->Register("Einsum", 12, MakeEinsum);
  r->Register("Det", 11, MakeDet);
}

}  // namespace inferd::runtime
