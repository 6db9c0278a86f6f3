// Fused optimizer steps (OpenMP): SGD (momentum, dampening, nesterov, weight decay) and
// Adam/AdamW (amsgrad), one pass over each parameter and its state (sgd_step_, adam_step_, any
// strides); and the multi-tensor forms fused_sgd_ / fused_adamw_ (contiguous params).
#include "kernels/cpu/optim.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <torch/library.h>

#include <cmath>

#include "checks.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/isa.h"

// The entry points run the widest copy of this file the CPU has (kernels/cpu/isa/optim_*.cpp).
MYTORCH_ISA_DECLARE(sgd_step_)
MYTORCH_ISA_DECLARE(adam_step_)

namespace mytorch {
namespace cpu {
namespace {

void check_lists(const char* op, at::TensorList params, std::initializer_list<std::pair<const char*, at::TensorList>> others) {
  for (auto& [name, list] : others) {
    if (list.empty()) continue;
    TORCH_CHECK(list.size() == params.size(), op, ": expected ", name, " to have ", params.size(),
                " tensors (one per param), got ", list.size());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    check_floating(op, "params", p);
    for (auto& [name, list] : others) {
      if (list.empty()) continue;
      const at::Tensor& t = list[i];
      TORCH_CHECK(t.sizes() == p.sizes(), op, ": expected ", name, "[", i, "] to have the shape of params[",
                  i, "] ", p.sizes(), ", got ", t.sizes());
      TORCH_CHECK(t.device() == p.device(), op, ": expected ", name, "[", i, "] on ", p.device(), ", got ",
                  t.device());
      TORCH_CHECK(t.scalar_type() == p.scalar_type(), op, ": expected ", name, "[", i, "] to have dtype ",
                  p.scalar_type(), ", got ", t.scalar_type());
    }
  }
}

double read_scalar(const at::Tensor& t) {
  // host memory on both CPU and the mytorch device
  return dispatch_all("mytorch::optim", "a scalar tensor", t.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return static_cast<double>(static_cast<compute_t<T>>(*t.const_data_ptr<T>()));
  });
}

// (found_inf set) -> skip the step; else the factor that unscales grads
bool skip_or_scale(const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf,
                   double& inv_scale) {
  inv_scale = 1.0;
  if (found_inf && found_inf->defined() && read_scalar(*found_inf) != 0.0) return true;
  if (grad_scale && grad_scale->defined()) inv_scale = 1.0 / read_scalar(*grad_scale);
  return false;
}

}  // namespace

void sgd_step_(at::TensorList params, at::TensorList grads, at::TensorList bufs, double lr,
               double momentum, double dampening, double weight_decay, bool nesterov, bool maximize,
               bool first_step, const std::optional<at::Tensor>& grad_scale,
               const std::optional<at::Tensor>& found_inf) {
  MYTORCH_ISA_DISPATCH(sgd_step_, params, grads, bufs, lr, momentum, dampening, weight_decay, nesterov,
                       maximize, first_step, grad_scale, found_inf)
  const char* op = "mytorch::sgd_step_";
  TORCH_CHECK(grads.size() == params.size(), op, ": expected grads to have ", params.size(),
              " tensors (one per param), got ", grads.size());
  TORCH_CHECK(momentum == 0 || bufs.size() == params.size(), op,
              ": expected momentum_buffers to have ", params.size(), " tensors when momentum != 0, got ",
              bufs.size());
  check_lists(op, params, {{"grads", grads}, {"momentum_buffers", momentum != 0 ? bufs : at::TensorList()}});
  if (momentum == 0 && !params.empty()) {  // unused buffers still sit on the params' device
    for (size_t i = 0; i < bufs.size(); ++i)
      TORCH_CHECK(bufs[i].device() == params[0].device(), op, ": expected momentum_buffers[", i, "] on ",
                  params[0].device(), ", got ", bufs[i].device());
  }
  double inv;
  if (skip_or_scale(grad_scale, found_inf, inv)) return;
  for (size_t i = 0; i < params.size(); ++i) {
    at::TensorIteratorConfig cfg;
    cfg.add_output(params[i]);
    bool mom = momentum != 0;
    if (mom) cfg.add_output(bufs[i]);
    cfg.add_const_input(grads[i]).resize_outputs(false).set_check_mem_overlap(false);
    auto it = cfg.build();
    Strided g = strided_from(it);
    dispatch_floating(op, "params", params[i].scalar_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const C lr_ = lr, m_ = momentum, damp = 1 - dampening, wd = weight_decay, sc = inv;
      for_each(g, [=](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) {
          T* p = reinterpret_cast<T*>(d[0] + k * s[0]);
          T* b = mom ? reinterpret_cast<T*>(d[1] + k * s[1]) : nullptr;
          int gi = mom ? 2 : 1;
          C gr = C(*reinterpret_cast<const T*>(d[gi] + k * s[gi])) * sc;
          C pv = C(*p);
          if (maximize) gr = -gr;
          if (wd != 0) gr += wd * pv;
          if (mom) {
            C bv = first_step ? gr : m_ * C(*b) + damp * gr;
            *b = T(bv);
            gr = nesterov ? gr + m_ * bv : bv;
          }
          *p = T(pv - lr_ * gr);
        }
      });
    });
  }
}

void adam_step_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
                double lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                bool maximize, bool decoupled, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf) {
  MYTORCH_ISA_DISPATCH(adam_step_, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1,
                       beta2, weight_decay, eps, amsgrad, maximize, decoupled, grad_scale, found_inf)
  const char* op = "mytorch::adam_step_";  // one op for Adam and AdamW (decoupled), named as registered
  TORCH_CHECK(grads.size() == params.size() && exp_avgs.size() == params.size() &&
                  exp_avg_sqs.size() == params.size() && steps.size() == params.size(),
              op, ": expected grads, exp_avgs, exp_avg_sqs and steps to have ", params.size(),
              " tensors (one per param), got ", grads.size(), ", ", exp_avgs.size(), ", ",
              exp_avg_sqs.size(), " and ", steps.size());
  TORCH_CHECK(!amsgrad || max_exp_avg_sqs.size() == params.size(), op,
              ": expected max_exp_avg_sqs to have ", params.size(), " tensors with amsgrad, got ",
              max_exp_avg_sqs.size());
  check_lists(op, params, {{"grads", grads}, {"exp_avgs", exp_avgs}, {"exp_avg_sqs", exp_avg_sqs},
                           {"max_exp_avg_sqs", amsgrad ? max_exp_avg_sqs : at::TensorList()}});
  for (size_t i = 0; i < steps.size(); ++i)
    TORCH_CHECK(steps[i].numel() == 1, op, ": expected steps[", i, "] to hold one value, got shape ",
                steps[i].sizes());
  double inv;
  if (skip_or_scale(grad_scale, found_inf, inv)) return;
  for (size_t i = 0; i < params.size(); ++i) {
    double step = read_scalar(steps[i]);
    double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
    double step_size = lr / bc1, bc2_sqrt = std::sqrt(bc2);
    at::TensorIteratorConfig cfg;
    cfg.add_output(params[i]).add_output(exp_avgs[i]).add_output(exp_avg_sqs[i]);
    if (amsgrad) cfg.add_output(max_exp_avg_sqs[i]);
    cfg.add_const_input(grads[i]).resize_outputs(false).set_check_mem_overlap(false);
    auto it = cfg.build();
    Strided g = strided_from(it);
    dispatch_floating(op, "params", params[i].scalar_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const C b1 = beta1, b2 = beta2, wd = weight_decay, ep = eps, ss = step_size, bs = bc2_sqrt,
              sc = inv, decay = 1 - lr * weight_decay;
      const int gi = amsgrad ? 4 : 3;
      for_each(g, [=](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) {
          T* p = reinterpret_cast<T*>(d[0] + k * s[0]);
          T* m = reinterpret_cast<T*>(d[1] + k * s[1]);
          T* v = reinterpret_cast<T*>(d[2] + k * s[2]);
          C gr = C(*reinterpret_cast<const T*>(d[gi] + k * s[gi])) * sc;
          C pv = C(*p);
          if (maximize) gr = -gr;
          if (wd != 0) {
            if (decoupled) pv *= decay;
            else gr += wd * pv;
          }
          C mv = C(*m) + (C(1) - b1) * (gr - C(*m));
          C vv = b2 * C(*v) + (C(1) - b2) * gr * gr;
          *m = T(mv);
          *v = T(vv);
          C denom_v = vv;
          if (amsgrad) {
            T* vm = reinterpret_cast<T*>(d[3] + k * s[3]);
            const C old = C(*vm);  // NaN propagates, as torch.maximum in torch's Adam
            C mx = old != old ? old : vv != vv ? vv : std::max(old, vv);
            *vm = T(mx);
            denom_v = mx;
          }
          C denom = std::sqrt(denom_v) / bs + ep;
          *p = T(pv - ss * mv / denom);
        }
      });
    });
  }
}

}  // namespace cpu
}  // namespace mytorch

// ---- fused_adamw_, fused_sgd_: contiguous params, raw-pointer loops (baseline build only) ----
#ifndef MYTORCH_ISA_VARIANT
namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements below which a loop stays on one thread

template <typename T>
void adamw_kernel(T* p, const T* g, T* m, T* v, int64_t n, double lr, double b1, double b2, double wd, double eps,
                  double bc1, double bc2_sqrt) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (n > kGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    Acc pf = (Acc)p[i], gf = (Acc)g[i];
    pf *= Acc(1 - lr * wd);
    Acc mf = (Acc)m[i] + Acc(1 - b1) * (gf - (Acc)m[i]);  // lerp, as torch's AdamW (fused and foreach)
    Acc vf = Acc(b2) * (Acc)v[i] + Acc(1 - b2) * gf * gf;
    pf -= Acc(lr / bc1) * mf / (std::sqrt(vf) / Acc(bc2_sqrt) + Acc(eps));
    p[i] = (T)pf;
    m[i] = (T)mf;
    v[i] = (T)vf;
  }
}

template <typename T>
void sgd_kernel(T* p, const T* g, T* buf, int64_t n, double lr, double momentum, double dampening, double wd,
                bool nesterov, bool first_step) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (n > kGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    Acc pf = (Acc)p[i], gf = (Acc)g[i];
    if (wd != 0) gf += Acc(wd) * pf;  // as torch.optim.SGD: no term at 0 (Inf * 0 would be NaN)
    if (buf) {
      Acc b = first_step ? gf : Acc(momentum) * (Acc)buf[i] + Acc(1 - dampening) * gf;
      buf[i] = (T)b;
      gf = nesterov ? gf + Acc(momentum) * b : b;
    }
    p[i] = (T)(pf - Acc(lr) * gf);
  }
}

void check_opt_list(const char* op, const char* name, at::TensorList ts, at::TensorList params) {
  TORCH_CHECK(ts.size() == params.size(), op, ": expected ", name, " to have ", params.size(),
              " tensors (one per param), got ", ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    TORCH_CHECK(ts[i].device() == params[i].device(), op, ": expected ", name, "[", i, "] on ",
                params[i].device(), ", got ", ts[i].device());
    TORCH_CHECK(ts[i].scalar_type() == params[i].scalar_type() && ts[i].sizes() == params[i].sizes() &&
                    ts[i].is_contiguous(),
                op, ": expected ", name, "[", i, "] to be contiguous and match params[", i, "] (",
                params[i].scalar_type(), " ", params[i].sizes(), "), got ", ts[i].scalar_type(), " ", ts[i].sizes());
  }
}

void check_params(const char* op, at::TensorList params) {
  for (size_t i = 0; i < params.size(); ++i) {
    check_floating(op, "params", params[i]);
    TORCH_CHECK(params[i].is_contiguous(), op, ": expected params[", i, "] to be contiguous");
  }
}

void fused_adamw_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                  double lr, double beta1, double beta2, double weight_decay, double eps, int64_t step) {
  const char* op = "mytorch::fused_adamw_";
  TORCH_CHECK(step >= 1, op, ": expected step >= 1 (the count after this update), got ", step);
  check_params(op, params);
  check_opt_list(op, "grads", grads, params);
  check_opt_list(op, "exp_avgs", exp_avgs, params);
  check_opt_list(op, "exp_avg_sqs", exp_avg_sqs, params);
  double bc1 = 1.0 - std::pow(beta1, (double)step), bc2s = std::sqrt(1.0 - std::pow(beta2, (double)step));
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i];
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, p.scalar_type(), "mytorch_adamw", [&] {
      adamw_kernel<scalar_t>(p.mutable_data_ptr<scalar_t>(), grads[i].const_data_ptr<scalar_t>(),
                             exp_avgs[i].mutable_data_ptr<scalar_t>(), exp_avg_sqs[i].mutable_data_ptr<scalar_t>(),
                             p.numel(), lr, beta1, beta2, weight_decay, eps, bc1, bc2s);
    });
  }
}

void fused_sgd_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double lr,
                double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) {
  const char* op = "mytorch::fused_sgd_";
  TORCH_CHECK(momentum != 0.0 || momentum_buffers.empty(), op,
              ": expected no momentum_buffers when momentum is 0, got ", momentum_buffers.size());
  TORCH_CHECK(momentum == 0.0 || !momentum_buffers.empty(), op,
              ": expected momentum_buffers (one per param) when momentum is ", momentum);
  check_params(op, params);
  check_opt_list(op, "grads", grads, params);
  if (!momentum_buffers.empty()) check_opt_list(op, "momentum_buffers", momentum_buffers, params);
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i];
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, p.scalar_type(), "mytorch_sgd", [&] {
      sgd_kernel<scalar_t>(p.mutable_data_ptr<scalar_t>(), grads[i].const_data_ptr<scalar_t>(),
                           momentum_buffers.empty() ? nullptr : momentum_buffers[i].mutable_data_ptr<scalar_t>(),
                           p.numel(), lr, momentum, dampening, weight_decay, nesterov, first_step);
    });
  }
}

}  // namespace
}  // namespace cpu
}  // namespace mytorch
#endif  // MYTORCH_ISA_VARIANT

// The registrations: once, in the baseline build of this file.
#ifndef MYTORCH_ISA_VARIANT
namespace {
void op_sgd(at::TensorList params, at::TensorList grads, at::TensorList bufs, double lr, double momentum,
            double dampening, double weight_decay, bool nesterov, bool maximize, bool first_step) {
  mytorch::cpu::sgd_step_(params, grads, bufs, lr, momentum, dampening, weight_decay, nesterov, maximize,
                          first_step, std::nullopt, std::nullopt);
}
void op_adam(at::TensorList params, at::TensorList grads, at::TensorList m, at::TensorList v,
             at::TensorList vmax, at::TensorList steps, double lr, double beta1, double beta2,
             double weight_decay, double eps, bool amsgrad, bool maximize, bool decoupled) {
  mytorch::cpu::adam_step_(params, grads, m, v, vmax, steps, lr, beta1, beta2, weight_decay, eps, amsgrad,
                           maximize, decoupled, std::nullopt, std::nullopt);
}
}  // namespace

#define MYTORCH_OPTIM_IMPLS(m)                              \
  m.impl("sgd_step_", &op_sgd);                             \
  m.impl("adam_step_", &op_adam);                           \
  m.impl("fused_adamw_", &mytorch::cpu::fused_adamw_);      \
  m.impl("fused_sgd_", &mytorch::cpu::fused_sgd_)

// The mytorch device keeps its tensors in host memory, so it runs the same kernels.
TORCH_LIBRARY_IMPL(mytorch, CPU, m) { MYTORCH_OPTIM_IMPLS(m); }
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) { MYTORCH_OPTIM_IMPLS(m); }
#endif  // MYTORCH_ISA_VARIANT
