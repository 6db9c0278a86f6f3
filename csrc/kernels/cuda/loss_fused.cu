// The loss family's large-vocabulary cross-entropies (CUDA): fused_cross_entropy (and its
// backward), fused_cross_entropy_grad and the fused linear + cross-entropy.
//
// Forward: one block per row streams the logits once, keeping a running max and a
// rescaled sum (chunked log-sum-exp), the sum of logits (label smoothing) and the
// target logit. It saves only lse (fp32, one per row): the softmax never exists.
// Backward: one pass writes dlogits = (softmax - (1-eps)*onehot - eps/C) * scale.
// The fused linear path runs both on each chunk of logits in one kernel, the gradient
// written over the logits, for a loss gradient of 1; its backward applies the real one
// with scale_ (in place, nothing to do when it is 1).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/loss_one_pass.cuh"
#include "kernels/cuda/loss_reduce.h"
#include "kernels/cuda/loss_checks.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/loss_checks.h"

namespace mytorch {
namespace cuda {
namespace {

constexpr int kCeThreads = 512;

template <typename T, int VEC>
__global__ void __launch_bounds__(kCeThreads) ce_fwd_kernel(const T* __restrict__ logits,
                                                           const int64_t* __restrict__ target,
                                                           float* __restrict__ lse_out, float* __restrict__ loss_out,
                                                           int64_t rows, int64_t C, int64_t ignore_index,
                                                           float smoothing) {
  __shared__ float buf[33];
  const int64_t nv = C / VEC;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = logits + row * C;
    float m = -INFINITY, s = 0.f, sx = 0.f;
    for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
      auto v = load_vec<T, VEC>(xr + j * VEC);
      float f[VEC];
      float vm = -INFINITY;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        f[k] = (float)v.v[k];
        vm = fmaxf(vm, f[k]);
        sx += f[k];
      }
      float mn = fmaxf(m, vm);
      const float m0 = mn == -INFINITY ? 0.f : mn;  // all -inf so far: exp(-inf) = 0, not NaN
      float acc = 0.f;
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc += __expf(f[k] - m0);
      s = (m == -INFINITY ? 0.f : s * __expf(m - mn)) + acc;
      m = mn;
    }
    float bm = block_max(m, buf);
    s = m == -INFINITY ? 0.f : s * __expf(m - bm);
    s = block_sum(s, buf);
    if (smoothing > 0.f) sx = block_sum(sx, buf);
    if (threadIdx.x == 0) {
      float lse = bm + __logf(s);
      lse_out[row] = lse;
      int64_t t = target[row];
      float loss = 0.f;
      if (t != ignore_index && (t < 0 || t >= C)) {
        loss = NAN;  // an out-of-range target: check_targets has asserted; no read
      } else if (t != ignore_index) {
        float xt = (float)xr[t];
        // thread 0's own sx (block-summed only with smoothing) may be -inf: no 0 * -inf
        loss = lse - (1.f - smoothing) * xt - (smoothing > 0.f ? smoothing * sx / (float)C : 0.f);
      }
      loss_out[row] = loss;
    }
  }
}

// scale of row r: gscale[r * gstride] / (denom ? *denom : 1)
template <typename T, int VEC>
__global__ void __launch_bounds__(kCeThreads) ce_bwd_kernel(const T* logits, const int64_t* __restrict__ target,
                                                           const float* __restrict__ lse,
                                                           const float* __restrict__ gscale, int64_t gstride,
                                                           const float* __restrict__ denom, T* dx, int64_t rows,
                                                           int64_t C, int64_t ignore_index, float smoothing) {
  const int64_t nv = C / VEC;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = logits + row * C;
    T* dr = dx + row * C;
    const int64_t t = target[row];
    const bool ignored = t == ignore_index;
    float scale = gscale[row * gstride];
    if (!ignored && (t < 0 || t >= C)) scale = NAN;  // out-of-range target: check_targets has asserted
    if (denom) scale /= *denom;
    const float l = lse[row];
    const float off = smoothing / (float)C;
    const float hit = 1.f - smoothing;
    for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
      Vec<T, VEC> o;
      if (ignored) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.v[k] = (T)0.f;
      } else {
        auto v = load_vec<T, VEC>(xr + j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          float p = __expf((float)v.v[k] - l) - off;
          if (j * VEC + k == t) p -= hit;
          o.v[k] = (T)(p * scale);
        }
      }
      store_vec<T, VEC>(dr + j * VEC, o);
    }
  }
}

using Reduction = at::Reduction::Reduction;
using mytorch::loss::check_reduction;

void check_ce_args(const char* op, const at::Tensor& logits, const at::Tensor& target, int64_t rows,
                   int64_t ignore_index, double smoothing) {
  check_cuda(op, "target", target);
  check_same_device(op, logits, "logits", target, "target");
  mytorch::loss::check_ce_target(op, target, rows, smoothing);
}

// Every target is a class index or ignore_index: one kernel that asserts on the device
// otherwise (IndexCheck; no host read, so it also runs inside a CUDA graph capture).
void check_targets(const char* op, const at::Tensor& target, int64_t C, int64_t ignore_index) {
  const int64_t n = target.numel();
  if (n == 0) return;
  const at::Tensor t = target.contiguous();
  loss::check_targets_kernel<int64_t><<<grid_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      t.const_data_ptr<int64_t>(), nullptr, n, C, IndexCheck(op, "target", ignore_index));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// logits [rows, C] (CUDA, a training dtype, C > 0 unless empty) and their targets.
void check_logits_and_targets(const char* op, const at::Tensor& logits, const at::Tensor& target,
                              int64_t ignore_index, double smoothing) {
  check_cuda(op, "logits", logits);
  check_cuda_float(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  check_ce_args(op, logits, target, logits.size(0), ignore_index, smoothing);
  const int64_t rows = logits.size(0), C = logits.size(1);
  TORCH_CHECK(C > 0 || rows == 0, op, ": expected at least one class, got logits of shape ", logits.sizes());
  check_targets(op, target, C, ignore_index);
}

template <typename T>
int ce_vec(int64_t C, std::initializer_list<const void*> ptrs) {
  constexpr int V = vec16<T>();
  if (C % V != 0) return 1;
  for (auto p : ptrs)
    if (!aligned16(p)) return 1;
  return V;
}

int ce_grid(int64_t rows) { return (int)std::min<int64_t>(rows, 1 << 30); }

void launch_ce_fwd(const at::Tensor& logits, const at::Tensor& target, at::Tensor& lse, at::Tensor& loss_rows,
                   int64_t ignore_index, double smoothing) {
  int64_t rows = logits.size(0), C = logits.size(1);
  if (rows == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(logits.scalar_type(), "mytorch_ce_fwd_cuda", [&] {
    using T = scalar_t;
    const T* xp = logits.const_data_ptr<T>();
    constexpr int V = vec16<T>();
    auto k = ce_vec<T>(C, {xp}) > 1 ? ce_fwd_kernel<T, V> : ce_fwd_kernel<T, 1>;
    k<<<ce_grid(rows), kCeThreads, 0, stream>>>(xp, target.const_data_ptr<int64_t>(), lse.mutable_data_ptr<float>(),
                                                loss_rows.mutable_data_ptr<float>(), rows, C, ignore_index,
                                                (float)smoothing);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// dx may be the logits tensor itself (in place).
void launch_ce_bwd(const at::Tensor& logits, const at::Tensor& target, const at::Tensor& lse,
                   const at::Tensor& gscale, int64_t gstride, const at::Tensor* denom, at::Tensor& dx,
                   int64_t ignore_index, double smoothing) {
  int64_t rows = logits.size(0), C = logits.size(1);
  if (rows == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(logits.scalar_type(), "mytorch_ce_bwd_cuda", [&] {
    using T = scalar_t;
    const T* xp = logits.const_data_ptr<T>();
    T* dp = dx.mutable_data_ptr<T>();
    constexpr int V = vec16<T>();
    auto k = ce_vec<T>(C, {xp, dp}) > 1 ? ce_bwd_kernel<T, V> : ce_bwd_kernel<T, 1>;
    k<<<ce_grid(rows), kCeThreads, 0, stream>>>(xp, target.const_data_ptr<int64_t>(), lse.const_data_ptr<float>(),
                                                gscale.const_data_ptr<float>(), gstride,
                                                denom ? denom->const_data_ptr<float>() : nullptr, dp, rows, C,
                                                ignore_index, (float)smoothing);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor reduce_loss(const at::Tensor& loss_rows, const at::Tensor& target, int64_t ignore_index, Reduction red,
                       at::ScalarType out_dtype) {
  if (red == at::Reduction::None) return loss_rows.to(out_dtype);
  return loss_total(loss_rows, ce_denominator(red, target, ignore_index, at::Tensor()), out_dtype);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> fused_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                                 int64_t ignore_index, double label_smoothing,
                                                 int64_t reduction) {
  const char* op = "mytorch::fused_cross_entropy";
  const Reduction red = check_reduction(op, reduction);
  check_logits_and_targets(op, logits, target, ignore_index, label_smoothing);
  c10::cuda::CUDAGuard guard(logits.device());
  int64_t rows = logits.size(0);
  at::Tensor xc = logits.contiguous(), tc = target.contiguous();
  auto fopts = logits.options().dtype(at::kFloat);
  at::Tensor lse = aten::empty({rows}, fopts), loss_rows = aten::empty({rows}, fopts);
  launch_ce_fwd(xc, tc, lse, loss_rows, ignore_index, label_smoothing);
  return {reduce_loss(loss_rows, tc, ignore_index, red, logits.scalar_type()), lse};
}

at::Tensor fused_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& logits, const at::Tensor& target,
                                  const at::Tensor& lse, int64_t ignore_index, double label_smoothing,
                                  int64_t reduction) {
  const char* op = "mytorch::fused_cross_entropy_backward";
  const Reduction red = check_reduction(op, reduction);
  check_cuda(op, "logits", logits);
  check_cuda_float(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  int64_t rows = logits.size(0);
  check_ce_args(op, logits, target, rows, ignore_index, label_smoothing);
  mytorch::loss::check_ce_backward(op, grad, lse, rows, red, at::kFloat);
  check_same_device(op, grad, "grad", logits, "logits");
  c10::cuda::CUDAGuard guard(logits.device());
  at::Tensor xc = logits.contiguous(), tc = target.contiguous(), lc = lse.contiguous();
  at::Tensor gs = grad.to(at::kFloat).contiguous();
  at::Tensor dx = aten::empty_like(xc);
  at::Tensor denom = ce_denominator(red, tc, ignore_index, at::Tensor());
  launch_ce_bwd(xc, tc, lc, gs, red == at::Reduction::None ? 1 : 0, red == at::Reduction::Mean ? &denom : nullptr, dx,
                ignore_index, label_smoothing);
  return dx;
}

std::tuple<at::Tensor, at::Tensor> fused_cross_entropy_grad(const at::Tensor& logits, const at::Tensor& target,
                                                            int64_t ignore_index, double label_smoothing,
                                                            int64_t reduction,
                                                            const c10::optional<at::Tensor>& divisor) {
  const char* op = "mytorch::fused_cross_entropy_grad";
  const Reduction red = check_reduction(op, reduction, /*allow_none=*/false);
  check_logits_and_targets(op, logits, target, ignore_index, label_smoothing);
  at::Tensor div = mytorch::loss::ce_divisor(op, divisor, logits);
  c10::cuda::CUDAGuard guard(logits.device());
  int64_t rows = logits.size(0);
  at::Tensor xc = logits.contiguous(), tc = target.contiguous();
  auto fopts = logits.options().dtype(at::kFloat);
  at::Tensor lse = aten::empty({rows}, fopts), loss_rows = aten::empty({rows}, fopts);
  at::Tensor dx = aten::empty_like(xc);
  at::Tensor denom = ce_denominator(red, tc, ignore_index, div);
  launch_ce_fwd_bwd(xc, dx, tc, lse, loss_rows, denom.defined() ? &denom : nullptr, ignore_index, label_smoothing);
  return {loss_total(loss_rows, denom, logits.scalar_type()), dx};
}

// Loss of softmax(input @ weight.T) without keeping the logits: chunks of tokens go
// through cuBLAS, the CE kernels (gradient written in place into the chunk) and two
// more GEMMs that accumulate grad_input and grad_weight.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_linear_cross_entropy(
    const at::Tensor& input, const at::Tensor& weight, const at::Tensor& target, int64_t ignore_index,
    double label_smoothing, int64_t reduction, int64_t chunk_size, const c10::optional<at::Tensor>& divisor) {
  const char* op = "mytorch::fused_linear_cross_entropy";
  const Reduction red = check_reduction(op, reduction, /*allow_none=*/false);
  check_cuda(op, "input", input);
  check_cuda_float(op, "input", input);
  mytorch::loss::check_linear_ce(op, input, weight, chunk_size);
  int64_t N = input.size(0), V = weight.size(0);
  check_ce_args(op, input, target, N, ignore_index, label_smoothing);
  at::Tensor div = mytorch::loss::ce_divisor(op, divisor, input);
  c10::cuda::CUDAGuard guard(input.device());
  check_targets(op, target, V, ignore_index);
  at::Tensor x = input.contiguous(), w = weight.contiguous(), tc = target.contiguous();
  auto fopts = input.options().dtype(at::kFloat);
  at::Tensor loss_rows = aten::empty({N}, fopts), lse = aten::empty({N}, fopts);
  at::Tensor grad_input = aten::empty_like(x), grad_weight = aten::empty_like(w);
  if (N == 0) grad_weight.zero_();
  at::Tensor denom = ce_denominator(red, tc, ignore_index, div);
  if (chunk_size == 0) {
    // H rows: a chunk's logits (rows x V) are no larger than grad_weight (V x H), which the
    // backward holds twice anyway, and fewer chunks mean fewer passes of grad_weight's
    // accumulation (H100, N 8192, H 4096, V 128k: 1024-row chunks 43.5 ms, 4096-row 40.7 ms,
    // same peak); at least 256 MiB of logits, so small H still makes large GEMMs.
    int64_t floor_rows = (int64_t(256) << 20) / std::max<int64_t>(1, V * x.element_size());
    chunk_size = std::min<int64_t>(std::max<int64_t>(N, 1), std::max<int64_t>({1, input.size(1), floor_rows}));
  }
  for (int64_t s = 0; s < N; s += chunk_size) {
    int64_t e = std::min(N, s + chunk_size);
    at::Tensor xs = x.narrow(0, s, e - s), ts = tc.narrow(0, s, e - s);
    at::Tensor logits = aten::mm(xs, w.t());
    at::Tensor lse_s = lse.narrow(0, s, e - s), loss_s = loss_rows.narrow(0, s, e - s);
    launch_ce_fwd_bwd(logits, logits, ts, lse_s, loss_s, denom.defined() ? &denom : nullptr, ignore_index,
                      label_smoothing);
    at::Tensor gi = grad_input.narrow(0, s, e - s);
    aten::mm_out(gi, logits, w);
    if (s == 0) aten::mm_out(grad_weight, logits.t(), xs);  // the first chunk writes, the rest add
    else grad_weight.addmm_(logits.t(), xs);
  }
  return {loss_total(loss_rows, denom, input.scalar_type()), grad_input, grad_weight};
}

}  // namespace cuda
}  // namespace mytorch
