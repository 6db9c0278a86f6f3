// Batch normalization (CUDA) over (N, C, S) inputs, S the product of the trailing dims:
// forward (training: batch statistics; eval: running statistics), the running-stat
// update and backward, with the checks of kernels/batchnorm.h. Per-channel sums are two-stage
// reductions in double, as the CPU kernel's (kernels/cpu/batchnorm.cpp): a grid of
// (channel, part) blocks writes partial sums, a per-channel kernel finishes them into
// the statistics and per-channel coefficients, and an elementwise kernel applies them.
#include <array>
#include <optional>
#include <tuple>
#include <utility>

#include "kernels/batchnorm.h"
#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {
namespace {

using namespace batchnorm;  // Shape, OptTensor, opt, contig, ptr, mptr
using BnShape = Shape;

// ---- per-channel partial sums ----
// Block (c, part) adds f(i, c, acc) over its share of channel c's N * S elements (i the flat
// index in (N, C, S)) and writes partial[(c * NV + v) * parts + part].
template <int NV, typename F>
__global__ void channel_partial_kernel(F f, int64_t N, int64_t C, int64_t S, int parts,
                                       double* __restrict__ partial) {
  __shared__ double buf[33];
  const int64_t c = blockIdx.x / parts;
  const int part = static_cast<int>(blockIdx.x % parts);
  const int64_t total = N * S, stride = static_cast<int64_t>(parts) * blockDim.x;
  int64_t j = static_cast<int64_t>(part) * blockDim.x + threadIdx.x;
  double acc[NV] = {};
  if (j < total) {
    int64_t n = j / S, s = j - n * S;  // (n, s) of j, stepped without dividing
    const int64_t dn = stride / S, ds = stride - dn * S;
    for (; j < total; j += stride) {
      f((n * C + c) * S + s, c, acc);
      s += ds;
      n += dn;
      if (s >= S) {
        s -= S;
        ++n;
      }
    }
  }
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const double r = block_sum(acc[v], buf);
    if (threadIdx.x == 0) partial[(c * NV + v) * parts + part] = r;
  }
}

__device__ __forceinline__ double sum_parts(const double* partial, int parts, int64_t row) {
  double s = 0;
  for (int p = 0; p < parts; ++p) s += partial[row * parts + p];
  return s;
}

template <typename T>
struct SumX {  // sum(x)
  const T* x;
  __device__ void operator()(int64_t i, int64_t, double* a) const { a[0] += static_cast<double>(x[i]); }
};

template <typename T>
struct SumSqDev {  // sum((x - mean)^2)
  const T* x;
  const double* mean;
  __device__ void operator()(int64_t i, int64_t c, double* a) const {
    const double d = static_cast<double>(x[i]) - mean[c];
    a[0] += d * d;
  }
};

template <typename T>
struct GradSums {  // sum(g), sum(g * (x - mu))
  const T* g;
  const T* x;
  const T* mu;
  __device__ void operator()(int64_t i, int64_t c, double* a) const {
    const double gi = static_cast<double>(g[i]);
    a[0] += gi;
    a[1] += gi * (static_cast<double>(x[i]) - static_cast<double>(mu[c]));
  }
};

// ---- per-channel finishing ----
__global__ void finish_mean_kernel(const double* __restrict__ partial, int parts, int64_t C, double cnt,
                                   double* __restrict__ mean) {
  MYTORCH_GRID_LOOP(int64_t, c, C) mean[c] = sum_parts(partial, parts, c) / cnt;
}

// Batch statistics -> save_mean / save_invstd and coef = (scale, shift) per channel.
template <typename T>
__global__ void finish_train_kernel(const double* __restrict__ partial, int parts,
                                    const double* __restrict__ mean, const T* __restrict__ w,
                                    const T* __restrict__ b, int64_t C, double cnt, double eps,
                                    T* __restrict__ save_mean, T* __restrict__ save_invstd,
                                    T* __restrict__ coef) {
  MYTORCH_GRID_LOOP(int64_t, c, C) {
    const double m = mean[c], var = sum_parts(partial, parts, c) / cnt;
    const double invstd = 1.0 / ::sqrt(var + eps);
    save_mean[c] = static_cast<T>(m);
    save_invstd[c] = static_cast<T>(invstd);
    const T scale = static_cast<T>(invstd * (w ? static_cast<double>(w[c]) : 1.0));
    coef[c] = scale;
    coef[C + c] = static_cast<T>((b ? static_cast<double>(b[c]) : 0.0) - m * static_cast<double>(scale));
  }
}

// Running statistics -> coef = (scale, shift) per channel (eval).
template <typename T>
__global__ void eval_coef_kernel(const T* __restrict__ rm, const T* __restrict__ rv, const T* __restrict__ w,
                                 const T* __restrict__ b, int64_t C, double eps, T* __restrict__ coef) {
  MYTORCH_GRID_LOOP(int64_t, c, C) {
    const double invstd = 1.0 / ::sqrt(static_cast<double>(rv[c]) + eps);
    const T scale = static_cast<T>(invstd * (w ? static_cast<double>(w[c]) : 1.0));
    coef[c] = scale;
    coef[C + c] = static_cast<T>((b ? static_cast<double>(b[c]) : 0.0) -
                                 static_cast<double>(rm[c]) * static_cast<double>(scale));
  }
}

// y = x * scale[c] + shift[c]
template <typename T, typename I>
__global__ void affine_kernel(const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ coef, I C,
                              I S, I total) {
  MYTORCH_GRID_LOOP(I, i, total) {
    const I c = (i / S) % C;
    y[i] = x[i] * coef[c] + coef[C + c];
  }
}

// Sums -> grad_weight, grad_bias and coef = (k1, k2, k3, mu) for
//   gx = (g - k3 - (x - mu) * k2) * k1
// Training: mean / stat are save_mean / save_invstd; eval: running mean / running var.
template <typename T>
__global__ void finish_backward_kernel(const double* __restrict__ partial, int parts,
                                       const T* __restrict__ mean, const T* __restrict__ stat,
                                       const T* __restrict__ w, int64_t C, double cnt, bool training,
                                       double eps, T* __restrict__ gw, T* __restrict__ gb,
                                       T* __restrict__ coef) {
  MYTORCH_GRID_LOOP(int64_t, c, C) {
    const double sum_g = sum_parts(partial, parts, 2 * c), sum_gx = sum_parts(partial, parts, 2 * c + 1);
    const double is = training ? static_cast<double>(stat[c]) : 1.0 / ::sqrt(static_cast<double>(stat[c]) + eps);
    if (gw) gw[c] = static_cast<T>(sum_gx * is);
    if (gb) gb[c] = static_cast<T>(sum_g);
    const double wc = w ? static_cast<double>(w[c]) : 1.0;
    coef[c] = static_cast<T>(is * wc);
    coef[C + c] = static_cast<T>(training ? is * is * sum_gx / cnt : 0.0);
    coef[2 * C + c] = static_cast<T>(training ? sum_g / cnt : 0.0);
    coef[3 * C + c] = mean[c];
  }
}

template <typename T, typename I>
__global__ void grad_input_kernel(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ coef,
                                  T* __restrict__ gx, I C, I S, I total) {
  MYTORCH_GRID_LOOP(I, i, total) {
    const I c = (i / S) % C;
    gx[i] = (g[i] - coef[2 * C + c] - (x[i] - coef[3 * C + c]) * coef[C + c]) * coef[c];
  }
}

template <typename T>
__global__ void update_stats_kernel(T* __restrict__ rm, T* __restrict__ rv, const T* __restrict__ m,
                                    const T* __restrict__ is, int64_t C, double momentum, double eps,
                                    int64_t count) {
  MYTORCH_GRID_LOOP(int64_t, c, C) {
    const double i = static_cast<double>(is[c]), var = 1.0 / (i * i) - eps;
    rm[c] = static_cast<T>((1 - momentum) * static_cast<double>(rm[c]) + momentum * static_cast<double>(m[c]));
    rv[c] = static_cast<T>((1 - momentum) * static_cast<double>(rv[c]) +
                           momentum * var * static_cast<double>(count) / static_cast<double>(count - 1));
  }
}

// ---- launches ----
// Partial sums of f per channel; returns them and sets `parts`.
template <int NV, typename F>
at::Tensor channel_sums(const F& f, const BnShape& s, const at::Tensor& like, int& parts) {
  constexpr int kBlock = 256;
  const int64_t per_channel = (s.count() + kBlock * 8 - 1) / (kBlock * 8);  // >= 8 items a thread
  const int64_t fill = (static_cast<int64_t>(num_sms()) * 4 + s.C - 1) / s.C;  // blocks to fill the GPU
  parts = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({per_channel, fill, 1024})));
  at::Tensor partial = aten::empty({s.C * NV * parts}, like.options().dtype(at::kDouble));
  channel_partial_kernel<NV, F><<<static_cast<unsigned>(s.C * parts), kBlock, 0, at::cuda::getCurrentCUDAStream()>>>(
      f, s.N, s.C, s.S, parts, partial.mutable_data_ptr<double>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

template <typename T>
void apply_affine(const at::Tensor& x, at::Tensor& y, const at::Tensor& coef, const BnShape& s) {
  const int64_t total = y.numel();
  with_index_type(total, [&](auto tag) {
    using I = decltype(tag);
    affine_kernel<T, I><<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<T>(), y.mutable_data_ptr<T>(), coef.const_data_ptr<T>(), I(s.C), I(s.S), I(total));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm(const at::Tensor& x, const OptTensor& weight,
                                                          const OptTensor& bias, const OptTensor& running_mean,
                                                          const OptTensor& running_var, bool training, double eps) {
  const char* op = "mytorch::batch_norm";
  const at::Tensor *w = opt(weight), *b = opt(bias), *rm = opt(running_mean), *rv = opt(running_var);
  const BnShape s = batchnorm::check_forward(op, x, w, b, rm, rv, eps);
  check_cuda(op, "x", x);
  c10::cuda::CUDAGuard guard(x.device());
  auto opts = contiguous_options(x);
  at::Tensor xc = x.contiguous(), wc = contig(w), bc = contig(b);
  at::Tensor y = aten::empty(x.sizes(), opts);
  const int64_t C = s.C;
  if (!training) {
    batchnorm::check_eval_stats(op, rm, rv);
    at::Tensor rmc = rm->contiguous(), rvc = rv->contiguous();
    if (y.numel())
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "mytorch_bn_eval_cuda", [&] {
        at::Tensor coef = aten::empty({2 * C}, opts);
        eval_coef_kernel<scalar_t><<<blocks_for(C), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            rmc.const_data_ptr<scalar_t>(), rvc.const_data_ptr<scalar_t>(), ptr<scalar_t>(wc),
            ptr<scalar_t>(bc), C, eps, coef.mutable_data_ptr<scalar_t>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        apply_affine<scalar_t>(xc, y, coef, s);
      });
    return {y, aten::empty({0}, opts), aten::empty({0}, opts)};
  }
  batchnorm::check_train_count(op, s, x);
  at::Tensor save_mean = aten::empty({C}, opts), save_invstd = aten::empty({C}, opts);
  if (C == 0) return {y, save_mean, save_invstd};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "mytorch_bn_train_cuda", [&] {
    using T = scalar_t;
    auto stream = at::cuda::getCurrentCUDAStream();
    const T* xp = xc.const_data_ptr<T>();
    const double cnt = static_cast<double>(s.count());
    int parts = 1;
    at::Tensor sums = channel_sums<1>(SumX<T>{xp}, s, x, parts);
    at::Tensor mean = aten::empty({C}, x.options().dtype(at::kDouble));
    finish_mean_kernel<<<blocks_for(C), kThreads, 0, stream>>>(sums.const_data_ptr<double>(), parts, C, cnt,
                                                                mean.mutable_data_ptr<double>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    sums = channel_sums<1>(SumSqDev<T>{xp, mean.const_data_ptr<double>()}, s, x, parts);
    at::Tensor coef = aten::empty({2 * C}, opts);
    finish_train_kernel<T><<<blocks_for(C), kThreads, 0, stream>>>(
        sums.const_data_ptr<double>(), parts, mean.const_data_ptr<double>(), ptr<T>(wc), ptr<T>(bc), C, cnt,
        eps, save_mean.mutable_data_ptr<T>(), save_invstd.mutable_data_ptr<T>(), coef.mutable_data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    apply_affine<T>(xc, y, coef, s);
  });
  return {y, save_mean, save_invstd};
}

void batch_norm_update_stats(const at::Tensor& running_mean, const at::Tensor& running_var,
                             const at::Tensor& save_mean, const at::Tensor& save_invstd, double momentum,
                             double eps, int64_t count) {
  const char* op = "mytorch::batch_norm_update_stats_";
  batchnorm::check_update_stats(op, running_mean, running_var, save_mean, save_invstd, count);
  check_cuda(op, "running_mean", running_mean);
  c10::cuda::CUDAGuard guard(running_mean.device());
  const int64_t C = running_mean.size(0);
  if (C == 0) return;
  at::Tensor sm = save_mean.contiguous(), si = save_invstd.contiguous();
  AT_DISPATCH_FLOATING_TYPES(running_mean.scalar_type(), "mytorch_bn_update_cuda", [&] {
    update_stats_kernel<scalar_t><<<blocks_for(C), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        running_mean.mutable_data_ptr<scalar_t>(), running_var.mutable_data_ptr<scalar_t>(),
        sm.const_data_ptr<scalar_t>(), si.const_data_ptr<scalar_t>(), C, momentum, eps, count);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad, const at::Tensor& x, const OptTensor& weight, const OptTensor& running_mean,
    const OptTensor& running_var, const OptTensor& save_mean, const OptTensor& save_invstd, bool training,
    double eps, std::array<bool, 3> mask) {
  const char* op = "mytorch::batch_norm_backward";
  const batchnorm::BackwardStats st = batchnorm::check_backward(op, grad, x, weight, running_mean, running_var,
                                                                save_mean, save_invstd, training);
  const BnShape& s = st.s;
  const at::Tensor &mean = st.mean, &stat = st.stat;
  const at::Tensor* w = opt(weight);
  check_cuda(op, "x", x);
  c10::cuda::CUDAGuard guard(x.device());
  auto opts = contiguous_options(x);
  at::Tensor gx, gw, gb;
  if (mask[0]) gx = aten::empty(x.sizes(), opts);
  if (mask[1]) gw = aten::empty({s.C}, opts);
  if (mask[2]) gb = aten::empty({s.C}, opts);
  const int64_t C = s.C;
  if (C == 0) return {gx, gw, gb};
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), wc = contig(w);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "mytorch_bn_backward_cuda", [&] {
    using T = scalar_t;
    auto stream = at::cuda::getCurrentCUDAStream();
    int parts = 1;
    at::Tensor sums = channel_sums<2>(GradSums<T>{gc.const_data_ptr<T>(), xc.const_data_ptr<T>(),
                                                  mean.const_data_ptr<T>()}, s, x, parts);
    at::Tensor coef = aten::empty({4 * C}, opts);
    finish_backward_kernel<T><<<blocks_for(C), kThreads, 0, stream>>>(
        sums.const_data_ptr<double>(), parts, mean.const_data_ptr<T>(), stat.const_data_ptr<T>(), ptr<T>(wc), C,
        static_cast<double>(s.count()), training, eps, mptr<T>(gw), mptr<T>(gb), coef.mutable_data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const int64_t total = gx.defined() ? gx.numel() : 0;
    if (total == 0) return;
    with_index_type(total, [&](auto tag) {
      using I = decltype(tag);
      grad_input_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(
          gc.const_data_ptr<T>(), xc.const_data_ptr<T>(), coef.const_data_ptr<T>(), gx.mutable_data_ptr<T>(),
          I(C), I(s.S), I(total));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {gx, gw, gb};
}

}  // namespace cuda
}  // namespace mytorch
