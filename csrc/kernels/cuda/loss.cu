// Losses (CUDA), as kernels/cpu/loss.cpp: nll_loss (any spatial dims), the fused
// cross_entropy (log-softmax + nll + label smoothing, with class weights) and
// mse_loss; forward and backward; float32/64, bfloat16, float16.
//
// Targets are checked on the device before any kernel reads the input with them
// (one read-back): a target outside [0, C) that is not ignore_index raises
// IndexError with the CPU kernel's message. Reductions are deterministic two-stage
// sums in double. cross_entropy: one block per row.
#include <ATen/core/Reduction.h>

#include "kernels/cuda/loss_checks.cuh"
#include "kernels/cuda/ops.h"

namespace mytorch {
namespace cuda {
namespace {

using namespace loss;  // input checks (loss_checks.cuh)

// ---- nll_loss ----
template <typename T>
struct NllTerm {  // item i: (-w[t] * x[b, t, s], w[t]); ignored: (0, 0)
  const T* x;
  const int64_t* t;
  const T* w;
  int64_t C, S, ignore;
  __device__ acc_t<T> operator()(int64_t i, acc_t<T>& wt) const {
    using A = acc_t<T>;
    const int64_t b = i / S, s = i % S, c = t[i];
    if (c == ignore) {
      wt = A(0);
      return A(0);
    }
    wt = w ? static_cast<A>(w[c]) : A(1);
    return -wt * static_cast<A>(x[(b * C + c) * S + s]);
  }
  __device__ void operator()(int64_t i, double (&acc)[2]) const {
    acc_t<T> wt;
    acc[0] += (double)(*this)(i, wt);
    acc[1] += (double)wt;
  }
};

template <typename T>
__global__ void nll_none_kernel(NllTerm<T> f, T* __restrict__ out, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    acc_t<T> wt;
    out[i] = static_cast<T>(f(i, wt));
  }
}

template <typename T>
struct NllFinish {  // total_w = sum w; out = mean ? loss / total_w : loss
  T* out;
  T* total_w;
  bool mean;
  __device__ void operator()(const double (&s)[2]) const {
    using A = acc_t<T>;
    const A loss = (A)s[0], tw = (A)s[1];
    *total_w = static_cast<T>(tw);
    *out = static_cast<T>(mean ? div_rn(loss, tw) : loss);
  }
};

// gi[b, c, s] = c == t[b, s] (not ignored) ? -w[c] * g : 0, written in one pass.
template <typename T>
__global__ void nll_backward_kernel(const T* __restrict__ g, const int64_t* __restrict__ t, const T* __restrict__ w,
                                    const T* __restrict__ total_w, T* __restrict__ gi, int64_t total, int64_t C,
                                    int64_t S, int64_t reduction, int64_t ignore) {
  using A = acc_t<T>;
  A scale = A(0);
  if (reduction != at::Reduction::None) {
    scale = static_cast<A>(g[0]);
    if (reduction == at::Reduction::Mean) scale = div_rn(scale, static_cast<A>(*total_w));
  }
  const int64_t CS = C * S;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t b = e / CS, rem = e - b * CS, c = rem / S, s = rem - c * S, i = b * S + s;
    const int64_t tc = t[i];
    A v = A(0);
    if (tc == c && tc != ignore) {
      const A gv = reduction == at::Reduction::None ? static_cast<A>(g[i]) : scale;
      v = -(w ? static_cast<A>(w[c]) : A(1)) * gv;
    }
    gi[e] = static_cast<T>(v);
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> nll_loss(const at::Tensor& input, const at::Tensor& target,
                                            const c10::optional<at::Tensor>& weight, int64_t reduction,
                                            int64_t ignore_index) {
  const char* op = "mytorch::nll_loss";
  check_reduction(op, reduction);
  NllDims d = nll_dims(op, input, target);
  check_cuda(op, "input", input);
  at::Tensor w = class_weight(op, weight, input, d.C);
  c10::cuda::CUDAGuard guard(input.device());
  at::Tensor t = checked_targets(op, target, d.C, ignore_index);
  at::Tensor x = input.contiguous();
  const bool none = reduction == at::Reduction::None;
  at::Tensor out = none ? aten::empty(out_shape_none(input), x.options()) : aten::empty({}, x.options());
  at::Tensor tw = aten::empty({}, x.options());
  const int64_t n = d.N * d.S;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_nll_cuda", [&] {
    NllTerm<scalar_t> f{x.const_data_ptr<scalar_t>(), t.const_data_ptr<int64_t>(),
                        w.defined() ? w.const_data_ptr<scalar_t>() : nullptr, d.C, d.S, ignore_index};
    if (none) {
      C10_CUDA_CHECK(cudaMemsetAsync(tw.mutable_data_ptr(), 0, tw.element_size(), stream));  // +0.0
      if (n > 0) {
        nll_none_kernel<scalar_t><<<grid_for(n, kThreads), kThreads, 0, stream>>>(f, out.mutable_data_ptr<scalar_t>(),
                                                                                  n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      }
    } else {
      sum_then<2>(n, f,
                  NllFinish<scalar_t>{out.mutable_data_ptr<scalar_t>(), tw.mutable_data_ptr<scalar_t>(),
                                      reduction == at::Reduction::Mean},
                  x);
    }
  });
  return {out, tw};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                             const c10::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  const char* op = "mytorch::nll_loss_backward";
  check_reduction(op, reduction);
  NllDims d = nll_dims(op, input, target);
  check_cuda(op, "input", input);
  at::Tensor w = class_weight(op, weight, input, d.C);
  check_same_dtype(op, grad_output, "grad_output", input, "input");
  check_same_dtype(op, total_weight, "total_weight", input, "input");
  check_same_device(op, grad_output, "grad_output", input, "input");
  check_same_device(op, total_weight, "total_weight", input, "input");
  TORCH_CHECK(total_weight.numel() == 1, op, ": expected a 1-element total_weight, got shape ",
              total_weight.sizes());
  check_loss_grad_output(op, grad_output, input, reduction);
  c10::cuda::CUDAGuard guard(input.device());
  at::Tensor t = checked_targets(op, target, d.C, ignore_index);
  at::Tensor g = grad_output.contiguous(), twc = total_weight.contiguous();
  at::Tensor gi = aten::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
  const int64_t total = gi.numel();
  if (total == 0) return gi;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "mytorch_nll_bwd_cuda", [&] {
    nll_backward_kernel<scalar_t><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
        g.const_data_ptr<scalar_t>(), t.const_data_ptr<int64_t>(),
        w.defined() ? w.const_data_ptr<scalar_t>() : nullptr, twc.const_data_ptr<scalar_t>(),
        gi.mutable_data_ptr<scalar_t>(), total, d.C, d.S, reduction, ignore_index);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return gi;
}

namespace {

// ---- cross entropy on (N, C) rows, one block per row ----
int ce_threads(int64_t C) { return (int)std::min<int64_t>(512, std::max<int64_t>(32, round_up(C, 32))); }
int ce_grid(int64_t N) { return (int)std::min<int64_t>(N, 1 << 30); }

// loss_i = (1-eps) * w[t] * (lse - x[t]) + (eps/C) * sum_c w[c] * (lse - x[c]); ignored rows: 0.
// loss_rows in T (as the CPU kernel, which sums the T-rounded rows); wt_rows (may be null): w[t].
template <typename T>
__global__ void ce_forward_kernel(const T* __restrict__ x, const int64_t* __restrict__ t, const T* __restrict__ w,
                                  T* __restrict__ loss_rows, double* __restrict__ wt_rows, int64_t N, int64_t C,
                                  int64_t ignore, double eps) {
  using A = acc_t<T>;
  __shared__ A buf[33];
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const int64_t c = t[i];
    if (c == ignore) {  // the whole block takes this branch
      if (threadIdx.x == 0) {
        loss_rows[i] = T(0);
        if (wt_rows) wt_rows[i] = 0.0;
      }
      continue;
    }
    const T* xr = x + i * C;
    A m = A(-INFINITY);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) m = max_nan_skip(m, static_cast<A>(xr[j]));
    m = block_max<A>(m, buf);
    A se = A(0);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) se += exp_acc(static_cast<A>(xr[j]) - m);
    se = block_sum<A>(se, buf);
    const A lse = m + log_acc(se);
    A sm = A(0);
    if (eps > 0) {  // no smoothing term at eps 0 (0 * -inf)
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
        sm += (w ? static_cast<A>(w[j]) : A(1)) * (lse - static_cast<A>(xr[j]));
      sm = block_sum<A>(sm, buf);
    }
    if (threadIdx.x == 0) {
      const A wt = w ? static_cast<A>(w[c]) : A(1);
      A l = (A(1) - A(eps)) * wt * (lse - static_cast<A>(xr[c]));
      if (eps > 0) l += div_rn(A(eps), A(C)) * sm;
      loss_rows[i] = static_cast<T>(l);
      if (wt_rows) wt_rows[i] = static_cast<double>(wt);
    }
  }
}

template <typename T>
struct CeRowSum {  // (loss row, its weight)
  const T* rows;
  const double* wt;
  __device__ void operator()(int64_t i, double (&acc)[2]) const {
    acc[0] += (double)static_cast<acc_t<T>>(rows[i]);
    acc[1] += wt[i];
  }
};

template <typename T>
struct CeFinish {
  T* out;
  bool mean;
  __device__ void operator()(const double (&s)[2]) const {
    using A = acc_t<T>;
    const A l = (A)s[0];
    *out = static_cast<T>(mean ? div_rn(l, (A)s[1]) : l);
  }
};

// (sum of w[t] over the rows kept, sum of w over the classes)
template <typename T>
struct CeWeightSums {
  const int64_t* t;
  const T* w;
  int64_t N, C, ignore;
  __device__ void operator()(int64_t i, double (&acc)[2]) const {
    if (i < N && t[i] != ignore) acc[0] += w ? (double)static_cast<acc_t<T>>(w[t[i]]) : 1.0;
    if (i < C) acc[1] += w ? (double)static_cast<acc_t<T>>(w[i]) : 1.0;
  }
};

struct StoreSums {
  double* out;
  __device__ void operator()(const double (&s)[2]) const {
    out[0] = s[0];
    out[1] = s[1];
  }
};

// dz_ic = s_i * [ p_ic * ((1-eps) w_t + (eps/C) W) - (1-eps) w_t [c==t] - (eps/C) w_c ]
// sums: [denom (the mean's divisor), W]
template <typename T>
__global__ void ce_backward_kernel(const T* __restrict__ g, const T* __restrict__ x, const int64_t* __restrict__ t,
                                   const T* __restrict__ w, const double* __restrict__ sums, T* __restrict__ gi,
                                   int64_t N, int64_t C, int64_t ignore, double eps, int64_t reduction) {
  using A = acc_t<T>;
  __shared__ A buf[33];
  const A e = A(eps), eC = div_rn(e, A(C)), W = static_cast<A>(sums[1]);
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const int64_t c = t[i];
    T* gr = gi + i * C;
    if (c == ignore) {
      for (int64_t j = threadIdx.x; j < C; j += blockDim.x) gr[j] = T(0);
      continue;
    }
    A s = reduction == at::Reduction::None ? static_cast<A>(g[i]) : static_cast<A>(g[0]);
    if (reduction == at::Reduction::Mean) s = div_rn(s, A(sums[0]));
    const T* xr = x + i * C;
    A m = A(-INFINITY);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) m = max_nan_skip(m, static_cast<A>(xr[j]));
    m = block_max<A>(m, buf);
    A se = A(0);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) se += exp_acc(static_cast<A>(xr[j]) - m);
    const A inv = div_rn(A(1), block_sum<A>(se, buf));
    const A wt = w ? static_cast<A>(w[c]) : A(1);
    const A tot = (A(1) - e) * wt + eC * W;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A v = exp_acc(static_cast<A>(xr[j]) - m) * inv * tot;
      if (eps > 0) v -= eC * (w ? static_cast<A>(w[j]) : A(1));
      T o = static_cast<T>(s * v);
      if (j == c) o = static_cast<T>(static_cast<A>(o) - s * (A(1) - e) * wt);
      gr[j] = o;
    }
  }
}

}  // namespace

at::Tensor cross_entropy(const at::Tensor& input, const at::Tensor& target, const c10::optional<at::Tensor>& weight,
                         int64_t reduction, int64_t ignore_index, double label_smoothing) {
  const char* op = "mytorch::cross_entropy";
  ce_checks(op, input, reduction, label_smoothing);
  NllDims d = nll_dims(op, input, target);
  check_cuda(op, "input", input);
  at::Tensor w = class_weight(op, weight, input, d.C);
  c10::cuda::CUDAGuard guard(input.device());
  at::Tensor t = checked_targets(op, target, d.C, ignore_index);
  at::Tensor x = input.contiguous();
  const bool none = reduction == at::Reduction::None;
  at::Tensor rows = aten::empty(out_shape_none(input), x.options());
  at::Tensor wt = none ? at::Tensor() : aten::empty({d.N}, x.options().dtype(at::kDouble));
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_ce_cuda", [&] {
    using T = scalar_t;
    if (d.N > 0) {
      ce_forward_kernel<T><<<ce_grid(d.N), ce_threads(d.C), 0, stream>>>(
          x.const_data_ptr<T>(), t.const_data_ptr<int64_t>(), w.defined() ? w.const_data_ptr<T>() : nullptr,
          rows.mutable_data_ptr<T>(), none ? nullptr : wt.mutable_data_ptr<double>(), d.N, d.C, ignore_index,
          label_smoothing);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (!none) {
      at::Tensor out = aten::empty({}, x.options());
      sum_then<2>(d.N, CeRowSum<T>{rows.const_data_ptr<T>(), wt.const_data_ptr<double>()},
                  CeFinish<T>{out.mutable_data_ptr<T>(), reduction == at::Reduction::Mean}, x);
      rows = out;
    }
  });
  return rows;
}

at::Tensor cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                                  const c10::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                  double label_smoothing) {
  const char* op = "mytorch::cross_entropy_backward";
  ce_checks(op, input, reduction, label_smoothing);
  NllDims d = nll_dims(op, input, target);
  check_cuda(op, "input", input);
  at::Tensor w = class_weight(op, weight, input, d.C);
  check_same_dtype(op, grad_output, "grad_output", input, "input");
  check_same_device(op, grad_output, "grad_output", input, "input");
  check_loss_grad_output(op, grad_output, input, reduction);
  c10::cuda::CUDAGuard guard(input.device());
  at::Tensor t = checked_targets(op, target, d.C, ignore_index);
  at::Tensor x = input.contiguous(), g = grad_output.contiguous();
  at::Tensor gi = aten::empty(x.sizes(), x.options());
  if (d.N == 0 || d.C == 0) return gi;
  at::Tensor sums = aten::empty({2}, x.options().dtype(at::kDouble));
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_ce_bwd_cuda", [&] {
    using T = scalar_t;
    const T* wp = w.defined() ? w.const_data_ptr<T>() : nullptr;
    const int64_t* tp = t.const_data_ptr<int64_t>();
    sum_then<2>(std::max(d.N, d.C), CeWeightSums<T>{tp, wp, d.N, d.C, ignore_index},
                StoreSums{sums.mutable_data_ptr<double>()}, x);
    ce_backward_kernel<T><<<ce_grid(d.N), ce_threads(d.C), 0, stream>>>(
        g.const_data_ptr<T>(), x.const_data_ptr<T>(), tp, wp, sums.const_data_ptr<double>(),
        gi.mutable_data_ptr<T>(), d.N, d.C, ignore_index, label_smoothing, reduction);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return gi;
}

namespace {

// ---- mse ----
template <typename T>
__device__ __forceinline__ acc_t<T> sq_diff(const T* x, const T* y, int64_t i) {
  const acc_t<T> d = static_cast<acc_t<T>>(x[i]) - static_cast<acc_t<T>>(y[i]);
  return d * d;
}

template <typename T>
__global__ void mse_none_kernel(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = static_cast<T>(sq_diff(x, y, i));
}

template <typename T>
struct MseSum {
  const T* x;
  const T* y;
  __device__ void operator()(int64_t i, double (&acc)[1]) const { acc[0] += (double)sq_diff(x, y, i); }
};

template <typename T>
struct MseFinish {
  T* out;
  int64_t n;
  bool mean;
  __device__ void operator()(const double (&s)[1]) const {
    using A = acc_t<T>;
    const A v = (A)s[0];
    *out = static_cast<T>(mean ? div_rn(v, A(n)) : v);
  }
};

template <typename T>
__global__ void mse_backward_kernel(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ y,
                                    T* __restrict__ o, int64_t n, int64_t reduction) {
  using A = acc_t<T>;
  const bool none = reduction == at::Reduction::None;
  A s = none ? A(2) : A(2) * static_cast<A>(g[0]);
  if (reduction == at::Reduction::Mean) s = div_rn(s, A(n));
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const A gv = none ? s * static_cast<A>(g[i]) : s;
    o[i] = static_cast<T>(gv * (static_cast<A>(x[i]) - static_cast<A>(y[i])));
  }
}

}  // namespace

at::Tensor mse_loss(const at::Tensor& input, const at::Tensor& target, int64_t reduction) {
  const char* op = "mytorch::mse_loss";
  mse_checks(op, input, target, reduction);
  check_cuda(op, "input", input);
  c10::cuda::CUDAGuard guard(input.device());
  at::Tensor x = input.contiguous(), y = target.contiguous();
  const bool none = reduction == at::Reduction::None;
  at::Tensor out = none ? aten::empty(x.sizes(), x.options()) : aten::empty({}, x.options());
  const int64_t n = x.numel();
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_mse_cuda", [&] {
    using T = scalar_t;
    if (none) {
      if (n > 0) {
        mse_none_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
            x.const_data_ptr<T>(), y.const_data_ptr<T>(), out.mutable_data_ptr<T>(), n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      }
    } else {
      sum_then<1>(n, MseSum<T>{x.const_data_ptr<T>(), y.const_data_ptr<T>()},
                  MseFinish<T>{out.mutable_data_ptr<T>(), n, reduction == at::Reduction::Mean}, x);
    }
  });
  return out;
}

at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                             int64_t reduction) {
  const char* op = "mytorch::mse_loss_backward";
  mse_backward_checks(op, grad_output, input, target, reduction);
  check_cuda(op, "input", input);
  c10::cuda::CUDAGuard guard(input.device());
  at::Tensor x = input.contiguous(), y = target.contiguous(), g = grad_output.contiguous();
  at::Tensor gi = aten::empty(x.sizes(), x.options());
  const int64_t n = x.numel();
  if (n == 0) return gi;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_mse_bwd_cuda", [&] {
    using T = scalar_t;
    mse_backward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        g.const_data_ptr<T>(), x.const_data_ptr<T>(), y.const_data_ptr<T>(), gi.mutable_data_ptr<T>(), n,
        reduction);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return gi;
}

}  // namespace cuda
}  // namespace mytorch
