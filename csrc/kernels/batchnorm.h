// The batch-norm family: batch_norm, batch_norm_update_stats_, batch_norm_backward. The checks
// and shape math both backends share, so that they raise the same errors, and the entry points
// of each (kernels/cpu/batchnorm.cpp, kernels/cuda/batchnorm.cu). The input is viewed as
// (N, C, S), S the product of the trailing dims. Host code only.
#pragma once
#include <array>
#include <optional>
#include <tuple>
#include <utility>

#include "checks.h"

namespace mytorch {
namespace batchnorm {

using OptTensor = std::optional<at::Tensor>;

struct Shape {
  int64_t N, C, S;
  int64_t count() const { return N * S; }
};

inline const at::Tensor* opt(const OptTensor& t) { return t.has_value() && t->defined() ? &*t : nullptr; }
inline at::Tensor contig(const at::Tensor* t) { return t ? t->contiguous() : at::Tensor(); }

// The data of an optional tensor (undefined: null), for the kernels' optional weight, bias and
// statistics.
template <typename T>
const T* ptr(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr<T>() : nullptr;
}
template <typename T>
T* mptr(const at::Tensor& t) {
  return t.defined() ? t.mutable_data_ptr<T>() : nullptr;
}

inline Shape shape(const char* op, const at::Tensor& x) {
  check_dtype(op, "x", x, {at::kFloat, at::kDouble});
  TORCH_CHECK(x.dim() >= 2, op, ": expected x to be at least 2-D (N, C, ...), got a ", x.dim(),
              "-D tensor of shape ", shape_str(x.sizes()));
  Shape s{x.size(0), x.size(1), 1};
  for (int64_t d = 2; d < x.dim(); ++d) s.S *= x.size(d);
  return s;
}

// A per-channel tensor (weight, bias, a statistic), where given: x's dtype and device, shape [C].
inline void check_channel_param(const char* op, const char* name, const at::Tensor* t, const at::Tensor& x) {
  if (!t) return;
  check_same_dtype(op, x, "x", *t, name);
  check_same_device(op, x, "x", *t, name);
  TORCH_CHECK(t->dim() == 1 && t->size(0) == x.size(1), op, ": expected ", name, " of shape [",
              x.size(1), "] (one value per channel), got ", shape_str(t->sizes()));
}

// The forward's checks, all but the mode's (check_eval_stats, check_train_count).
inline Shape check_forward(const char* op, const at::Tensor& x, const at::Tensor* w, const at::Tensor* b,
                           const at::Tensor* rm, const at::Tensor* rv, double eps) {
  Shape s = shape(op, x);
  check_channel_param(op, "weight", w, x);
  check_channel_param(op, "bias", b, x);
  check_channel_param(op, "running_mean", rm, x);
  check_channel_param(op, "running_var", rv, x);
  TORCH_CHECK(eps >= 0, op, ": expected eps >= 0, got ", eps);
  return s;
}

inline void check_eval_stats(const char* op, const at::Tensor* rm, const at::Tensor* rv) {
  TORCH_CHECK(rm && rv, op, ": expected running_mean and running_var in eval mode (training=False)");
}

inline void check_train_count(const char* op, const Shape& s, const at::Tensor& x) {
  TORCH_CHECK(s.count() > 1, op, ": expected more than 1 value per channel when training, got x of shape ",
              shape_str(x.sizes()));
}

// The statistics the backward reads, contiguous: (save_mean, save_invstd) when training,
// (running_mean, running_var) in eval.
struct BackwardStats {
  Shape s;
  at::Tensor mean, stat;
};

// The backward's checks: grad against x, every tensor given on x's device (the ones this mode
// does not read included), the weight, and the statistics of the mode.
inline BackwardStats check_backward(const char* op, const at::Tensor& grad, const at::Tensor& x,
                                    const OptTensor& weight, const OptTensor& running_mean,
                                    const OptTensor& running_var, const OptTensor& save_mean,
                                    const OptTensor& save_invstd, bool training) {
  BackwardStats r{shape(op, x), {}, {}};
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  check_same_shape(op, grad, "grad", x, "x");
  for (auto [t, name] : {std::pair{&weight, "weight"}, {&running_mean, "running_mean"},
                         {&running_var, "running_var"}, {&save_mean, "save_mean"},
                         {&save_invstd, "save_invstd"}}) {
    if (opt(*t)) check_same_device(op, *opt(*t), name, x, "x");
  }
  check_channel_param(op, "weight", opt(weight), x);
  const at::Tensor *m, *st;
  const char *mname, *stname;
  if (training) {
    m = opt(save_mean), st = opt(save_invstd), mname = "save_mean", stname = "save_invstd";
    TORCH_CHECK(m && st, op, ": expected save_mean and save_invstd when training");
  } else {
    m = opt(running_mean), st = opt(running_var), mname = "running_mean", stname = "running_var";
    check_eval_stats(op, m, st);
  }
  check_channel_param(op, mname, m, x);
  check_channel_param(op, stname, st, x);
  r.mean = m->contiguous();
  r.stat = st->contiguous();
  return r;
}

// batch_norm_update_stats_: running stats (updated in place) and the saved batch statistics.
inline void check_update_stats(const char* op, const at::Tensor& running_mean, const at::Tensor& running_var,
                               const at::Tensor& save_mean, const at::Tensor& save_invstd, int64_t count) {
  check_dtype(op, "running_mean", running_mean, {at::kFloat, at::kDouble});
  TORCH_CHECK(running_mean.dim() == 1, op, ": expected running_mean to be 1-D, got ",
              shape_str(running_mean.sizes()));
  for (auto* t : {&running_var, &save_mean, &save_invstd}) {
    check_same_dtype(op, running_mean, "running_mean", *t, "the statistics");
    check_same_device(op, running_mean, "running_mean", *t, "the statistics");
    TORCH_CHECK(t->dim() == 1 && t->size(0) == running_mean.size(0), op, ": expected 1-D statistics of shape [",
                running_mean.size(0), "], got ", shape_str(t->sizes()));
  }
  TORCH_CHECK(running_mean.is_contiguous() && running_var.is_contiguous(), op,
              ": expected contiguous running_mean and running_var");
  TORCH_CHECK(count > 1, op, ": expected count > 1 (values per channel), got ", count);
}

}  // namespace batchnorm

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
#define MYTORCH_BATCHNORM_OPS                                                                               \
  std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm(                                               \
      const at::Tensor& x, const batchnorm::OptTensor& weight, const batchnorm::OptTensor& bias,           \
      const batchnorm::OptTensor& running_mean, const batchnorm::OptTensor& running_var, bool training,    \
      double eps);                                                                                          \
  void batch_norm_update_stats(const at::Tensor& running_mean, const at::Tensor& running_var,              \
                               const at::Tensor& save_mean, const at::Tensor& save_invstd, double momentum, \
                               double eps, int64_t count);                                                  \
  std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(                                      \
      const at::Tensor& grad, const at::Tensor& x, const batchnorm::OptTensor& weight,                     \
      const batchnorm::OptTensor& running_mean, const batchnorm::OptTensor& running_var,                   \
      const batchnorm::OptTensor& save_mean, const batchnorm::OptTensor& save_invstd, bool training,       \
      double eps, std::array<bool, 3> mask);

namespace cpu {
MYTORCH_BATCHNORM_OPS
// The forward and backward under any op name, for the aten routes of the mytorch device
// (csrc/aten/batchnorm.cpp). Training normalizes with the batch statistics and, when momentum is
// given and running stats are defined, updates them in place (unbiased variance); eval
// normalizes with the running stats and returns empty save_*.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_forward(
    const char* op, const at::Tensor& x, const batchnorm::OptTensor& weight, const batchnorm::OptTensor& bias,
    const batchnorm::OptTensor& running_mean, const batchnorm::OptTensor& running_var, bool training,
    std::optional<double> momentum, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_impl(
    const char* op, const at::Tensor& grad, const at::Tensor& x, const batchnorm::OptTensor& weight,
    const batchnorm::OptTensor& running_mean, const batchnorm::OptTensor& running_var,
    const batchnorm::OptTensor& save_mean, const batchnorm::OptTensor& save_invstd, bool training, double eps,
    std::array<bool, 3> mask);
}  // namespace cpu

namespace cuda {
MYTORCH_BATCHNORM_OPS
}  // namespace cuda

#undef MYTORCH_BATCHNORM_OPS

}  // namespace mytorch
