// The indexing family: index_select, gather, scatter_add, index, index_put, cat, nonzero. The
// checks and shape math both backends share, and the entry points of each
// (kernels/cpu/index.cpp; kernels/cuda/index.cu, index_put.cu). Host code only.
#pragma once
#include <ATen/core/List.h>

#include <optional>
#include <vector>

#include "checks.h"
#include "kernels/cpu/dispatch.h"

namespace mytorch {
namespace index {

inline void check_index_dtype(const char* op, const at::Tensor& index) {
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
              ": expected index to have dtype in (Long, Int), got ", index.scalar_type());
}

// index_select's index: int64 or int32, 0-D or 1-D.
inline void check_select_index(const char* op, const at::Tensor& index) {
  check_index_dtype(op, index);
  TORCH_CHECK(index.dim() <= 1, op, ": expected index to be 0-D or 1-D, got a ", index.dim(),
              "-D tensor of shape ", shape_str(index.sizes()));
}

// index_select's dim, wrapped; a 0-D x takes one index.
inline int64_t select_dim(const char* op, const at::Tensor& x, int64_t dim, const at::Tensor& index) {
  const int64_t d = wrap_dim(op, dim, x.dim());
  TORCH_CHECK_INDEX(x.dim() > 0 || index.numel() == 1, op, ": expected one index into a 0-D x, got ",
                    index.numel());
  return d;
}

// gather / scatter_add: index has x's rank and fits in x off dim d; src (scatter_add) covers
// index in every dim, d included (as ATen).
inline void check_gather_shapes(const char* op, const at::Tensor& x, int64_t d, const at::Tensor& index,
                                const at::Tensor* src) {
  TORCH_CHECK(index.dim() == x.dim() || (index.dim() <= 1 && x.dim() <= 1), op,
              ": expected index to have as many dims as x (", x.dim(), "), got ", index.dim());
  for (int64_t i = 0; i < index.dim(); ++i) {
    if (i == d) continue;
    TORCH_CHECK(index.size(i) <= x.size(i), op, ": expected index.size(", i, ") <= x.size(", i, "), got ",
                index.size(i), " > ", x.size(i));
  }
  if (src) {
    TORCH_CHECK(src->dim() == index.dim() || (index.dim() <= 1 && src->dim() <= 1), op,
                ": expected src to have as many dims as index (", index.dim(), "), got ", src->dim());
    for (int64_t i = 0; i < index.dim(); ++i)
      TORCH_CHECK(index.size(i) <= (src->dim() ? src->size(i) : 1), op, ": expected index.size(", i,
                  ") <= src.size(", i, "), got ", index.size(i), " > ", src->dim() ? src->size(i) : 1);
  }
}

// index_put's values: x's dtype, broadcastable to the indexing result's shape.
inline void check_put_values(const char* op, const at::Tensor& x, const at::Tensor& values,
                             at::IntArrayRef shape) {
  TORCH_CHECK(values.scalar_type() == x.scalar_type(), op, ": expected values of x's dtype ", x.scalar_type(),
              ", got ", values.scalar_type());
  TORCH_CHECK(expandable_to(values.sizes(), shape), op, ": shape mismatch: values of shape ",
              shape_str(values.sizes()), " cannot be broadcast to indexing result of shape ", shape_str(shape));
}

// cat's inputs, checked: the non-skipped tensors (1-D empty ones are skipped, a legacy rule ATen
// keeps), the promoted dtype, the wrapped dim and the output shape.
struct CatPlan {
  std::vector<at::Tensor> ts;  // empty: the result is an empty 1-D tensor of `dt`
  at::ScalarType dt;
  int64_t d = 0, total = 0;    // the cat dim, its size in the output
  std::vector<int64_t> shape;  // the output's
};

inline CatPlan cat_plan(const char* op, at::TensorList tensors, int64_t dim) {
  TORCH_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
  CatPlan p;
  for (const at::Tensor& t : tensors)
    if (!(t.dim() == 1 && t.numel() == 0)) p.ts.push_back(t);
  p.dt = tensors[0].scalar_type();
  for (const at::Tensor& t : tensors) p.dt = at::promoteTypes(p.dt, t.scalar_type());
  cpu::dispatch_all(op, "tensors", p.dt, [](auto) {});
  if (p.ts.empty()) return p;
  const at::Tensor& ref = p.ts[0];
  TORCH_CHECK(ref.dim() > 0, op, ": zero-dimensional tensor (at position 0) cannot be concatenated");
  p.d = wrap_dim(op, dim, ref.dim());
  for (size_t i = 0; i < p.ts.size(); ++i) {
    const at::Tensor& t = p.ts[i];
    check_same_device(op, ref, "tensors[0]", t, "another tensor");
    TORCH_CHECK(t.dim() == ref.dim(), op, ": expected tensors with ", ref.dim(), " dims, got ", t.dim(),
                " dims at position ", i);
    for (int64_t k = 0; k < ref.dim(); ++k)
      TORCH_CHECK(k == p.d || t.size(k) == ref.size(k), op, ": sizes of tensors must match except in dim ", p.d,
                  "; expected size ", ref.size(k), " but got size ", t.size(k), " for tensor ", i, " in dim ", k);
    p.total += t.size(p.d);
  }
  p.shape = ref.sizes().vec();
  p.shape[p.d] = p.total;
  return p;
}

}  // namespace index

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
// scatter_add and index_put return an updated copy of x.
#define MYTORCH_INDEX_OPS                                                                                       \
  at::Tensor index_select(const at::Tensor& x, int64_t dim, const at::Tensor& index);                          \
  at::Tensor gather(const at::Tensor& x, int64_t dim, const at::Tensor& index);                                \
  at::Tensor scatter_add(const at::Tensor& x, int64_t dim, const at::Tensor& index, const at::Tensor& src);    \
  at::Tensor cat(at::TensorList tensors, int64_t dim);                                                         \
  /* x[indices] as ATen: index tensors (int64/int32, or bool masks) broadcast together; None takes a dim */    \
  at::Tensor index(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices);                 \
  at::Tensor index_put(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices,              \
                       const at::Tensor& values, bool accumulate);                                             \
  at::Tensor nonzero(const at::Tensor& x);

namespace cpu {
MYTORCH_INDEX_OPS
// In-place forms, for the aten routes of the mytorch device (csrc/aten/index.cpp).
at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src);
at::Tensor& index_put_(at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values,
                       bool accumulate);
// Flat positions of the true elements of a mask, int64.
at::Tensor nonzero_flat(const at::Tensor& mask);
}  // namespace cpu
namespace cuda {
MYTORCH_INDEX_OPS
}  // namespace cuda

#undef MYTORCH_INDEX_OPS

}  // namespace mytorch
