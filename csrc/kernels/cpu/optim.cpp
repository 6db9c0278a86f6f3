// Optimizer steps (OpenMP): sgd_step_ (momentum, dampening, nesterov, weight decay, maximize)
// and adam_step_ (Adam and AdamW, amsgrad, maximize), one pass over each parameter and its
// state, any strides; the checks are kernels/optim.h's.
#include "kernels/optim.h"

#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>

#include <cmath>

#include "checks.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/isa.h"

// The entry points run the widest copy of this file the CPU has (kernels/cpu/isa/optim_*.cpp).
MYTORCH_ISA_DECLARE(sgd_step_amp)
MYTORCH_ISA_DECLARE(adam_step_amp)

namespace mytorch {
namespace cpu {
namespace {

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

void sgd_step_amp(at::TensorList params, at::TensorList grads, at::TensorList bufs, double lr,
                  double momentum, double dampening, double weight_decay, bool nesterov, bool maximize,
                  bool first_step, const std::optional<at::Tensor>& grad_scale,
                  const std::optional<at::Tensor>& found_inf) {
  MYTORCH_ISA_DISPATCH(sgd_step_amp, params, grads, bufs, lr, momentum, dampening, weight_decay, nesterov,
                       maximize, first_step, grad_scale, found_inf)
  const char* op = optim::kSgdOp;
  optim::check_sgd(params, grads, bufs, momentum, [](const at::Tensor&) {});
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

void adam_step_amp(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                   at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
                   double lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                   bool maximize, bool decoupled, const std::optional<at::Tensor>& grad_scale,
                   const std::optional<at::Tensor>& found_inf) {
  MYTORCH_ISA_DISPATCH(adam_step_amp, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1,
                       beta2, weight_decay, eps, amsgrad, maximize, decoupled, grad_scale, found_inf)
  const char* op = optim::kAdamOp;
  optim::check_adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, amsgrad, [](const at::Tensor&) {});
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

#ifndef MYTORCH_ISA_VARIANT  // the registered entry points: once, in the baseline build
void sgd_step_(at::TensorList params, at::TensorList grads, at::TensorList bufs, double lr, double momentum,
               double dampening, double weight_decay, bool nesterov, bool maximize, bool first_step) {
  sgd_step_amp(params, grads, bufs, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step,
               std::nullopt, std::nullopt);
}

void adam_step_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize, bool decoupled) {
  adam_step_amp(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, weight_decay, eps,
                amsgrad, maximize, decoupled, std::nullopt, std::nullopt);
}
#endif  // MYTORCH_ISA_VARIANT

}  // namespace cpu
}  // namespace mytorch
