// aten convolutions on the mytorch device -> the OpenMP conv kernels (kernels/cpu/conv.cpp).
// ATen sends every convolution of a PrivateUse1 tensor to convolution_overrideable and
// its backward to convolution_backward_overrideable; 1-D and 2-D, grouped, depthwise
// and transposed convolutions are served here.
#include "aten/ops.h"

#include "kernels/conv.h"

namespace mytorch {
namespace aten {
namespace {

const char* kOp = "mytorch (aten::convolution_overrideable)";

void check_geometry(const at::Tensor& input, at::IntArrayRef output_padding, bool transposed) {
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, kOp,
              ": expected a 1-D or 2-D convolution (3-D or 4-D input), got input of shape ",
              input.sizes());
  if (!transposed)
    for (auto p : output_padding)
      TORCH_CHECK(p == 0, kOp, ": expected output_padding 0 for a convolution, got ", output_padding);
}

// A transposed convolution is the input-gradient of the convolution it transposes:
// y = conv_backward_input(x; weight), with the output size chosen by output_padding.
at::Tensor conv_transpose(const at::Tensor& input, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                          at::IntArrayRef padding, at::IntArrayRef dilation,
                          at::IntArrayRef output_padding, int64_t groups) {
  const int64_t nd = input.dim() - 2;
  std::vector<int64_t> out_size{input.size(0), weight.size(1) * groups};
  for (int64_t d = 0; d < nd; ++d)
    out_size.push_back((input.size(2 + d) - 1) * stride[d] - 2 * padding[d] +
                       dilation[d] * (weight.size(2 + d) - 1) + output_padding[d] + 1);
  // The "input" of the forward convolution this one transposes has out_size; its
  // output is our input. Only the shape of that forward input is used.
  at::Tensor shape_only = at::empty(out_size, input.options());
  auto r = nd == 2 ? mytorch::cpu::conv2d_backward(input, shape_only, weight, stride, padding, dilation, groups,
                                     {true, false, false})
                   : mytorch::cpu::conv1d_backward(input, shape_only, weight, stride, padding, dilation, groups,
                                     {true, false, false});
  at::Tensor y = std::get<0>(r);
  if (bias.has_value() && bias->defined()) {
    std::vector<int64_t> bshape(y.dim(), 1);
    bshape[1] = -1;
    y.add_(bias->view(bshape));
  }
  return y;
}

}  // namespace

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool transposed, at::IntArrayRef output_padding,
                                    int64_t groups) {
  check_geometry(input, output_padding, transposed);
  if (transposed)
    return conv_transpose(input, weight, bias, stride, padding, dilation, output_padding, groups);
  if (input.dim() == 4) return mytorch::cpu::conv2d(input, weight, bias, stride, padding, dilation, groups);
  return mytorch::cpu::conv1d(input, weight, bias, stride, padding, dilation, groups);
}

Tensors3 convolution_backward_overrideable(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
    at::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> mask) {
  check_geometry(input, output_padding, transposed);
  const bool two = input.dim() == 4;
  auto backward = two ? &mytorch::cpu::conv2d_backward : &mytorch::cpu::conv1d_backward;
  if (!transposed) return backward(grad, input, weight, stride, padding, dilation, groups, mask);
  // y = convT(x, w): dx = conv(dy, w); dw = grad_weight of conv(input=dy, grad=x).
  at::Tensor gx, gw, gb;
  if (mask[0])
    gx = two ? mytorch::cpu::conv2d(grad, weight, std::nullopt, stride, padding, dilation, groups)
             : mytorch::cpu::conv1d(grad, weight, std::nullopt, stride, padding, dilation, groups);
  if (mask[1])
    gw = std::get<1>(backward(input, grad, weight, stride, padding, dilation, groups,
                              {false, true, false}));
  if (mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < grad.dim(); ++d) dims.push_back(d);
    gb = grad.sum(dims);
  }
  return {gx, gw, gb};
}

}  // namespace aten
}  // namespace mytorch
