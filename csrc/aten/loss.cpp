// aten loss ops on the mytorch device -> kernels/cpu/loss.cpp.
#include <ATen/native/Resize.h>

#include "aten/ops.h"
#include "kernels/loss_checks.h"

namespace mytorch {
namespace aten {
namespace mc = mytorch::cpu;

std::tuple<at::Tensor, at::Tensor> nll_fwd(const at::Tensor& self, const at::Tensor& target,
                                           const c10::optional<at::Tensor>& weight,
                                           int64_t reduction, int64_t ignore_index) {
  TORCH_CHECK(self.dim() <= 2, "mytorch::nll_loss: expected input of at most 2 dims, got ",
              self.dim(), "-D");
  return mc::nll_loss(self, target, weight, reduction, ignore_index);
}
std::tuple<at::Tensor&, at::Tensor&> nll_fwd_out(const at::Tensor& self, const at::Tensor& target,
                                                 const c10::optional<at::Tensor>& weight,
                                                 int64_t reduction, int64_t ignore_index,
                                                 at::Tensor& output, at::Tensor& total_weight) {
  auto [o, tw] = mc::nll_loss(self, target, weight, reduction, ignore_index);
  at::native::resize_output(output, o.sizes());
  at::native::resize_output(total_weight, tw.sizes());
  output.copy_(o);
  total_weight.copy_(tw);
  return {output, total_weight};
}
std::tuple<at::Tensor, at::Tensor> nll2d_fwd(const at::Tensor& self, const at::Tensor& target,
                                             const c10::optional<at::Tensor>& weight,
                                             int64_t reduction, int64_t ignore_index) {
  TORCH_CHECK(self.dim() == 4, "mytorch::nll_loss2d: expected a 4-D input (N, C, H, W), got ",
              self.dim(), "-D");
  return mc::nll_loss(self, target, weight, reduction, ignore_index);
}
at::Tensor nll_bwd(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                   const c10::optional<at::Tensor>& weight, int64_t reduction,
                   int64_t ignore_index, const at::Tensor& total_weight) {
  return mc::nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index,
                               total_weight);
}
at::Tensor& nll_bwd_out(const at::Tensor& grad_output, const at::Tensor& self,
                        const at::Tensor& target, const c10::optional<at::Tensor>& weight,
                        int64_t reduction, int64_t ignore_index, const at::Tensor& total_weight,
                        at::Tensor& grad_input) {
  at::Tensor gi = mc::nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index,
                                        total_weight);
  at::native::resize_output(grad_input, gi.sizes());
  return grad_input.copy_(gi);
}
at::Tensor mse(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  return mc::mse_loss(self, target, reduction);
}
at::Tensor& mse_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                    at::Tensor& out) {
  at::Tensor o = mc::mse_loss(self, target, reduction);
  at::native::resize_output(out, o.sizes());
  return out.copy_(o);
}
at::Tensor mse_bwd(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target,
                   int64_t reduction) {
  return mc::mse_loss_backward(g, self, target, reduction);
}
at::Tensor& mse_bwd_out(const at::Tensor& g, const at::Tensor& self, const at::Tensor& target,
                        int64_t reduction, at::Tensor& grad_input) {
  at::Tensor gi = mc::mse_loss_backward(g, self, target, reduction);
  at::native::resize_output(grad_input, gi.sizes());
  return grad_input.copy_(gi);
}
}  // namespace aten
}  // namespace mytorch
