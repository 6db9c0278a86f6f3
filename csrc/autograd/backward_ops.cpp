// Ops without a derivative of their own raise at backward, naming the op, where torch, left
// to itself, would only warn and leave their part of the gradient out (a silently wrong
// result, such as a None second derivative of gelu where ATen's is defined).
//
// - The backward ops: a second derivative through one of them (torch.autograd.grad(...,
//   create_graph=True), then backward again) raises "derivative for mytorch::gelu_backward is
//   not implemented". softmax_backward and log_softmax_backward are not here: they have
//   autograd of their own. In a first backward grad mode is off and the fallback only passes
//   the call on (the C++ autograd nodes call these ops below autograd and skip it:
//   common.h, BackwardCall).
// - rope_, the in-place rotary embedding (inference): on a tensor that needs a gradient.
// - flash_attn_fp8, the float8 attention forward, which has no backward.
// (flash_attn_with_kvcache has a kernel of its own in attention.cpp: it also writes its
// caches in place.)
// tests/ops/test_second_derivative.py holds every backward op to one of the two behaviours.
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  for (const char* op :
       {"adaptive_avg_pool2d_backward", "avg_pool2d_backward", "batch_norm_backward", "bias_gelu_backward",
        "conv1d_backward", "conv2d_backward", "cross_entropy_backward", "dropout_backward", "embedding_backward",
        "flash_attn_backward", "fused_cross_entropy_backward", "gelu_backward", "hardsigmoid_backward",
        "hardswish_backward", "layer_norm_backward", "max_pool2d_backward", "mse_loss_backward",
        "nll_loss_backward", "rms_norm_backward", "rope_backward", "sigmoid_backward", "silu_backward",
        "swiglu_backward", "tanh_backward", "threshold_backward", "upsample_bilinear2d_backward",
        "upsample_nearest2d_backward", "rope_", "flash_attn_fp8"})
    m.impl(op, torch::autograd::autogradNotImplementedFallback());
}
