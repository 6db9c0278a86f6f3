// torch.optim on the mytorch device: aten::_fused_{sgd,adam,adamw}_ -> the fused kernels in
// kernels/cpu/optim.cpp, and the _foreach_* ops (foreach=True, the default) -> per-tensor
// elementwise kernels (aten/elementwise.h's FB, FU, FT and the list ops here), so no optimizer
// step falls back to the CPU.
#include "aten/elementwise.h"
#include "aten/ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"

namespace mytorch {
namespace aten {

using at::Scalar;
using at::TensorList;
using OptT = std::optional<Tensor>;

// ---- fused optimizers ----
void fused_sgd(TensorList p, TensorList g, TensorList buf, double wd, double mom, double lr, double damp,
               bool nesterov, bool maximize, bool first, const OptT& gs, const OptT& fi) {
  cpu::sgd_step_amp(p, g, buf, lr, mom, damp, wd, nesterov, maximize, first, gs, fi);
}
void fused_sgd_t(TensorList p, TensorList g, TensorList buf, double wd, double mom, const Tensor& lr,
                 double damp, bool nesterov, bool maximize, bool first, const OptT& gs, const OptT& fi) {
  cpu::sgd_step_amp(p, g, buf, lr.item().toDouble(), mom, damp, wd, nesterov, maximize, first, gs, fi);
}
template <bool W>
void fused_adam(TensorList p, TensorList g, TensorList m, TensorList v, TensorList vmax, TensorList steps,
                double lr, double b1, double b2, double wd, double eps, bool ams, bool maximize,
                const OptT& gs, const OptT& fi) {
  cpu::adam_step_amp(p, g, m, v, vmax, steps, lr, b1, b2, wd, eps, ams, maximize, W, gs, fi);
}
template <bool W>
void fused_adam_t(TensorList p, TensorList g, TensorList m, TensorList v, TensorList vmax, TensorList steps,
                  const Tensor& lr, double b1, double b2, double wd, double eps, bool ams, bool maximize,
                  const OptT& gs, const OptT& fi) {
  cpu::adam_step_amp(p, g, m, v, vmax, steps, lr.item().toDouble(), b1, b2, wd, eps, ams, maximize, W, gs, fi);
}

#define MYTORCH_FUSED_ADAM_INSTANTIATE(W)                                                                        \
  template void fused_adam<W>(TensorList, TensorList, TensorList, TensorList, TensorList, TensorList, double,      \
                              double, double, double, double, bool, bool, const OptT&, const OptT&);               \
  template void fused_adam_t<W>(TensorList, TensorList, TensorList, TensorList, TensorList, TensorList,            \
                                const Tensor&, double, double, double, double, bool, bool, const OptT&, const OptT&);
MYTORCH_FUSED_ADAM_INSTANTIATE(false)
MYTORCH_FUSED_ADAM_INSTANTIATE(true)
#undef MYTORCH_FUSED_ADAM_INSTANTIATE

// ---- _foreach_ ops over whole lists ----
void foreach_zero_(TensorList a) {
  for (const auto& t : a) cpu::fill_(const_cast<Tensor&>(t), 0);
}
void foreach_copy_(TensorList a, TensorList b, bool) {
  same_len("mytorch::_foreach_copy_", a, b);
  for (size_t i = 0; i < a.size(); ++i) cpu::copy_cast_(a[i], b[i]);
}
std::vector<Tensor> foreach_norm(TensorList a, const Scalar& ord, OptType dt) {
  std::vector<Tensor> r;
  for (const auto& t : a)
    r.push_back(cpu::vector_norm(dt ? cpu::to_dtype(t, *dt) : t, ord.toDouble(), std::nullopt, false));
  return r;
}

}  // namespace aten
}  // namespace mytorch
