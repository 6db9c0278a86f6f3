// The matrix-product family: mm, bmm, addmm, baddbmm, linear (out = beta * self + alpha * a @ b,
// float32 / float64 / bfloat16 / float16 with float32 accumulation). The checks and output
// shapes both backends share, and the entry points of each (kernels/cpu/gemm.cpp,
// kernels/cuda/gemm.cu). Host code only.
#pragma once
#include <optional>
#include <vector>

#include "checks.h"

namespace mytorch {
namespace gemm {

// The four products: the op, its operands' names, their rank; addmm and baddbmm also take
// beta * self.
struct Product {
  const char* op;
  const char *an, *bn;
  int64_t dim;
};
constexpr Product kMm{"mytorch::mm", "self", "mat2", 2}, kBmm{"mytorch::bmm", "self", "mat2", 3},
    kAddmm{"mytorch::addmm", "mat1", "mat2", 2}, kBaddbmm{"mytorch::baddbmm", "batch1", "batch2", 3};

// a @ b of two `dim`-D operands (dim 3: batched).
inline void check_mm_args(const char* op, const at::Tensor& a, const char* an, const at::Tensor& b, const char* bn,
                          int64_t dim) {
  check_floating(op, an, a);
  check_same_dtype(op, a, an, b, bn);
  check_same_device(op, a, an, b, bn);
  check_dim(op, an, a, dim);
  check_dim(op, bn, b, dim);
  if (dim == 3)
    TORCH_CHECK(a.size(0) == b.size(0), op, ": expected ", an, " and ", bn, " to have the same batch size, got ",
                a.size(0), " and ", b.size(0));
  TORCH_CHECK(a.size(dim - 1) == b.size(dim - 2), op, ": ", an, " and ", bn, " shapes cannot be multiplied (",
              shape_str(a.sizes()), " and ", shape_str(b.sizes()), ")");
}

// The shape of a @ b: (M, N) or (B, M, N).
inline std::vector<int64_t> out_shape(const at::Tensor& a, const at::Tensor& b) {
  if (a.dim() == 3) return {a.size(0), a.size(1), b.size(2)};
  return {a.size(0), b.size(1)};
}

// addmm / baddbmm's self: at most as many dims as the product.
inline void check_self_dim(const char* op, const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(self.dim() <= dim, op, ": expected self to be at most ", dim, "-D, got ", self.dim(), "-D");
}

// self (where given): a's dtype and device, broadcastable to the output. Checked even where
// beta == 0 ignores its values (as ATen).
inline void check_self(const char* op, const at::Tensor* self, const at::Tensor& a, at::IntArrayRef out) {
  if (self == nullptr || !self->defined()) return;
  check_same_dtype(op, *self, "self", a, a.dim() == 2 ? "mat1" : "batch1");
  check_same_device(op, *self, "self", a, a.dim() == 2 ? "mat1" : "batch1");
  TORCH_CHECK(expandable_to(self->sizes(), out), op, ": self of shape ", shape_str(self->sizes()),
              " cannot broadcast to the output shape ", shape_str(out));
}

// linear: x (..., in_features) @ w^T (w: (out_features, in_features)) + bias (out_features).
struct Linear {
  const at::Tensor* bias;      // null when absent
  int64_t rows;                // the product of x's leading dims
  std::vector<int64_t> shape;  // the output's: x's leading dims + [out_features]
};

inline Linear check_linear(const char* op, const at::Tensor& x, const at::Tensor& w,
                           const std::optional<at::Tensor>& bias) {
  check_floating(op, "input", x);
  check_same_dtype(op, x, "input", w, "weight");
  check_same_device(op, x, "input", w, "weight");
  check_dim(op, "weight", w, 2);
  TORCH_CHECK(x.dim() >= 1, op, ": expected input to have at least 1 dim, got a 0-D tensor");
  TORCH_CHECK(x.size(-1) == w.size(1), op, ": expected input's last dim to equal in_features=", w.size(1),
              ", got input of shape ", shape_str(x.sizes()));
  Linear r{bias.has_value() && bias->defined() ? &*bias : nullptr, 1, {}};
  if (r.bias) {
    check_same_dtype(op, *r.bias, "bias", w, "weight");
    check_same_device(op, *r.bias, "bias", w, "weight");
    TORCH_CHECK(r.bias->dim() == 1 && r.bias->size(0) == w.size(0), op, ": expected bias of shape [", w.size(0),
                "], got ", shape_str(r.bias->sizes()));
  }
  // rows from the leading dims, not -1: reshape cannot infer -1 when in_features is 0
  for (int64_t d = 0; d + 1 < x.dim(); ++d) r.rows *= x.size(d);
  r.shape.assign(x.sizes().begin(), x.sizes().end() - 1);
  r.shape.push_back(w.size(0));
  return r;
}

}  // namespace gemm

// ---- entry points ----
// Each backend's product (gemm.cpp, gemm.cu): out = beta * self + alpha * a @ b, a fresh tensor,
// with p's checks (self null: mm, bmm). Then the registered ops (cpu/register.cpp,
// cuda/register.cpp) over it, and linear.
#define MYTORCH_GEMM_OPS                                                                                          \
  at::Tensor product(const gemm::Product& p, const at::Tensor* self, const at::Tensor& a, const at::Tensor& b,   \
                     double beta, double alpha);                                                                 \
  inline at::Tensor mm(const at::Tensor& a, const at::Tensor& b) { return product(gemm::kMm, nullptr, a, b, 0, 1); } \
  inline at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) { return product(gemm::kBmm, nullptr, a, b, 0, 1); } \
  inline at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta, \
                          const at::Scalar& alpha) {                                                             \
    return product(gemm::kAddmm, &self, a, b, beta.toDouble(), alpha.toDouble());                               \
  }                                                                                                               \
  inline at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,                    \
                            const at::Scalar& beta, const at::Scalar& alpha) {                                   \
    return product(gemm::kBaddbmm, &self, a, b, beta.toDouble(), alpha.toDouble());                             \
  }                                                                                                               \
  at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias);

namespace cpu {
MYTORCH_GEMM_OPS
// out= forms, for the aten routes of the mytorch device (csrc/aten/gemm.cpp); addmm_out and
// baddbmm_out take self == out (in place).
at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out);
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out);
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out);
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                        const at::Scalar& alpha, at::Tensor& out);
}  // namespace cpu
namespace cuda {
MYTORCH_GEMM_OPS
}  // namespace cuda

#undef MYTORCH_GEMM_OPS

}  // namespace mytorch
