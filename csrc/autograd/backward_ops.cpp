// The backward ops have no backward of their own: a second derivative through one of them
// (torch.autograd.grad(..., create_graph=True), then backward again) raises at the second
// backward, naming the op ("derivative for mytorch::gelu_backward is not implemented").
// Without an autograd kernel torch would only warn there and leave the gradient out, a
// silently wrong second derivative. In a first backward grad mode is off and the fallback
// only passes the call on (the C++ autograd nodes call these ops below autograd and skip it:
// common.h, BackwardCall).
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  for (const char* op : {"conv1d_backward", "conv2d_backward", "flash_attn_backward", "fused_cross_entropy_backward",
                         "gelu_backward", "layer_norm_backward", "rms_norm_backward", "rope_backward",
                         "swiglu_backward"})
    m.impl(op, torch::autograd::autogradNotImplementedFallback());
}
