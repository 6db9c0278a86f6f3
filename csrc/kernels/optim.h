// The optim family: sgd_step_ and adam_step_ update params and their state in place
// (kernels/cpu/optim.cpp; kernels/cuda/optim.cu, optim_step.cu). The list checks both backends
// apply, with their messages, and the entry points of each. Host code only.
#pragma once
#include <initializer_list>
#include <optional>
#include <utility>

#include "checks.h"

namespace mytorch {
namespace optim {

// The names in the messages: one op for SGD, one for Adam and AdamW (decoupled), as registered.
constexpr const char* kSgdOp = "mytorch::sgd_step_";
constexpr const char* kAdamOp = "mytorch::adam_step_";

// Each non-empty list of `others` holds one tensor per param with that param's shape, device and
// dtype; every param is floating and passes param_check(param) (the backend's device check).
template <typename ParamCheck>
void check_lists(const char* op, at::TensorList params,
                 std::initializer_list<std::pair<const char*, at::TensorList>> others, const ParamCheck& param_check) {
  for (auto& [name, list] : others) {
    if (list.empty()) continue;
    TORCH_CHECK(list.size() == params.size(), op, ": expected ", name, " to have ", params.size(),
                " tensors (one per param), got ", list.size());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    check_floating(op, "params", p);
    param_check(p);
    for (auto& [name, list] : others) {
      if (list.empty()) continue;
      const at::Tensor& t = list[i];
      TORCH_CHECK(t.sizes() == p.sizes(), op, ": expected ", name, "[", i, "] to have the shape of params[", i,
                  "] ", p.sizes(), ", got ", t.sizes());
      TORCH_CHECK(t.device() == p.device(), op, ": expected ", name, "[", i, "] on ", p.device(), ", got ",
                  t.device());
      TORCH_CHECK(t.scalar_type() == p.scalar_type(), op, ": expected ", name, "[", i, "] to have dtype ",
                  p.scalar_type(), ", got ", t.scalar_type());
    }
  }
}

// sgd_step_: one grad per param, one momentum buffer per param when momentum != 0 (buffers
// passed at momentum 0 go unused, on the params' device).
template <typename ParamCheck>
void check_sgd(at::TensorList params, at::TensorList grads, at::TensorList bufs, double momentum,
               const ParamCheck& param_check) {
  const char* op = kSgdOp;
  TORCH_CHECK(grads.size() == params.size(), op, ": expected grads to have ", params.size(),
              " tensors (one per param), got ", grads.size());
  TORCH_CHECK(momentum == 0 || bufs.size() == params.size(), op, ": expected momentum_buffers to have ",
              params.size(), " tensors when momentum != 0, got ", bufs.size());
  check_lists(op, params, {{"grads", grads}, {"momentum_buffers", momentum != 0 ? bufs : at::TensorList()}},
              param_check);
  if (momentum == 0 && !params.empty()) {
    for (size_t i = 0; i < bufs.size(); ++i)
      TORCH_CHECK(bufs[i].device() == params[0].device(), op, ": expected momentum_buffers[", i, "] on ",
                  params[0].device(), ", got ", bufs[i].device());
  }
}

// adam_step_: one grad, exp_avg, exp_avg_sq and 1-element step per param, one max_exp_avg_sq
// per param with amsgrad.
template <typename ParamCheck>
void check_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                at::TensorList max_exp_avg_sqs, at::TensorList steps, bool amsgrad, const ParamCheck& param_check) {
  const char* op = kAdamOp;
  TORCH_CHECK(grads.size() == params.size() && exp_avgs.size() == params.size() &&
                  exp_avg_sqs.size() == params.size() && steps.size() == params.size(),
              op, ": expected grads, exp_avgs, exp_avg_sqs and steps to have ", params.size(),
              " tensors (one per param), got ", grads.size(), ", ", exp_avgs.size(), ", ", exp_avg_sqs.size(),
              " and ", steps.size());
  TORCH_CHECK(!amsgrad || max_exp_avg_sqs.size() == params.size(), op, ": expected max_exp_avg_sqs to have ",
              params.size(), " tensors with amsgrad, got ", max_exp_avg_sqs.size());
  check_lists(op, params,
              {{"grads", grads}, {"exp_avgs", exp_avgs}, {"exp_avg_sqs", exp_avg_sqs},
               {"max_exp_avg_sqs", amsgrad ? max_exp_avg_sqs : at::TensorList()}},
              param_check);
  for (size_t i = 0; i < steps.size(); ++i)
    TORCH_CHECK(steps[i].numel() == 1, op, ": expected steps[", i, "] to hold one value, got shape ",
                steps[i].sizes());
}

}  // namespace optim

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
// steps: one 1-element tensor per param holding the step count after this step's increment.
// decoupled: AdamW weight decay.
#define MYTORCH_OPTIM_OPS                                                                                        \
  void sgd_step_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double lr,       \
                 double momentum, double dampening, double weight_decay, bool nesterov, bool maximize,          \
                 bool first_step);                                                                              \
  void adam_step_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,                         \
                  at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr,  \
                  double beta1, double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,     \
                  bool decoupled);

namespace cpu {
MYTORCH_OPTIM_OPS
// The same steps with the gradient scaler's arguments of aten::_fused_sgd_ / _fused_adam(w)_, for
// the mytorch device (csrc/aten/optim.cpp): found_inf != 0 skips the step, grad_scale divides
// the grads.
void sgd_step_amp(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double lr,
                  double momentum, double dampening, double weight_decay, bool nesterov, bool maximize,
                  bool first_step, const std::optional<at::Tensor>& grad_scale,
                  const std::optional<at::Tensor>& found_inf);
void adam_step_amp(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                   at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr,
                   double beta1, double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                   bool decoupled, const std::optional<at::Tensor>& grad_scale,
                   const std::optional<at::Tensor>& found_inf);
}  // namespace cpu
namespace cuda {
MYTORCH_OPTIM_OPS
// The per-param path of those ops (optim_step.cu), after their checks: one launch per param,
// any strides and floating dtype, maximize and amsgrad. The entry points (optim.cu) take it
// where the one-launch path over every param does not apply.
void sgd_step_each(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double lr,
                   double momentum, double dampening, double weight_decay, bool nesterov, bool maximize,
                   bool first_step);
void adam_step_each(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                    at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps, double lr,
                    double beta1, double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                    bool decoupled);
}  // namespace cuda

#undef MYTORCH_OPTIM_OPS

}  // namespace mytorch
