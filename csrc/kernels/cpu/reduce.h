// Reductions over any set of dims (CPU kernels in reduce.cpp), callable from other families.
#pragma once
#include <ATen/ATen.h>

namespace mytorch {
namespace cpu {

enum class Red { Sum, Prod, Max, Min };

// sum / prod / amax / amin over `dims` (empty or None: all dims). Sum/prod of integers and
// bools give int64, as ATen does; `dtype` first casts the input.
at::Tensor reduce(Red op, const at::Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
                  std::optional<at::ScalarType> dtype = std::nullopt);
at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
                std::optional<at::ScalarType> dtype = std::nullopt);
// (values, indices) of max/min along one dim; indices of the first extreme (NaN wins).
std::tuple<at::Tensor, at::Tensor> minmax_dim(bool is_max, const at::Tensor& x, int64_t dim,
                                              bool keepdim);
at::Tensor arg_minmax(bool is_max, const at::Tensor& x, std::optional<int64_t> dim, bool keepdim);
// (var, mean); std = sqrt(var).
std::tuple<at::Tensor, at::Tensor> var_mean(const at::Tensor& x, at::OptionalIntArrayRef dims,
                                            double correction, bool keepdim, bool take_sqrt);
at::Tensor logsumexp(const at::Tensor& x, at::IntArrayRef dims, bool keepdim);
// ||x||_p over all elements, p in {1, 2, inf}, in x's dtype (for clip_grad_norm_).
at::Tensor vector_norm(const at::Tensor& x, double p, at::OptionalIntArrayRef dims, bool keepdim);

}  // namespace cpu
}  // namespace mytorch
