// Input checks shared by the CPU (kernels/cpu/loss.cpp) and CUDA (kernels/cuda/loss.cu,
// loss_fused.cu) losses, so that both raise the same errors. Host code only.
#pragma once
#include <ATen/core/Reduction.h>

#include <string>
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

}  // namespace loss
}  // namespace mytorch
