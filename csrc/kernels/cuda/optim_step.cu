// The per-param path of sgd_step_ and adam_step_ on CUDA (optim.cu checks and picks it), as
// kernels/cpu/optim.cpp: SGD (momentum, dampening, nesterov, weight decay, maximize) and
// Adam/AdamW (amsgrad, maximize), updating params and state in place; one launch per
// parameter, math in the compute type (float for half/bfloat16).
//
// Adam's step count is read where it lies: a CUDA step tensor on the device by the
// kernel (no host sync, graph-safe), a CPU one on the host. Non-contiguous tensors
// are updated through contiguous copies that are copied back.
#include <cmath>
#include <optional>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/optim.h"

namespace mytorch {
namespace cuda {
namespace {

// A contiguous tensor to update in place; write_back() copies it into the original if it is a copy.
struct InPlace {
  at::Tensor orig, work;
  explicit InPlace(const at::Tensor& t) : orig(t), work(t.is_contiguous() ? t : t.contiguous()) {}
  void write_back() {
    if (!work.is_same(orig)) orig.copy_(work);
  }
};

// ---- SGD ----
template <typename T>
struct SgdArgs {
  acc_t<T> lr, momentum, damp, wd;
  bool nesterov, maximize, first_step;
};

template <typename T>
__global__ void __launch_bounds__(kThreads) sgd_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf,
                                                       int64_t n, SgdArgs<T> a) {
  using C = acc_t<T>;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    C gr = static_cast<C>(g[i]);
    const C pv = static_cast<C>(p[i]);
    if (a.maximize) gr = -gr;
    if (a.wd != C(0)) gr += a.wd * pv;
    if (buf) {
      const C bv = a.first_step ? gr : a.momentum * static_cast<C>(buf[i]) + a.damp * gr;
      buf[i] = static_cast<T>(bv);
      gr = a.nesterov ? gr + a.momentum * bv : bv;
    }
    p[i] = static_cast<T>(pv - a.lr * gr);
  }
}

}  // namespace

void sgd_step_each(at::TensorList params, at::TensorList grads, at::TensorList bufs, double lr, double momentum,
                   double dampening, double weight_decay, bool nesterov, bool maximize, bool first_step) {
  const bool mom = momentum != 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t n = params[i].numel();
    if (n == 0) continue;
    c10::cuda::CUDAGuard guard(params[i].device());
    InPlace p(params[i]);
    std::optional<InPlace> b;
    if (mom) b.emplace(bufs[i]);
    at::Tensor g = grads[i].contiguous();
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, p.work.scalar_type(), "mytorch_sgd_step_cuda", [&] {
      using T = scalar_t;
      using C = acc_t<T>;
      SgdArgs<T> a{C(lr), C(momentum), C(1 - dampening), C(weight_decay), nesterov, maximize, first_step};
      sgd_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
          p.work.mutable_data_ptr<T>(), g.const_data_ptr<T>(), b ? b->work.mutable_data_ptr<T>() : nullptr, n, a);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    p.write_back();
    if (b) b->write_back();
  }
}

namespace {

// ---- Adam / AdamW ----
struct AdamArgs {
  double lr, beta1, beta2, wd, eps;
  bool amsgrad, maximize, decoupled;
};

// step: *step_ptr when given (a float64 on the device), else step_host.
template <typename T>
__global__ void __launch_bounds__(kThreads) adam_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m,
                                                        T* __restrict__ v, T* __restrict__ vmax, int64_t n,
                                                        AdamArgs a, const double* __restrict__ step_ptr,
                                                        double step_host) {
  using C = acc_t<T>;
  const double step = step_ptr ? *step_ptr : step_host;
  const double bc1 = 1 - pow(a.beta1, step), bc2 = 1 - pow(a.beta2, step);
  const C b1 = C(a.beta1), b2 = C(a.beta2), wd = C(a.wd), ep = C(a.eps), ss = C(a.lr / bc1), bs = C(sqrt(bc2)),
          decay = C(1 - a.lr * a.wd);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    C gr = static_cast<C>(g[i]);
    C pv = static_cast<C>(p[i]);
    if (a.maximize) gr = -gr;
    if (wd != C(0)) {
      if (a.decoupled) pv *= decay;
      else gr += wd * pv;
    }
    const C m0 = static_cast<C>(m[i]);
    const C mv = m0 + (C(1) - b1) * (gr - m0);
    const C vv = b2 * static_cast<C>(v[i]) + (C(1) - b2) * gr * gr;
    m[i] = static_cast<T>(mv);
    v[i] = static_cast<T>(vv);
    C denom_v = vv;
    if (a.amsgrad) {
      const C old = static_cast<C>(vmax[i]);  // NaN propagates, as torch.maximum
      const C mx = old != old ? old : vv != vv ? vv : (old > vv ? old : vv);
      vmax[i] = static_cast<T>(mx);
      denom_v = mx;
    }
    const C denom = div_rn(sqrt_rn(denom_v), bs) + ep;
    p[i] = static_cast<T>(pv - div_rn(ss * mv, denom));
  }
}

}  // namespace

void adam_step_each(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                    at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr,
                    double beta1, double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                    bool decoupled) {
  const AdamArgs args{lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled};
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t n = params[i].numel();
    if (n == 0) continue;
    c10::cuda::CUDAGuard guard(params[i].device());
    // the step count: a float64 copy on the device, or the value of a CPU tensor
    at::Tensor step_d;
    double step_h = 0;
    if (steps[i].is_cpu())
      step_h = steps[i].item<double>();
    else
      step_d = steps[i].scalar_type() == at::kDouble ? steps[i] : steps[i].to(at::kDouble);
    InPlace p(params[i]), m(exp_avgs[i]), v(exp_avg_sqs[i]);
    std::optional<InPlace> vm;
    if (amsgrad) vm.emplace(max_exp_avg_sqs[i]);
    at::Tensor g = grads[i].contiguous();
    auto stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, p.work.scalar_type(), "mytorch_adam_step_cuda", [&] {
      using T = scalar_t;
      adam_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
          p.work.mutable_data_ptr<T>(), g.const_data_ptr<T>(), m.work.mutable_data_ptr<T>(),
          v.work.mutable_data_ptr<T>(), vm ? vm->work.mutable_data_ptr<T>() : nullptr, n, args,
          step_d.defined() ? step_d.const_data_ptr<double>() : nullptr, step_h);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    p.write_back();
    m.write_back();
    v.write_back();
    if (vm) vm->write_back();
  }
}

}  // namespace cuda
}  // namespace mytorch
