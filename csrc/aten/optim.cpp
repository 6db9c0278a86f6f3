// torch.optim on the mytorch device: aten::_fused_{sgd,adam,adamw}_ -> the fused kernels in
// kernels/cpu/optim.cpp, and the _foreach_* ops (foreach=True, the default) -> per-tensor
// elementwise kernels, so no optimizer step falls back to the CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/cpu/elementwise.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"

namespace mytorch {
namespace aten {
namespace {

using at::Scalar;
using at::Tensor;
using at::TensorList;
using cpu::Bin;
using cpu::Tern;
using cpu::Un;
using OptT = std::optional<Tensor>;

void same_len(const char* op, TensorList a, TensorList b) {
  TORCH_CHECK(a.size() == b.size(), op, ": expected lists of the same length, got ", a.size(), " and ",
              b.size());
}

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

// ---- _foreach_*: one kernel call per tensor ----
template <Bin OP>
struct FB {
  static constexpr const char* kName = "mytorch::_foreach";
  static std::vector<Tensor> s(TensorList a, const Scalar& b) {
    std::vector<Tensor> r;
    for (const auto& t : a) r.push_back(cpu::binary(OP, t, cpu::wrap_scalar(b), 1, {}));
    return r;
  }
  static void si(TensorList a, const Scalar& b) {
    Tensor w = cpu::wrap_scalar(b);
    for (const auto& t : a) cpu::binary_(OP, const_cast<Tensor&>(t), w, 1);
  }
  static std::vector<Tensor> l(TensorList a, TensorList b) {
    same_len(kName, a, b);
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::binary(OP, a[i], b[i], 1, {}));
    return r;
  }
  static void li(TensorList a, TensorList b) {
    same_len(kName, a, b);
    for (size_t i = 0; i < a.size(); ++i) cpu::binary_(OP, const_cast<Tensor&>(a[i]), b[i], 1);
  }
  static std::vector<Tensor> la(TensorList a, TensorList b, const Scalar& al) {
    same_len(kName, a, b);
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::binary(OP, a[i], b[i], al, {}));
    return r;
  }
  static void lai(TensorList a, TensorList b, const Scalar& al) {
    same_len(kName, a, b);
    for (size_t i = 0; i < a.size(); ++i) cpu::binary_(OP, const_cast<Tensor&>(a[i]), b[i], al);
  }
  static std::vector<Tensor> sl(TensorList a, at::ArrayRef<Scalar> b) {
    TORCH_CHECK(a.size() == b.size(), kName, ": expected one scalar per tensor, got ", b.size(), " for ", a.size());
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::binary(OP, a[i], cpu::wrap_scalar(b[i]), 1, {}));
    return r;
  }
  static void sli(TensorList a, at::ArrayRef<Scalar> b) {
    TORCH_CHECK(a.size() == b.size(), kName, ": expected one scalar per tensor, got ", b.size(), " for ", a.size());
    for (size_t i = 0; i < a.size(); ++i) cpu::binary_(OP, const_cast<Tensor&>(a[i]), cpu::wrap_scalar(b[i]), 1);
  }
  static std::vector<Tensor> t(TensorList a, const Tensor& b) {
    std::vector<Tensor> r;
    for (const auto& x : a) r.push_back(cpu::binary(OP, x, b, 1, {}));
    return r;
  }
  static void ti(TensorList a, const Tensor& b) {
    for (const auto& x : a) cpu::binary_(OP, const_cast<Tensor&>(x), b, 1);
  }
  static std::vector<Tensor> ta(TensorList a, const Tensor& b, const Scalar& al) {
    std::vector<Tensor> r;
    for (const auto& x : a) r.push_back(cpu::binary(OP, x, b, al, {}));
    return r;
  }
  static void tai(TensorList a, const Tensor& b, const Scalar& al) {
    for (const auto& x : a) cpu::binary_(OP, const_cast<Tensor&>(x), b, al);
  }
};

template <Un OP>
struct FU {
  static std::vector<Tensor> f(TensorList a) {
    std::vector<Tensor> r;
    for (const auto& t : a) r.push_back(cpu::unary(OP, t, {}));
    return r;
  }
  static void i(TensorList a) {
    for (const auto& t : a) cpu::unary_(OP, const_cast<Tensor&>(t));
  }
};

template <Tern OP>
struct FT {
  static void check(TensorList a, TensorList b, TensorList c) {
    same_len("mytorch::_foreach", a, b);
    same_len("mytorch::_foreach", a, c);
  }
  static std::vector<Tensor> s(TensorList a, TensorList b, TensorList c, const Scalar& v) {
    check(a, b, c);
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::ternary(OP, a[i], b[i], c[i], v, {}));
    return r;
  }
  static void si(TensorList a, TensorList b, TensorList c, const Scalar& v) {
    check(a, b, c);
    for (size_t i = 0; i < a.size(); ++i) cpu::ternary_(OP, const_cast<Tensor&>(a[i]), b[i], c[i], v);
  }
  static std::vector<Tensor> sl(TensorList a, TensorList b, TensorList c, at::ArrayRef<Scalar> v) {
    check(a, b, c);
    TORCH_CHECK(v.size() == a.size(), "mytorch::_foreach: expected one scalar per tensor, got ", v.size());
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::ternary(OP, a[i], b[i], c[i], v[i], {}));
    return r;
  }
  static void sli(TensorList a, TensorList b, TensorList c, at::ArrayRef<Scalar> v) {
    check(a, b, c);
    TORCH_CHECK(v.size() == a.size(), "mytorch::_foreach: expected one scalar per tensor, got ", v.size());
    for (size_t i = 0; i < a.size(); ++i) cpu::ternary_(OP, const_cast<Tensor&>(a[i]), b[i], c[i], v[i]);
  }
  static std::vector<Scalar> values(const Tensor& t) {
    Tensor c = t.to(at::kCPU, at::kDouble).contiguous();
    std::vector<Scalar> r;
    for (int64_t i = 0; i < c.numel(); ++i) r.push_back(c.const_data_ptr<double>()[i]);
    return r;
  }
  static std::vector<Tensor> t(TensorList a, TensorList b, TensorList c, const Tensor& v) { return sl(a, b, c, values(v)); }
  static void ti(TensorList a, TensorList b, TensorList c, const Tensor& v) { sli(a, b, c, values(v)); }
};

std::vector<Tensor> lerp_s(TensorList a, TensorList b, const Scalar& w) { return FB<Bin::Lerp>::la(a, b, w); }
void lerp_si(TensorList a, TensorList b, const Scalar& w) { FB<Bin::Lerp>::lai(a, b, w); }
std::vector<Tensor> lerp_l(TensorList a, TensorList b, TensorList w) {
  FT<Tern::LerpTensor>::check(a, b, w);
  std::vector<Tensor> r;
  for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::ternary(Tern::LerpTensor, a[i], b[i], w[i], 0, {}));
  return r;
}
void lerp_li(TensorList a, TensorList b, TensorList w) {
  FT<Tern::LerpTensor>::check(a, b, w);
  for (size_t i = 0; i < a.size(); ++i) cpu::ternary_(Tern::LerpTensor, const_cast<Tensor&>(a[i]), b[i], w[i], 0);
}
void zero_(TensorList a) {
  for (const auto& t : a) cpu::fill_(const_cast<Tensor&>(t), 0);
}
void copy_(TensorList a, TensorList b, bool) {
  same_len("mytorch::_foreach_copy_", a, b);
  for (size_t i = 0; i < a.size(); ++i) cpu::copy_cast_(a[i], b[i]);
}
std::vector<Tensor> norm(TensorList a, const Scalar& ord, std::optional<at::ScalarType> dt) {
  std::vector<Tensor> r;
  for (const auto& t : a)
    r.push_back(cpu::vector_norm(dt ? cpu::to_dtype(t, *dt) : t, ord.toDouble(), std::nullopt, false));
  return r;
}

}  // namespace
}  // namespace aten
}  // namespace mytorch

#define REG_FB_SCALAR(m, NAME, OP)                              \
  m.impl("_foreach_" #NAME ".Scalar", &FB<OP>::s);              \
  m.impl("_foreach_" #NAME "_.Scalar", &FB<OP>::si);            \
  m.impl("_foreach_" #NAME ".ScalarList", &FB<OP>::sl);         \
  m.impl("_foreach_" #NAME "_.ScalarList", &FB<OP>::sli);
#define REG_FU(m, NAME, OP)                         \
  m.impl("_foreach_" #NAME, &FU<OP>::f);            \
  m.impl("_foreach_" #NAME "_", &FU<OP>::i);
#define REG_FT(m, NAME, OP)                                   \
  m.impl("_foreach_" #NAME ".Scalar", &FT<OP>::s);            \
  m.impl("_foreach_" #NAME "_.Scalar", &FT<OP>::si);          \
  m.impl("_foreach_" #NAME ".ScalarList", &FT<OP>::sl);       \
  m.impl("_foreach_" #NAME "_.ScalarList", &FT<OP>::sli);     \
  m.impl("_foreach_" #NAME ".Tensor", &FT<OP>::t);            \
  m.impl("_foreach_" #NAME "_.Tensor", &FT<OP>::ti);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace mytorch::aten;
  m.impl("_fused_sgd_", &mytorch::aten::fused_sgd);
  m.impl("_fused_sgd_.tensor_lr", &mytorch::aten::fused_sgd_t);
  m.impl("_fused_adam_", &mytorch::aten::fused_adam<false>);
  m.impl("_fused_adam_.tensor_lr", &mytorch::aten::fused_adam_t<false>);
  m.impl("_fused_adamw_", &mytorch::aten::fused_adam<true>);
  m.impl("_fused_adamw_.tensor_lr", &mytorch::aten::fused_adam_t<true>);
  REG_FB_SCALAR(m, add, Bin::Add)
  m.impl("_foreach_add.List", &FB<Bin::Add>::la);
  m.impl("_foreach_add_.List", &FB<Bin::Add>::lai);
  m.impl("_foreach_add.Tensor", &FB<Bin::Add>::ta);
  m.impl("_foreach_add_.Tensor", &FB<Bin::Add>::tai);
  REG_FB_SCALAR(m, sub, Bin::Sub)
  m.impl("_foreach_sub.List", &FB<Bin::Sub>::la);
  m.impl("_foreach_sub_.List", &FB<Bin::Sub>::lai);
  REG_FB_SCALAR(m, mul, Bin::Mul)
  m.impl("_foreach_mul.List", &FB<Bin::Mul>::l);
  m.impl("_foreach_mul_.List", &FB<Bin::Mul>::li);
  m.impl("_foreach_mul.Tensor", &FB<Bin::Mul>::t);
  m.impl("_foreach_mul_.Tensor", &FB<Bin::Mul>::ti);
  REG_FB_SCALAR(m, div, Bin::Div)
  m.impl("_foreach_div.List", &FB<Bin::Div>::l);
  m.impl("_foreach_div_.List", &FB<Bin::Div>::li);
  m.impl("_foreach_div.Tensor", &FB<Bin::Div>::t);
  m.impl("_foreach_div_.Tensor", &FB<Bin::Div>::ti);
  REG_FB_SCALAR(m, maximum, Bin::Maximum)
  m.impl("_foreach_maximum.List", &FB<Bin::Maximum>::l);
  m.impl("_foreach_maximum_.List", &FB<Bin::Maximum>::li);
  REG_FB_SCALAR(m, minimum, Bin::Minimum)
  m.impl("_foreach_minimum.List", &FB<Bin::Minimum>::l);
  m.impl("_foreach_minimum_.List", &FB<Bin::Minimum>::li);
  REG_FT(m, addcmul, Tern::Addcmul)
  REG_FT(m, addcdiv, Tern::Addcdiv)
  m.impl("_foreach_lerp.Scalar", &mytorch::aten::lerp_s);
  m.impl("_foreach_lerp_.Scalar", &mytorch::aten::lerp_si);
  m.impl("_foreach_lerp.List", &mytorch::aten::lerp_l);
  m.impl("_foreach_lerp_.List", &mytorch::aten::lerp_li);
  REG_FU(m, sqrt, Un::Sqrt)
  REG_FU(m, neg, Un::Neg)
  REG_FU(m, abs, Un::Abs)
  REG_FU(m, exp, Un::Exp)
  REG_FU(m, reciprocal, Un::Reciprocal)
  REG_FU(m, sign, Un::Sign)
  REG_FU(m, sigmoid, Un::Sigmoid)
  m.impl("_foreach_zero_", &mytorch::aten::zero_);
  m.impl("_foreach_copy_", &mytorch::aten::copy_);
  m.impl("_foreach_norm.Scalar", &mytorch::aten::norm);
}
