// The loss family's header: the input checks of the CPU (kernels/cpu/loss.cpp) and CUDA
// (kernels/cuda/loss.cu, loss_fused.cu) losses, so that both raise the same errors, and the
// entry points of each backend. Host code only.
#pragma once
#include <ATen/core/Reduction.h>
#include <c10/util/Optional.h>

#include <string>
#include <tuple>
#include <vector>

#include "checks.h"

namespace mytorch {
namespace loss {

// The reduction of every loss op, as ATen's loss schemas take it (at::Reduction): 0 none,
// 1 mean, 2 sum; 1 or 2 where allow_none is false (the ops that return the loss's gradient).
inline at::Reduction::Reduction check_reduction(const char* op, int64_t reduction, bool allow_none = true) {
  TORCH_CHECK(reduction >= (allow_none ? 0 : 1) && reduction <= 2, op, ": expected reduction to be ",
              allow_none ? "0 (none), 1 (mean) or 2 (sum)" : "1 (mean) or 2 (sum)", ", got ", reduction);
  return static_cast<at::Reduction::Reduction>(reduction);
}

// "none", "mean" or "sum", for messages.
inline const char* reduction_name(at::Reduction::Reduction r) {
  return r == at::Reduction::None ? "none" : r == at::Reduction::Mean ? "mean" : "sum";
}

// ---- shapes: input (N, C, S) or (C,), target (N, S) or () ----
struct NllDims {
  int64_t N, C, S;
};

inline NllDims nll_dims(const char* op, const at::Tensor& input, const at::Tensor& target) {
  check_floating(op, "input", input);
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kInt ||
                  target.scalar_type() == at::kByte,
              op, ": expected target to have an integer dtype (int64, int32, uint8), got ",
              target.scalar_type());
  check_same_device(op, input, "input", target, "target");
  TORCH_CHECK(input.dim() >= 1, op, ": expected input of at least 1 dim (C,) or (N, C, ...), got ",
              input.dim(), "-D");
  if (input.dim() == 1) {
    TORCH_CHECK(target.dim() == 0, op, ": expected a 0-D target for a 1-D input, got target of shape ",
                target.sizes());
    return {1, input.size(0), 1};
  }
  bool ok = target.dim() == input.dim() - 1 && target.size(0) == input.size(0);
  int64_t S = 1;
  for (int64_t d = 2; ok && d < input.dim(); ++d) {
    ok = target.size(d - 1) == input.size(d);
    S *= input.size(d);
  }
  if (!ok) {
    std::vector<int64_t> want{input.size(0)};
    for (int64_t dd = 2; dd < input.dim(); ++dd) want.push_back(input.size(dd));
    TORCH_CHECK(false, op, ": expected target of shape ", at::IntArrayRef(want), " for input of shape ",
                input.sizes(), ", got target of shape ", target.sizes());
  }
  return {input.size(0), input.size(1), S};
}

// The optional divisor of the fused cross-entropy ops (the loss and its gradients are divided
// by it): one element, floating or integral, on `like`'s device or the CPU. Returned as a
// float32 scalar on `like`'s device, or an undefined tensor when absent.
inline at::Tensor ce_divisor(const char* op, const c10::optional<at::Tensor>& d, const at::Tensor& like) {
  if (!d.has_value() || !d->defined()) return at::Tensor();
  TORCH_CHECK(d->numel() == 1, op, ": expected a one-element divisor, got shape ", d->sizes());
  TORCH_CHECK(at::isFloatingType(d->scalar_type()) || at::isIntegralType(d->scalar_type(), /*includeBool=*/false),
              op, ": expected a floating or integer divisor, got ", d->scalar_type());
  TORCH_CHECK(d->device() == like.device() || d->device().is_cpu(), op, ": expected the divisor on ",
              like.device(), " or the CPU, got ", d->device());
  return d->reshape({}).to(like.device(), at::kFloat);
}

// The optional per-class weight, contiguous, or an undefined tensor.
inline at::Tensor class_weight(const char* op, const c10::optional<at::Tensor>& w, const at::Tensor& input,
                               int64_t C) {
  if (!w.has_value() || !w->defined()) return at::Tensor();
  check_same_dtype(op, *w, "weight", input, "input");
  check_same_device(op, *w, "weight", input, "input");
  TORCH_CHECK(w->dim() == 1 && w->size(0) == C, op, ": expected weight of shape [", C,
              "] (one per class), got ", w->sizes());
  return w->contiguous();
}

// The loss's shape for reduction='none': input's without the class dim.
inline std::vector<int64_t> out_shape_none(const at::Tensor& input) {
  if (input.dim() == 1) return {};
  std::vector<int64_t> s{input.size(0)};
  for (int64_t d = 2; d < input.dim(); ++d) s.push_back(input.size(d));
  return s;
}

// grad_output of nll_loss / cross_entropy: the per-sample shape for reduction='none',
// one element otherwise.
inline void check_loss_grad_output(const char* op, const at::Tensor& grad_output, const at::Tensor& input,
                                   int64_t reduction) {
  if (reduction == at::Reduction::None) {
    TORCH_CHECK(grad_output.sizes().equals(out_shape_none(input)), op, ": expected grad_output of shape ",
                at::IntArrayRef(out_shape_none(input)), " for reduction='none', got ", grad_output.sizes());
  } else {
    TORCH_CHECK(grad_output.numel() == 1, op, ": expected a 1-element grad_output, got shape ",
                grad_output.sizes());
  }
}

// cross_entropy takes (C,) or (N, C) logits.
inline void ce_checks(const char* op, const at::Tensor& input, int64_t reduction, double label_smoothing) {
  check_reduction(op, reduction);
  TORCH_CHECK(input.dim() == 1 || input.dim() == 2, op, ": expected input of shape (C,) or (N, C), got ",
              input.sizes(), " (move the class dim last and flatten for more dims)");
  TORCH_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op,
              ": expected label_smoothing in [0, 1], got ", label_smoothing);
}

// mse_loss: input floating, target of its dtype, device and shape.
inline void mse_checks(const char* op, const at::Tensor& input, const at::Tensor& target, int64_t reduction) {
  check_reduction(op, reduction);
  check_floating(op, "input", input);
  check_same_dtype(op, input, "input", target, "target");
  check_same_device(op, input, "input", target, "target");
  check_same_shape(op, input, "input", target, "target");
}

// mse_loss_backward: mse_loss's checks, and grad_output of input's dtype and device, of its
// shape for reduction='none', one element otherwise.
inline void mse_backward_checks(const char* op, const at::Tensor& grad_output, const at::Tensor& input,
                                const at::Tensor& target, int64_t reduction) {
  mse_checks(op, input, target, reduction);
  check_same_dtype(op, grad_output, "grad_output", input, "input");
  check_same_device(op, grad_output, "grad_output", input, "input");
  if (reduction == at::Reduction::None)
    check_same_shape(op, grad_output, "grad_output", input, "input");
  else
    TORCH_CHECK(grad_output.numel() == 1, op, ": expected a 1-element grad_output, got shape ",
                grad_output.sizes());
}

// ---- the large-vocabulary cross-entropies: logits [rows, C], int64 target [rows] ----
inline void check_ce_target(const char* op, const at::Tensor& target, int64_t rows, double smoothing) {
  check_dtype(op, "target", target, {at::kLong});
  TORCH_CHECK(target.dim() == 1 && target.size(0) == rows, op, ": expected target of shape [", rows, "], got ",
              target.sizes());
  TORCH_CHECK(smoothing >= 0.0 && smoothing <= 1.0, op, ": expected label_smoothing in [0, 1], got ", smoothing);
}

// fused_cross_entropy_backward's grad: one per row for reduction 'none', one element otherwise;
// lse: one per row, of the statistics' dtype.
inline void check_ce_backward(const char* op, const at::Tensor& grad, const at::Tensor& lse, int64_t rows,
                              at::Reduction::Reduction red, at::ScalarType lse_dtype) {
  check_dtype(op, "lse", lse, {lse_dtype});
  TORCH_CHECK(lse.numel() == rows, op, ": expected lse with ", rows, " elements, got shape ", lse.sizes());
  if (red == at::Reduction::None) {
    TORCH_CHECK(grad.dim() == 1 && grad.size(0) == rows, op, ": expected grad of shape [", rows,
                "] for reduction 'none', got ", grad.sizes());
  } else {
    TORCH_CHECK(grad.numel() == 1, op, ": expected a scalar grad for reduction '", reduction_name(red), "', got ",
                grad.sizes());
  }
}

// fused_linear_cross_entropy: input [N, H] and weight [V, H] of one dtype and device, chunk_size
// >= 0 (0 picks one), at least one class unless N is 0.
inline void check_linear_ce(const char* op, const at::Tensor& input, const at::Tensor& weight, int64_t chunk_size) {
  check_dim(op, "input", input, 2);
  check_dim(op, "weight", weight, 2);
  check_same_dtype(op, input, "input", weight, "weight");
  check_same_device(op, input, "input", weight, "weight");
  TORCH_CHECK(input.size(1) == weight.size(1), op, ": expected input [N, H] and weight [V, H] with the same H, got ",
              input.sizes(), " and ", weight.sizes());
  TORCH_CHECK(chunk_size >= 0, op, ": expected chunk_size >= 0 (0 picks one), got ", chunk_size);
  TORCH_CHECK(weight.size(0) > 0 || input.size(0) == 0, op, ": expected at least one class, got weight of shape ",
              weight.sizes());
}

}  // namespace loss

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
// The registered ops, X(name), each backend's defined in its files and registered from this list.
#define MYTORCH_LOSS_OPS(X)                                                                               \
  X(nll_loss) X(nll_loss_backward) X(cross_entropy) X(cross_entropy_backward) X(mse_loss) X(mse_loss_backward) \
  X(fused_cross_entropy) X(fused_cross_entropy_backward) X(fused_cross_entropy_grad) X(fused_linear_cross_entropy)

// nll_loss: input (C,) / (N, C) / (N, C, d1, ...), returns (output, total_weight) as ATen's
// nll_loss_forward; cross_entropy: fused log-softmax + nll (+ label smoothing) over (C,) or
// (N, C) logits; the fused_* ops: the large-vocabulary cross-entropies of training.
#define MYTORCH_LOSS_DECLS                                                                                     \
  std::tuple<at::Tensor, at::Tensor> nll_loss(const at::Tensor& input, const at::Tensor& target,               \
                                              const c10::optional<at::Tensor>& weight, int64_t reduction,      \
                                              int64_t ignore_index);                                           \
  at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target, \
                               const c10::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index, \
                               const at::Tensor& total_weight);                                                \
  at::Tensor cross_entropy(const at::Tensor& input, const at::Tensor& target,                                  \
                           const c10::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,   \
                           double label_smoothing);                                                            \
  at::Tensor cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& input,                    \
                                    const at::Tensor& target, const c10::optional<at::Tensor>& weight,         \
                                    int64_t reduction, int64_t ignore_index, double label_smoothing);          \
  at::Tensor mse_loss(const at::Tensor& input, const at::Tensor& target, int64_t reduction);                   \
  at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target, \
                               int64_t reduction);                                                             \
  std::tuple<at::Tensor, at::Tensor> fused_cross_entropy(const at::Tensor& logits, const at::Tensor& target,   \
                                                         int64_t ignore_index, double label_smoothing,         \
                                                         int64_t reduction);                                   \
  at::Tensor fused_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& logits,                    \
                                          const at::Tensor& target, const at::Tensor& lse, int64_t ignore_index, \
                                          double label_smoothing, int64_t reduction);                          \
  std::tuple<at::Tensor, at::Tensor> fused_cross_entropy_grad(const at::Tensor& logits, const at::Tensor& target, \
                                                              int64_t ignore_index, double label_smoothing,    \
                                                              int64_t reduction,                               \
                                                              const c10::optional<at::Tensor>& divisor);       \
  std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_linear_cross_entropy(                                   \
      const at::Tensor& input, const at::Tensor& weight, const at::Tensor& target, int64_t ignore_index,       \
      double label_smoothing, int64_t reduction, int64_t chunk_size, const c10::optional<at::Tensor>& divisor);

namespace cpu {
MYTORCH_LOSS_DECLS
}  // namespace cpu
namespace cuda {
MYTORCH_LOSS_DECLS
}  // namespace cuda

#undef MYTORCH_LOSS_DECLS

}  // namespace mytorch
