// The CUDA kernels' registrations, in one C++ file: the .cu files then parse only the core
// tensor headers (kernels/cuda/ops.h, kernels/<family>.h), not the dispatcher's registration
// API. The CPU kernels' registrations are in kernels/cpu/register.cpp.
#ifdef MYTORCH_WITH_CUDA
#include <torch/library.h>

#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/ops.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/index.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "kernels/upsample.h"

TORCH_LIBRARY_IMPL(mytorch, CUDA, m) {
  // attention: the Triton kernels launched from C++ (attention.cpp)
  m.impl("flash_attn", &mytorch::cuda::flash_attn);
  m.impl("flash_attn_backward", &mytorch::cuda::flash_attn_backward);

  // activation (activation.cu, activation_hard.cu)
#define MYTORCH_IMPL_CUDA(NAME) m.impl(#NAME, &mytorch::cuda::NAME);
  MYTORCH_ACTIVATION_OPS(MYTORCH_IMPL_CUDA)

  // normalization (norm.cu, batchnorm.cu)
  m.impl("rms_norm", &mytorch::cuda::rms_norm);
  m.impl("rms_norm_backward", &mytorch::cuda::rms_norm_backward);
  m.impl("layer_norm", &mytorch::cuda::layer_norm);
  m.impl("layer_norm_backward", &mytorch::cuda::layer_norm_backward);
  m.impl("batch_norm", &mytorch::cuda::batch_norm);
  m.impl("batch_norm_update_stats_", &mytorch::cuda::batch_norm_update_stats);
  m.impl("batch_norm_backward", &mytorch::cuda::batch_norm_backward);

  // softmax, rope (softmax.cu, rope.cu)
  m.impl("softmax", &mytorch::cuda::softmax);
  m.impl("softmax_backward", &mytorch::cuda::softmax_backward);
  m.impl("log_softmax", &mytorch::cuda::log_softmax);
  m.impl("log_softmax_backward", &mytorch::cuda::log_softmax_backward);
  m.impl("rope", &mytorch::cuda::rope);
  m.impl("rope_", &mytorch::cuda::rope_);
  m.impl("rope_backward", &mytorch::cuda::rope_backward);

  // loss (loss.cu, loss_fused.cu)
  m.impl("nll_loss", &mytorch::cuda::nll_loss);
  m.impl("nll_loss_backward", &mytorch::cuda::nll_loss_backward);
  m.impl("cross_entropy", &mytorch::cuda::cross_entropy);
  m.impl("cross_entropy_backward", &mytorch::cuda::cross_entropy_backward);
  m.impl("mse_loss", &mytorch::cuda::mse_loss);
  m.impl("mse_loss_backward", &mytorch::cuda::mse_loss_backward);
  m.impl("fused_cross_entropy", &mytorch::cuda::fused_cross_entropy);
  m.impl("fused_cross_entropy_backward", &mytorch::cuda::fused_cross_entropy_backward);
  m.impl("fused_cross_entropy_grad", &mytorch::cuda::fused_cross_entropy_grad);
  m.impl("fused_linear_cross_entropy", &mytorch::cuda::fused_linear_cross_entropy);

  // dropout, embedding (dropout.cu, embedding.cu)
  m.impl("dropout", &mytorch::cuda::dropout);
  m.impl("dropout_backward", &mytorch::cuda::dropout_backward);
  m.impl("embedding", &mytorch::cuda::embedding);
  m.impl("embedding_backward", &mytorch::cuda::embedding_backward);

  // matrix products, convolution (gemm.cu, conv.cu)
  m.impl("mm", &mytorch::cuda::mm);
  m.impl("bmm", &mytorch::cuda::bmm);
  m.impl("addmm", &mytorch::cuda::addmm);
  m.impl("baddbmm", &mytorch::cuda::baddbmm);
  m.impl("linear", &mytorch::cuda::linear);
  m.impl("conv2d", &mytorch::cuda::conv2d);
  m.impl("conv2d_backward", &mytorch::cuda::conv2d_backward);
  m.impl("conv1d", &mytorch::cuda::conv1d);
  m.impl("conv1d_backward", &mytorch::cuda::conv1d_backward);

  // pooling, upsampling (pool.cu, upsample.cu)
  m.impl("max_pool2d", &mytorch::cuda::max_pool2d);
  m.impl("max_pool2d_backward", &mytorch::cuda::max_pool2d_backward);
  m.impl("avg_pool2d", &mytorch::cuda::avg_pool2d);
  m.impl("avg_pool2d_backward", &mytorch::cuda::avg_pool2d_backward);
  m.impl("adaptive_avg_pool2d", &mytorch::cuda::adaptive_avg_pool2d);
  m.impl("adaptive_avg_pool2d_backward", &mytorch::cuda::adaptive_avg_pool2d_backward);
  m.impl("upsample_nearest2d", &mytorch::cuda::upsample_nearest2d);
  m.impl("upsample_nearest2d_backward", &mytorch::cuda::upsample_nearest2d_backward);
  m.impl("upsample_bilinear2d", &mytorch::cuda::upsample_bilinear2d);
  m.impl("upsample_bilinear2d_backward", &mytorch::cuda::upsample_bilinear2d_backward);

  // reductions (reduce.cu)
  m.impl("sum", &mytorch::cuda::op_sum);
  m.impl("mean", &mytorch::cuda::mean);
  m.impl("prod", &mytorch::cuda::op_prod);
  m.impl("amax", &mytorch::cuda::op_amax);
  m.impl("amin", &mytorch::cuda::op_amin);
  m.impl("max_dim", &mytorch::cuda::op_max_dim);
  m.impl("min_dim", &mytorch::cuda::op_min_dim);
  m.impl("argmax", &mytorch::cuda::op_argmax);
  m.impl("argmin", &mytorch::cuda::op_argmin);
  m.impl("var", &mytorch::cuda::op_var);
  m.impl("std", &mytorch::cuda::op_std);
  m.impl("logsumexp", &mytorch::cuda::logsumexp);

  // indexing (index.cu, index_put.cu)
  m.impl("index_select", &mytorch::cuda::index_select);
  m.impl("gather", &mytorch::cuda::gather);
  m.impl("scatter_add", &mytorch::cuda::scatter_add);
  m.impl("cat", &mytorch::cuda::cat);
  m.impl("index", &mytorch::cuda::index);
  m.impl("index_put", &mytorch::cuda::index_put);
  m.impl("nonzero", &mytorch::cuda::nonzero);

  // optim (optim.cu, optim_step.cu)
  m.impl("sgd_step_", &mytorch::cuda::sgd_step_);
  m.impl("adam_step_", &mytorch::cuda::adam_step_);

  // elementwise_binary (elementwise_binary.cu, elementwise_binary_compare.cu, elementwise_binary_scale.cu)
  m.impl("add", &mytorch::cuda::ew::add);
  m.impl("sub", &mytorch::cuda::ew::sub);
#define MYTORCH_IMPL_BIN2(NAME, OP) m.impl(#NAME, &mytorch::cuda::ew::NAME);
  MYTORCH_BINARY_TENSOR_OPS(MYTORCH_IMPL_BIN2)
#undef MYTORCH_IMPL_BIN2
  m.impl("div", &mytorch::cuda::ew::div);
  m.impl("threshold_backward", &mytorch::cuda::ew::threshold_backward);
  m.impl("clamp_tensor", &mytorch::cuda::ew::clamp_tensor);
  m.impl("scale_", &mytorch::cuda::scale_);
  // elementwise_unary (elementwise_unary.cu, elementwise_unary_cast.cu)
  m.impl("neg", &mytorch::cuda::ew::neg);
  m.impl("abs", &mytorch::cuda::ew::abs);
  m.impl("exp", &mytorch::cuda::ew::exp);
  m.impl("log", &mytorch::cuda::ew::log);
  m.impl("sqrt", &mytorch::cuda::ew::sqrt);
  m.impl("rsqrt", &mytorch::cuda::ew::rsqrt);
  m.impl("tanh", &mytorch::cuda::ew::tanh);
  m.impl("sigmoid", &mytorch::cuda::ew::sigmoid);
  m.impl("relu", &mytorch::cuda::ew::relu);
  m.impl("silu", &mytorch::cuda::ew::silu);
  m.impl("reciprocal", &mytorch::cuda::ew::reciprocal);
  m.impl("clamp", &mytorch::cuda::ew::clamp);
  m.impl("cast", &mytorch::cuda::ew::cast);
  // elementwise_ternary (elementwise_ternary.cu)
  m.impl("where", &mytorch::cuda::ew::where);
  m.impl("addcmul", &mytorch::cuda::ew::addcmul);
  m.impl("addcdiv", &mytorch::cuda::ew::addcdiv);
  m.impl("lerp", &mytorch::cuda::ew::lerp);
  m.impl("masked_fill", &mytorch::cuda::ew::masked_fill);
}
#endif  // MYTORCH_WITH_CUDA
