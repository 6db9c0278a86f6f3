// The elementwise unary math, one element in the compute type C (shared by the strided
// loops of elementwise_unary.cpp and the dispatched contiguous loops of unary_contig.cpp).
#pragma once
#include <cmath>
#include <type_traits>

#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace cpu {

// ---- unary math in the compute type C; lo/hi are the clamp bounds ----
template <Un OP, typename C>
inline auto un_apply(C x, C lo, C hi) {
  constexpr bool F = std::is_floating_point_v<C>;
  if constexpr (OP == Un::Neg) {
    return C(-x);
  } else if constexpr (OP == Un::Abs) {
    if constexpr (std::is_unsigned_v<C> || std::is_same_v<C, bool>) return x;
    else return x < 0 ? C(-x) : x;
  } else if constexpr (OP == Un::Relu) {
    if constexpr (F) return x > 0 ? x : (x != x ? x : C(0));
    else return x > 0 ? x : C(0);
  } else if constexpr (OP == Un::Sign) {
    if constexpr (std::is_same_v<C, bool>) return x;
    else return C((C(0) < x) - (x < C(0)));
  } else if constexpr (OP == Un::Clamp) {
    C r = x < lo ? lo : x;
    return r > hi ? hi : r;
  } else if constexpr (OP == Un::Square) {
    if constexpr (std::is_same_v<C, bool>) return x;
    else return C(x * x);
  } else if constexpr (OP == Un::LogicalNot) {
    return !bool(x);
  } else if constexpr (!F) {
    return C(0);  // floating-only ops never dispatch here
  } else if constexpr (OP == Un::Exp) {
    return m_exp(x);
  } else if constexpr (OP == Un::Log) {
    return m_log(x);
  } else if constexpr (OP == Un::Sqrt) {
    return std::sqrt(x);
  } else if constexpr (OP == Un::Rsqrt) {
    return C(1) / std::sqrt(x);
  } else if constexpr (OP == Un::Tanh) {
    return m_tanh(x);
  } else if constexpr (OP == Un::Sigmoid) {
    return C(1) / (C(1) + m_exp(-x));
  } else if constexpr (OP == Un::Silu) {
    return x / (C(1) + m_exp(-x));
  } else {
    static_assert(OP == Un::Reciprocal);
    return C(1) / x;
  }
}

}  // namespace cpu
}  // namespace mytorch
