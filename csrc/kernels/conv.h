// The convolution family: conv2d, conv1d and their backwards (input (N, C, H, W) or (N, C, L),
// weight (O, C / groups, kH, kW) or (O, C / groups, kL), bias (O) or none). The geometry and
// checks both backends share, so that they raise the same errors, and the entry points of each
// (kernels/cpu/conv.cpp, kernels/cuda/conv.cu). Host code only.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"

namespace mytorch {
namespace conv {

// input (N, C, H, W), weight (O, C / G, KH, KW), output (N, O, OH, OW); 1-D uses H = KH = 1.
struct ConvGeometry {
  int64_t N, C, H, W;  // input
  int64_t O, KH, KW;   // weight
  int64_t OH, OW;      // output
  int64_t sh, sw, ph, pw, dh, dw, G;
  int64_t Cg() const { return C / G; }
  int64_t Og() const { return O / G; }
  int64_t K() const { return Cg() * KH * KW; }
  int64_t HW() const { return H * W; }
  int64_t OHW() const { return OH * OW; }
  bool pointwise() const { return KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

inline bool is_half(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}

// Checks input/weight/bias/params; returns the geometry.
inline ConvGeometry conv_geometry(const char* op, const at::Tensor& input, const at::Tensor& weight,
                                  const at::Tensor* bias, at::IntArrayRef stride, at::IntArrayRef padding,
                                  at::IntArrayRef dilation, int64_t groups, int64_t spatial_dims) {
  check_dtype(op, "input", input, {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf});
  check_same_dtype(op, input, "input", weight, "weight");
  check_same_device(op, input, "input", weight, "weight");
  const char* layout = spatial_dims == 2 ? "(N, C, H, W)" : "(N, C, L)";
  const char* wlayout = spatial_dims == 2 ? "(out_channels, in_channels / groups, kH, kW)"
                                          : "(out_channels, in_channels / groups, kL)";
  TORCH_CHECK(input.dim() == spatial_dims + 2, op, ": expected input to be ", spatial_dims + 2,
              "-D ", layout, ", got a ", input.dim(), "-D tensor of shape ", shape_str(input.sizes()));
  TORCH_CHECK(weight.dim() == spatial_dims + 2, op, ": expected weight to be ", spatial_dims + 2,
              "-D ", wlayout, ", got a ", weight.dim(), "-D tensor of shape ", shape_str(weight.sizes()));
  TORCH_CHECK(groups >= 1, op, ": expected groups to be positive, got ", groups);
  auto st = int_pair(op, "stride", stride, 1);
  auto pd = int_pair(op, "padding", padding, 0);
  auto dl = int_pair(op, "dilation", dilation, 1);
  ConvGeometry s{};
  const bool two = spatial_dims == 2;
  s.N = input.size(0);
  s.C = input.size(1);
  s.H = two ? input.size(2) : 1;
  s.W = input.size(-1);
  s.O = weight.size(0);
  s.KH = two ? weight.size(2) : 1;
  s.KW = weight.size(-1);
  s.sh = two ? st[0] : 1;
  s.sw = st[1];
  s.ph = two ? pd[0] : 0;
  s.pw = pd[1];
  s.dh = two ? dl[0] : 1;
  s.dw = dl[1];
  s.G = groups;
  TORCH_CHECK(s.C % groups == 0, op, ": expected input channels (", s.C,
              ") to be divisible by groups (", groups, ")");
  TORCH_CHECK(s.O % groups == 0, op, ": expected out_channels (", s.O,
              ") to be divisible by groups (", groups, ")");
  TORCH_CHECK(weight.size(1) * groups == s.C, op, ": expected weight.size(1) == in_channels / groups = ",
              s.C / groups, " (input has ", s.C, " channels, groups=", groups, "), got weight of shape ",
              shape_str(weight.sizes()));
  TORCH_CHECK(s.KH >= 1 && s.KW >= 1, op, ": expected a non-empty kernel, got weight of shape ",
              shape_str(weight.sizes()));
  const int64_t ekh = s.dh * (s.KH - 1) + 1, ekw = s.dw * (s.KW - 1) + 1;
  const int64_t hp = s.H + 2 * s.ph, wp = s.W + 2 * s.pw;
  if (two) {
    TORCH_CHECK(ekh <= hp && ekw <= wp, op, ": expected the dilated kernel (", ekh, "x", ekw,
                ") to fit in the padded input (", hp, "x", wp, ")");
  } else {
    TORCH_CHECK(ekw <= wp, op, ": expected the dilated kernel (", ekw,
                ") to fit in the padded input (", wp, ")");
  }
  s.OH = (hp - ekh) / s.sh + 1;
  s.OW = (wp - ekw) / s.sw + 1;
  if (bias) {
    check_same_dtype(op, input, "input", *bias, "bias");
    check_same_device(op, input, "input", *bias, "bias");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == s.O, op, ": expected bias of shape [", s.O,
                "], got ", shape_str(bias->sizes()));
  }
  return s;
}

// The output's shape: (N, O, OH, OW), or (N, O, OW) for 1-D.
inline std::vector<int64_t> out_shape(const ConvGeometry& s, int64_t spatial_dims) {
  if (spatial_dims == 1) return {s.N, s.O, s.OW};
  return {s.N, s.O, s.OH, s.OW};
}

// The backward's grad: input's dtype and device, the output's shape.
inline void check_grad(const char* op, const at::Tensor& grad, const at::Tensor& input, const ConvGeometry& s,
                       int64_t spatial_dims) {
  check_same_dtype(op, input, "input", grad, "grad");
  check_same_device(op, input, "input", grad, "grad");
  const std::vector<int64_t> osize = out_shape(s, spatial_dims);
  TORCH_CHECK(grad.sizes() == at::IntArrayRef(osize), op, ": expected grad of shape ", shape_str(osize),
              " (the output shape), got ", shape_str(grad.sizes()));
}

// bf16 / fp16 inputs (autocast) compute in float32 through the backend's kernel `f`
// (convolution, convolution_backward), each result rounded once at the end.
template <typename F>
at::Tensor forward_in_float(F f, const char* op, const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor* bias, at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, int64_t groups, int64_t spatial_dims) {
  std::optional<at::Tensor> bf = bias ? std::optional<at::Tensor>(bias->to(at::kFloat)) : std::nullopt;
  return f(op, input.to(at::kFloat), weight.to(at::kFloat), bf, stride, padding, dilation, groups, spatial_dims)
      .to(input.scalar_type());
}

template <typename F>
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_in_float(F f, const char* op, const at::Tensor& grad,
                                                                 const at::Tensor& input, const at::Tensor& weight,
                                                                 at::IntArrayRef stride, at::IntArrayRef padding,
                                                                 at::IntArrayRef dilation, int64_t groups,
                                                                 std::array<bool, 3> mask, int64_t spatial_dims) {
  auto r = f(op, grad.to(at::kFloat), input.to(at::kFloat), weight.to(at::kFloat), stride, padding, dilation,
             groups, mask, spatial_dims);
  auto back = [&](const at::Tensor& t) { return t.defined() ? t.to(input.scalar_type()) : t; };
  return {back(std::get<0>(r)), back(std::get<1>(r)), back(std::get<2>(r))};
}

}  // namespace conv

// ---- entry points ----
// Each backend's kernels (conv.cpp, conv.cu), spatial_dims 1 or 2, `op` naming the errors; the
// backward returns (grad_input, grad_weight, grad_bias), an output whose mask entry is false
// undefined. Then the registered ops (cpu/register.cpp, cuda/register.cpp) over them.
#define MYTORCH_CONV_OPS                                                                                          \
  at::Tensor convolution(const char* op, const at::Tensor& input, const at::Tensor& weight,                      \
                         const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding, \
                         at::IntArrayRef dilation, int64_t groups, int64_t spatial_dims);                       \
  std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(                                           \
      const char* op, const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,                 \
      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,                 \
      std::array<bool, 3> mask, int64_t spatial_dims);                                                           \
  inline at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& b, \
                           at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t g) {                 \
    return convolution("mytorch::conv2d", input, weight, b, s, p, d, g, 2);                                      \
  }                                                                                                               \
  inline at::Tensor conv1d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& b, \
                           at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t g) {                 \
    return convolution("mytorch::conv1d", input, weight, b, s, p, d, g, 1);                                      \
  }                                                                                                               \
  inline std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(                                         \
      const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef s,              \
      at::IntArrayRef p, at::IntArrayRef d, int64_t g, std::array<bool, 3> mask) {                               \
    return convolution_backward("mytorch::conv2d_backward", grad, input, weight, s, p, d, g, mask, 2);           \
  }                                                                                                               \
  inline std::tuple<at::Tensor, at::Tensor, at::Tensor> conv1d_backward(                                         \
      const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef s,              \
      at::IntArrayRef p, at::IntArrayRef d, int64_t g, std::array<bool, 3> mask) {                               \
    return convolution_backward("mytorch::conv1d_backward", grad, input, weight, s, p, d, g, mask, 1);           \
  }

namespace cpu {
MYTORCH_CONV_OPS
}  // namespace cpu
namespace cuda {
MYTORCH_CONV_OPS
}  // namespace cuda

#undef MYTORCH_CONV_OPS

}  // namespace mytorch
