// Batch normalization kernels (OpenMP over channels). The input is viewed as
// (N, C, S), S the product of the trailing dims; statistics accumulate in double.
#include "kernels/batchnorm.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <cmath>

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kParallelGrain = 1 << 14;

using namespace batchnorm;  // Shape, OptTensor, opt, contig, ptr, mptr
using BnShape = Shape;

// ---- kernels: pointers and sizes only ----
// Training: batch statistics -> save_mean / save_invstd (and running stats if given).
template <typename T>
void bn_train_forward(const T* x, const T* w, const T* b, T* y, T* save_mean, T* save_invstd,
                      T* run_mean, T* run_var, double momentum, double eps, const BnShape& s) {
  const int64_t S = s.S, cnt = s.count();
#pragma omp parallel for schedule(static) if (s.N * s.C * S > kParallelGrain)
  for (int64_t c = 0; c < s.C; ++c) {
    double sum = 0;
    for (int64_t n = 0; n < s.N; ++n) {
      const T* xp = x + (n * s.C + c) * S;
      double part = 0;
#pragma omp simd reduction(+ : part)
      for (int64_t i = 0; i < S; ++i) part += xp[i];
      sum += part;
    }
    const double mean = sum / cnt;
    double sq = 0;
    for (int64_t n = 0; n < s.N; ++n) {
      const T* xp = x + (n * s.C + c) * S;
      double part = 0;
#pragma omp simd reduction(+ : part)
      for (int64_t i = 0; i < S; ++i) {
        const double d = xp[i] - mean;
        part += d * d;
      }
      sq += part;
    }
    const double var = sq / cnt;
    const double invstd = 1.0 / std::sqrt(var + eps);
    save_mean[c] = static_cast<T>(mean);
    save_invstd[c] = static_cast<T>(invstd);
    if (run_mean) run_mean[c] = static_cast<T>((1 - momentum) * run_mean[c] + momentum * mean);
    if (run_var && cnt > 1)
      run_var[c] = static_cast<T>((1 - momentum) * run_var[c] + momentum * var * cnt / (cnt - 1));
    // (x - mean) * scale + bias: centring first keeps a (near-)constant channel at its
    // exact value, where x * scale + shift would leave rounding noise times invstd. A
    // non-finite scale (Inf/NaN weight) takes ATen's x * scale + shift, so that it
    // propagates as there.
    const T scale = static_cast<T>(invstd * (w ? static_cast<double>(w[c]) : 1.0));
    const T bias = static_cast<T>(b ? static_cast<double>(b[c]) : 0.0);
    const bool finite = std::isfinite(static_cast<double>(scale));
    const T mu = finite ? static_cast<T>(mean) : T(0);
    const T shift = finite ? bias : static_cast<T>(static_cast<double>(bias) - mean * static_cast<double>(scale));
    for (int64_t n = 0; n < s.N; ++n) {
      const T* xp = x + (n * s.C + c) * S;
      T* yp = y + (n * s.C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) yp[i] = (xp[i] - mu) * scale + shift;
    }
  }
}

// Eval: y = (x - running_mean) / sqrt(running_var + eps) * w + b.
template <typename T>
void bn_eval_forward(const T* x, const T* w, const T* b, const T* rm, const T* rv, T* y,
                     double eps, const BnShape& s) {
  const int64_t S = s.S, NC = s.N * s.C;
#pragma omp parallel for schedule(static) if (NC * S > kParallelGrain)
  for (int64_t nc = 0; nc < NC; ++nc) {
    const int64_t c = nc % s.C;
    const double invstd = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
    const T scale = static_cast<T>(invstd * (w ? static_cast<double>(w[c]) : 1.0));
    const T shift = static_cast<T>((b ? static_cast<double>(b[c]) : 0.0) -
                                   static_cast<double>(rm[c]) * static_cast<double>(scale));
    const T* xp = x + nc * S;
    T* yp = y + nc * S;
#pragma omp simd
    for (int64_t i = 0; i < S; ++i) yp[i] = xp[i] * scale + shift;
  }
}

// Training: mean / stat are the saved batch mean and invstd.
// Eval: the running mean and running variance (invstd = 1 / sqrt(var + eps)).
template <typename T>
void bn_backward(const T* g, const T* x, const T* w, const T* mean, const T* stat, T* gx,
                 T* gw, T* gb, bool training, double eps, const BnShape& s) {
  const int64_t S = s.S, cnt = s.count();
#pragma omp parallel for schedule(static) if (s.N * s.C * S > kParallelGrain)
  for (int64_t c = 0; c < s.C; ++c) {
    const double mu = mean[c];
    const double is = training ? static_cast<double>(stat[c]) : 1.0 / std::sqrt(stat[c] + eps);
    double sum_g = 0, sum_gx = 0;  // sum(g), sum(g * (x - mu))
    for (int64_t n = 0; n < s.N; ++n) {
      const T* gp = g + (n * s.C + c) * S;
      const T* xp = x + (n * s.C + c) * S;
      double a = 0, bb = 0;
#pragma omp simd reduction(+ : a, bb)
      for (int64_t i = 0; i < S; ++i) {
        a += gp[i];
        bb += static_cast<double>(gp[i]) * (xp[i] - mu);
      }
      sum_g += a;
      sum_gx += bb;
    }
    if (gw) gw[c] = static_cast<T>(sum_gx * is);
    if (gb) gb[c] = static_cast<T>(sum_g);
    if (!gx) continue;
    const double wc = w ? static_cast<double>(w[c]) : 1.0;
    // gx = (g - mean_g - (x - mu) * is^2 * mean_gx) * is * w   (training)
    // gx = g * is * w                                             (eval)
    const T k1 = static_cast<T>(is * wc);
    const T k2 = static_cast<T>(training ? is * is * sum_gx / cnt : 0.0);
    const T k3 = static_cast<T>(training ? sum_g / cnt : 0.0);
    const T tmu = static_cast<T>(mu);
    for (int64_t n = 0; n < s.N; ++n) {
      const T* gp = g + (n * s.C + c) * S;
      const T* xp = x + (n * s.C + c) * S;
      T* op = gx + (n * s.C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) op[i] = (gp[i] - k3 - (xp[i] - tmu) * k2) * k1;
    }
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_forward(
    const char* op, const at::Tensor& x, const OptTensor& weight, const OptTensor& bias,
    const OptTensor& running_mean, const OptTensor& running_var, bool training,
    std::optional<double> momentum, double eps) {
  const at::Tensor *w = opt(weight), *b = opt(bias), *rm = opt(running_mean), *rv = opt(running_var);
  const BnShape s = batchnorm::check_forward(op, x, w, b, rm, rv, eps);
  at::Tensor xc = x.contiguous(), wc = contig(w), bc = contig(b);
  auto opts = x.options().memory_format(at::MemoryFormat::Contiguous);
  at::Tensor y = at::empty(x.sizes(), opts);
  if (!training) {
    batchnorm::check_eval_stats(op, rm, rv);
    at::Tensor rmc = rm->contiguous(), rvc = rv->contiguous();
    if (y.numel())
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "mytorch_bn_eval", [&] {
        bn_eval_forward<scalar_t>(xc.const_data_ptr<scalar_t>(), ptr<scalar_t>(wc), ptr<scalar_t>(bc),
                                  rmc.const_data_ptr<scalar_t>(), rvc.const_data_ptr<scalar_t>(),
                                  y.mutable_data_ptr<scalar_t>(), eps, s);
      });
    return {y, at::empty({0}, opts), at::empty({0}, opts)};
  }
  batchnorm::check_train_count(op, s, x);
  at::Tensor save_mean = at::empty({s.C}, opts), save_invstd = at::empty({s.C}, opts);
  // Running stats are updated in place: work on contiguous copies when needed, copy back.
  const bool update = momentum.has_value();
  at::Tensor rmc = update && rm ? rm->contiguous() : at::Tensor();
  at::Tensor rvc = update && rv ? rv->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "mytorch_bn_train", [&] {
    bn_train_forward<scalar_t>(xc.const_data_ptr<scalar_t>(), ptr<scalar_t>(wc), ptr<scalar_t>(bc),
                               y.mutable_data_ptr<scalar_t>(), save_mean.mutable_data_ptr<scalar_t>(),
                               save_invstd.mutable_data_ptr<scalar_t>(), mptr<scalar_t>(rmc),
                               mptr<scalar_t>(rvc), momentum.value_or(0.0), eps, s);
  });
  if (rmc.defined() && !rmc.is_same(*rm)) rm->copy_(rmc);
  if (rvc.defined() && !rvc.is_same(*rv)) rv->copy_(rvc);
  return {y, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_impl(
    const char* op, const at::Tensor& grad, const at::Tensor& x, const OptTensor& weight,
    const OptTensor& running_mean, const OptTensor& running_var, const OptTensor& save_mean,
    const OptTensor& save_invstd, bool training, double eps, std::array<bool, 3> mask) {
  const batchnorm::BackwardStats st = batchnorm::check_backward(op, grad, x, weight, running_mean, running_var,
                                                                save_mean, save_invstd, training);
  const BnShape& s = st.s;
  const at::Tensor &mean = st.mean, &invstd = st.stat;
  const at::Tensor* w = opt(weight);
  auto opts = x.options().memory_format(at::MemoryFormat::Contiguous);
  at::Tensor gx, gw, gb;
  if (mask[0]) gx = at::empty(x.sizes(), opts);
  if (mask[1]) gw = at::empty({s.C}, opts);
  if (mask[2]) gb = at::empty({s.C}, opts);
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), wc = contig(w);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "mytorch_bn_backward", [&] {
    bn_backward<scalar_t>(gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(),
                          ptr<scalar_t>(wc), mean.const_data_ptr<scalar_t>(),
                          invstd.const_data_ptr<scalar_t>(), mptr<scalar_t>(gx), mptr<scalar_t>(gw),
                          mptr<scalar_t>(gb), training, eps, s);
  });
  return {gx, gw, gb};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm(
    const at::Tensor& x, const OptTensor& weight, const OptTensor& bias,
    const OptTensor& running_mean, const OptTensor& running_var, bool training, double eps) {
  return batch_norm_forward("mytorch::batch_norm", x, weight, bias, running_mean, running_var,
                            training, std::nullopt, eps);
}

void batch_norm_update_stats(const at::Tensor& running_mean, const at::Tensor& running_var,
                             const at::Tensor& save_mean, const at::Tensor& save_invstd, double momentum,
                             double eps, int64_t count) {
  const char* op = "mytorch::batch_norm_update_stats_";
  batchnorm::check_update_stats(op, running_mean, running_var, save_mean, save_invstd, count);
  at::Tensor sm = save_mean.contiguous(), si = save_invstd.contiguous();
  AT_DISPATCH_FLOATING_TYPES(running_mean.scalar_type(), "mytorch_bn_update", [&] {
    scalar_t* rm = running_mean.mutable_data_ptr<scalar_t>();
    scalar_t* rv = running_var.mutable_data_ptr<scalar_t>();
    const scalar_t* m = sm.const_data_ptr<scalar_t>();
    const scalar_t* is = si.const_data_ptr<scalar_t>();
    for (int64_t c = 0; c < running_mean.size(0); ++c) {
      const double i = is[c], var = 1.0 / (i * i) - eps;
      rm[c] = static_cast<scalar_t>((1 - momentum) * rm[c] + momentum * m[c]);
      rv[c] = static_cast<scalar_t>((1 - momentum) * rv[c] + momentum * var * count / (count - 1));
    }
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad, const at::Tensor& x, const OptTensor& weight,
    const OptTensor& running_mean, const OptTensor& running_var, const OptTensor& save_mean,
    const OptTensor& save_invstd, bool training, double eps, std::array<bool, 3> mask) {
  return batch_norm_backward_impl("mytorch::batch_norm_backward", grad, x, weight, running_mean,
                                  running_var, save_mean, save_invstd, training, eps, mask);
}

}  // namespace cpu
}  // namespace mytorch
