// The elementwise kernels (kernels/cpu/elementwise_*) as ATen overloads on the mytorch device:
// templates over the op, one member per overload form, instantiated by the registrations in
// aten/register.cpp. B, U and T3 serve one tensor's functional, in-place and out= forms; FB,
// FU and FT the _foreach_ ops of torch.optim (foreach=True), one kernel call per tensor.
#pragma once
#include "aten/ops.h"
#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace aten {

// ---- binary: OP(Tensor, Tensor) and OP(Tensor, Scalar); `a` forms take alpha ----
template <cpu::Bin OP>
struct B {
  static Tensor t(const Tensor& a, const Tensor& b) { return cpu::binary(OP, a, b, 1, {}); }
  static Tensor& ti(Tensor& a, const Tensor& b) { return cpu::binary_(OP, a, b, 1); }
  static Tensor& to(const Tensor& a, const Tensor& b, Tensor& out) {
    cpu::binary(OP, a, b, 1, out);
    return out;
  }
  static Tensor s(const Tensor& a, const at::Scalar& b) { return cpu::binary(OP, a, cpu::wrap_scalar(b), 1, {}); }
  static Tensor& si(Tensor& a, const at::Scalar& b) { return cpu::binary_(OP, a, cpu::wrap_scalar(b), 1); }
  static Tensor& so(const Tensor& a, const at::Scalar& b, Tensor& out) {
    cpu::binary(OP, a, cpu::wrap_scalar(b), 1, out);
    return out;
  }
  static Tensor ta(const Tensor& a, const Tensor& b, const at::Scalar& al) { return cpu::binary(OP, a, b, al, {}); }
  static Tensor& tai(Tensor& a, const Tensor& b, const at::Scalar& al) { return cpu::binary_(OP, a, b, al); }
  static Tensor& tao(const Tensor& a, const Tensor& b, const at::Scalar& al, Tensor& out) {
    cpu::binary(OP, a, b, al, out);
    return out;
  }
  static Tensor sa(const Tensor& a, const at::Scalar& b, const at::Scalar& al) {
    return cpu::binary(OP, a, cpu::wrap_scalar(b), al, {});
  }
  static Tensor& sai(Tensor& a, const at::Scalar& b, const at::Scalar& al) {
    return cpu::binary_(OP, a, cpu::wrap_scalar(b), al);
  }
  static Tensor& sao(const Tensor& a, const at::Scalar& b, const at::Scalar& al, Tensor& out) {
    cpu::binary(OP, a, cpu::wrap_scalar(b), al, out);
    return out;
  }
};

// ---- unary: OP, OP_, OP.out ----
template <cpu::Un OP>
struct U {
  static Tensor f(const Tensor& x) { return cpu::unary(OP, x, {}); }
  static Tensor& i(Tensor& x) { return cpu::unary_(OP, x); }
  static Tensor& o(const Tensor& x, Tensor& out) {
    cpu::unary(OP, x, out);
    return out;
  }
};

// ---- ternary: OP(a, b, c, value) (addcmul, addcdiv) and OP(a, b, c) (where, lerp.Tensor) ----
template <cpu::Tern OP>
struct T3 {
  static Tensor f(const Tensor& a, const Tensor& b, const Tensor& c, const at::Scalar& v) {
    return cpu::ternary(OP, a, b, c, v, {});
  }
  static Tensor& i(Tensor& a, const Tensor& b, const Tensor& c, const at::Scalar& v) {
    return cpu::ternary_(OP, a, b, c, v);
  }
  static Tensor& o(const Tensor& a, const Tensor& b, const Tensor& c, const at::Scalar& v, Tensor& out) {
    cpu::ternary(OP, a, b, c, v, out);
    return out;
  }
  static Tensor t(const Tensor& a, const Tensor& b, const Tensor& c) { return cpu::ternary(OP, a, b, c, 0, {}); }
  static Tensor& ti(Tensor& a, const Tensor& b, const Tensor& c) { return cpu::ternary_(OP, a, b, c, 0); }
  static Tensor& to(const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out) {
    cpu::ternary(OP, a, b, c, 0, out);
    return out;
  }
};

// ---- _foreach_ ----
inline void same_len(const char* op, at::TensorList a, at::TensorList b) {
  TORCH_CHECK(a.size() == b.size(), op, ": expected lists of the same length, got ", a.size(), " and ",
              b.size());
}

// binary: s (Scalar), sl (ScalarList), l (List), la (List, alpha), t (Tensor), ta (Tensor, alpha);
// the `i` forms in place
template <cpu::Bin OP>
struct FB {
  static constexpr const char* kName = "mytorch::_foreach";
  static std::vector<Tensor> s(at::TensorList a, const at::Scalar& b) {
    std::vector<Tensor> r;
    for (const auto& t : a) r.push_back(cpu::binary(OP, t, cpu::wrap_scalar(b), 1, {}));
    return r;
  }
  static void si(at::TensorList a, const at::Scalar& b) {
    Tensor w = cpu::wrap_scalar(b);
    for (const auto& t : a) cpu::binary_(OP, const_cast<Tensor&>(t), w, 1);
  }
  static std::vector<Tensor> l(at::TensorList a, at::TensorList b) {
    same_len(kName, a, b);
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::binary(OP, a[i], b[i], 1, {}));
    return r;
  }
  static void li(at::TensorList a, at::TensorList b) {
    same_len(kName, a, b);
    for (size_t i = 0; i < a.size(); ++i) cpu::binary_(OP, const_cast<Tensor&>(a[i]), b[i], 1);
  }
  static std::vector<Tensor> la(at::TensorList a, at::TensorList b, const at::Scalar& al) {
    same_len(kName, a, b);
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::binary(OP, a[i], b[i], al, {}));
    return r;
  }
  static void lai(at::TensorList a, at::TensorList b, const at::Scalar& al) {
    same_len(kName, a, b);
    for (size_t i = 0; i < a.size(); ++i) cpu::binary_(OP, const_cast<Tensor&>(a[i]), b[i], al);
  }
  static std::vector<Tensor> sl(at::TensorList a, at::ArrayRef<at::Scalar> b) {
    TORCH_CHECK(a.size() == b.size(), kName, ": expected one scalar per tensor, got ", b.size(), " for ", a.size());
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::binary(OP, a[i], cpu::wrap_scalar(b[i]), 1, {}));
    return r;
  }
  static void sli(at::TensorList a, at::ArrayRef<at::Scalar> b) {
    TORCH_CHECK(a.size() == b.size(), kName, ": expected one scalar per tensor, got ", b.size(), " for ", a.size());
    for (size_t i = 0; i < a.size(); ++i) cpu::binary_(OP, const_cast<Tensor&>(a[i]), cpu::wrap_scalar(b[i]), 1);
  }
  static std::vector<Tensor> t(at::TensorList a, const Tensor& b) {
    std::vector<Tensor> r;
    for (const auto& x : a) r.push_back(cpu::binary(OP, x, b, 1, {}));
    return r;
  }
  static void ti(at::TensorList a, const Tensor& b) {
    for (const auto& x : a) cpu::binary_(OP, const_cast<Tensor&>(x), b, 1);
  }
  static std::vector<Tensor> ta(at::TensorList a, const Tensor& b, const at::Scalar& al) {
    std::vector<Tensor> r;
    for (const auto& x : a) r.push_back(cpu::binary(OP, x, b, al, {}));
    return r;
  }
  static void tai(at::TensorList a, const Tensor& b, const at::Scalar& al) {
    for (const auto& x : a) cpu::binary_(OP, const_cast<Tensor&>(x), b, al);
  }
};

template <cpu::Un OP>
struct FU {
  static std::vector<Tensor> f(at::TensorList a) {
    std::vector<Tensor> r;
    for (const auto& t : a) r.push_back(cpu::unary(OP, t, {}));
    return r;
  }
  static void i(at::TensorList a) {
    for (const auto& t : a) cpu::unary_(OP, const_cast<Tensor&>(t));
  }
};

// ternary over three lists: s (Scalar value), sl (ScalarList), t (a Tensor of values), l (no
// value: lerp.List); the `i` forms in place
template <cpu::Tern OP>
struct FT {
  static void check(at::TensorList a, at::TensorList b, at::TensorList c) {
    same_len("mytorch::_foreach", a, b);
    same_len("mytorch::_foreach", a, c);
  }
  static std::vector<Tensor> s(at::TensorList a, at::TensorList b, at::TensorList c, const at::Scalar& v) {
    check(a, b, c);
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::ternary(OP, a[i], b[i], c[i], v, {}));
    return r;
  }
  static void si(at::TensorList a, at::TensorList b, at::TensorList c, const at::Scalar& v) {
    check(a, b, c);
    for (size_t i = 0; i < a.size(); ++i) cpu::ternary_(OP, const_cast<Tensor&>(a[i]), b[i], c[i], v);
  }
  static std::vector<Tensor> sl(at::TensorList a, at::TensorList b, at::TensorList c, at::ArrayRef<at::Scalar> v) {
    check(a, b, c);
    TORCH_CHECK(v.size() == a.size(), "mytorch::_foreach: expected one scalar per tensor, got ", v.size());
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::ternary(OP, a[i], b[i], c[i], v[i], {}));
    return r;
  }
  static void sli(at::TensorList a, at::TensorList b, at::TensorList c, at::ArrayRef<at::Scalar> v) {
    check(a, b, c);
    TORCH_CHECK(v.size() == a.size(), "mytorch::_foreach: expected one scalar per tensor, got ", v.size());
    for (size_t i = 0; i < a.size(); ++i) cpu::ternary_(OP, const_cast<Tensor&>(a[i]), b[i], c[i], v[i]);
  }
  static std::vector<at::Scalar> values(const Tensor& t) {
    Tensor c = t.to(at::kCPU, at::kDouble).contiguous();
    std::vector<at::Scalar> r;
    for (int64_t i = 0; i < c.numel(); ++i) r.push_back(c.const_data_ptr<double>()[i]);
    return r;
  }
  static std::vector<Tensor> t(at::TensorList a, at::TensorList b, at::TensorList c, const Tensor& v) {
    return sl(a, b, c, values(v));
  }
  static void ti(at::TensorList a, at::TensorList b, at::TensorList c, const Tensor& v) { sli(a, b, c, values(v)); }
  static std::vector<Tensor> l(at::TensorList a, at::TensorList b, at::TensorList c) {
    check(a, b, c);
    std::vector<Tensor> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(cpu::ternary(OP, a[i], b[i], c[i], 0, {}));
    return r;
  }
  static void li(at::TensorList a, at::TensorList b, at::TensorList c) {
    check(a, b, c);
    for (size_t i = 0; i < a.size(); ++i) cpu::ternary_(OP, const_cast<Tensor&>(a[i]), b[i], c[i], 0);
  }
};

}  // namespace aten
}  // namespace mytorch
