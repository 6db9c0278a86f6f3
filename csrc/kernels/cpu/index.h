// Indexing kernels (index.cpp), callable from other families.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/List.h>

namespace mytorch {
namespace cpu {

at::Tensor index_select(const at::Tensor& x, int64_t dim, const at::Tensor& index);
at::Tensor gather(const at::Tensor& x, int64_t dim, const at::Tensor& index);
at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src);
// x[indices] as ATen: any number of index tensors (int64/int32, or bool masks), broadcast
// together; None entries take whole dims.
at::Tensor index(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices);
at::Tensor& index_put_(at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices,
                       const at::Tensor& values, bool accumulate);
at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim);
at::Tensor nonzero(const at::Tensor& x);
// Flat positions of the true elements of a mask, int64.
at::Tensor nonzero_flat(const at::Tensor& mask);

}  // namespace cpu
}  // namespace mytorch
