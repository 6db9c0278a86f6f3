// The reduction family: sum, mean, prod, amax, amin, max / min along a dim, argmax, argmin,
// var, std, logsumexp, over any set of dims (empty or None: all). The checks and shape math
// both backends share, and the entry points of each (kernels/cpu/reduce.cpp,
// kernels/cuda/reduce.cu). Host code only.
#pragma once
#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"
#include "kernels/cpu/dispatch.h"

namespace mytorch {
namespace reduce {

enum class Red { Sum, Prod, Max, Min };

// Every dtype of the kernels (floating, integer, bool).
inline void check_input(const char* op, const at::Tensor& x) {
  cpu::dispatch_all(op, "x", x.scalar_type(), [](auto) {});
}

// Which dims of x are reduced; each named dim at most once.
inline std::vector<bool> reduce_mask(const char* op, const at::Tensor& x, at::OptionalIntArrayRef dims) {
  const int64_t nd = x.dim();
  std::vector<bool> mask(nd, false);
  if (!dims || dims->empty()) {
    std::fill(mask.begin(), mask.end(), true);
    return mask;
  }
  for (int64_t d : *dims) {
    const int64_t w = wrap_dim(op, d, nd);
    if (nd == 0) continue;
    TORCH_CHECK(!mask[w], op, ": dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

inline std::vector<int64_t> out_shape(const at::Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  std::vector<int64_t> s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[d]) s.push_back(x.size(d));
    else if (keepdim) s.push_back(1);
  }
  return s;
}

// max / min / argmax / argmin: every reduced dim, and the tensor, non-empty.
inline void check_nonempty(const char* op, const at::Tensor& x, const std::vector<bool>& mask) {
  for (int64_t d = 0; d < x.dim(); ++d)
    TORCH_CHECK(!mask[d] || x.size(d) != 0, op, ": expected reduction dim ", d,
                " to have non-zero size, got a tensor of shape ", shape_str(x.sizes()));
  if (x.dim() == 0) return;
  TORCH_CHECK(x.numel() != 0 || std::any_of(mask.begin(), mask.end(), [](bool b) { return !b; }), op,
              ": expected a non-empty tensor, got shape ", shape_str(x.sizes()));
}

// max / min along one dim: the mask of that dim (wrapped), checked non-empty.
inline std::vector<bool> dim_mask(const char* op, const at::Tensor& x, int64_t dim) {
  const int64_t d = wrap_dim(op, dim, x.dim());
  std::vector<bool> mask(x.dim(), false);
  if (x.dim()) mask[d] = true;
  check_nonempty(op, x, mask);
  return mask;
}

}  // namespace reduce

// ---- entry points ----
// Each backend's kernels (reduce.cpp, reduce.cu): sum / prod / amax / amin over `dims` (sum and
// prod of integers and bools give int64, as ATen; `dtype` first casts the input), mean, max / min
// along a dim as (values, indices) of the first extreme (NaN wins), argmax / argmin, var / std
// (take_sqrt), logsumexp. Then the registered ops (cpu/register.cpp, cuda/register.cpp) over them.
#define MYTORCH_REDUCE_OPS                                                                                        \
  at::Tensor reduce(reduce::Red op, const at::Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,             \
                    std::optional<at::ScalarType> dtype = std::nullopt);                                         \
  at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,                               \
                  std::optional<at::ScalarType> dtype);                                                          \
  std::tuple<at::Tensor, at::Tensor> minmax_dim(bool is_max, const at::Tensor& x, int64_t dim, bool keepdim);   \
  at::Tensor arg_minmax(bool is_max, const at::Tensor& x, std::optional<int64_t> dim, bool keepdim);            \
  at::Tensor var_std(const at::Tensor& x, at::OptionalIntArrayRef dims, double correction, bool keepdim,         \
                     bool take_sqrt);                                                                            \
  at::Tensor logsumexp(const at::Tensor& x, at::IntArrayRef dims, bool keepdim);                                \
  inline at::Tensor op_sum(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim,                       \
                           std::optional<at::ScalarType> dtype) {                                                \
    return reduce(reduce::Red::Sum, x, dim, keepdim, dtype);                                                     \
  }                                                                                                               \
  inline at::Tensor op_prod(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim) {                    \
    return reduce(reduce::Red::Prod, x, dim, keepdim);                                                           \
  }                                                                                                               \
  inline at::Tensor op_amax(const at::Tensor& x, at::IntArrayRef dim, bool keepdim) {                            \
    return reduce(reduce::Red::Max, x, dim, keepdim);                                                            \
  }                                                                                                               \
  inline at::Tensor op_amin(const at::Tensor& x, at::IntArrayRef dim, bool keepdim) {                            \
    return reduce(reduce::Red::Min, x, dim, keepdim);                                                            \
  }                                                                                                               \
  inline std::tuple<at::Tensor, at::Tensor> op_max_dim(const at::Tensor& x, int64_t dim, bool keepdim) {        \
    return minmax_dim(true, x, dim, keepdim);                                                                    \
  }                                                                                                               \
  inline std::tuple<at::Tensor, at::Tensor> op_min_dim(const at::Tensor& x, int64_t dim, bool keepdim) {        \
    return minmax_dim(false, x, dim, keepdim);                                                                   \
  }                                                                                                               \
  inline at::Tensor op_argmax(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {                  \
    return arg_minmax(true, x, dim, keepdim);                                                                    \
  }                                                                                                               \
  inline at::Tensor op_argmin(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {                  \
    return arg_minmax(false, x, dim, keepdim);                                                                   \
  }                                                                                                               \
  inline at::Tensor op_var(const at::Tensor& x, at::OptionalIntArrayRef dim, double correction, bool keepdim) {  \
    return var_std(x, dim, correction, keepdim, false);                                                          \
  }                                                                                                               \
  inline at::Tensor op_std(const at::Tensor& x, at::OptionalIntArrayRef dim, double correction, bool keepdim) {  \
    return var_std(x, dim, correction, keepdim, true);                                                           \
  }

namespace cpu {
using reduce::Red;
MYTORCH_REDUCE_OPS
// (var, mean), for the aten routes of the mytorch device (csrc/aten/reduce.cpp); take_sqrt gives std.
std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& x, at::OptionalIntArrayRef dims, double correction,
                                            bool keepdim, bool take_sqrt);
// ||x||_p over dims, p in {1, 2, inf, -inf}, in x's dtype (for clip_grad_norm_).
at::Tensor vector_norm(const at::Tensor& x, double p, at::OptionalIntArrayRef dims, bool keepdim);
}  // namespace cpu
namespace cuda {
MYTORCH_REDUCE_OPS
}  // namespace cuda

#undef MYTORCH_REDUCE_OPS

}  // namespace mytorch
