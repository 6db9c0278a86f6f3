// The CUDA kernels' registrations, in one C++ file: the .cu files then parse only the core
// tensor headers (kernels/cuda/ops.h, kernels/<family>.h), not the dispatcher's registration
// API. The CPU kernels' registrations are in kernels/cpu/register.cpp.
#ifdef MYTORCH_WITH_CUDA
#include <torch/library.h>

#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv.h"
#include "kernels/cuda/ops.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/index.h"
#include "kernels/norm.h"
#include "kernels/loss_checks.h"
#include "kernels/optim.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "kernels/upsample.h"

// One registration of a family's op list, X(name) (kernels/<family>.h); the elementwise ops
// are in namespace ew, their one-op lists X(name, op).
#define MYTORCH_IMPL_CUDA(NAME) m.impl(#NAME, &mytorch::cuda::NAME);
#define MYTORCH_IMPL_CUDA_EW(NAME) m.impl(#NAME, &mytorch::cuda::ew::NAME);
#define MYTORCH_IMPL_CUDA_EW2(NAME, OP) MYTORCH_IMPL_CUDA_EW(NAME)

TORCH_LIBRARY_IMPL(mytorch, CUDA, m) {
  // attention: the Triton kernels launched from C++ (attention.cpp)
  m.impl("flash_attn", &mytorch::cuda::flash_attn);
  m.impl("flash_attn_backward", &mytorch::cuda::flash_attn_backward);

  // activation (activation.cu, activation_hard.cu)
  MYTORCH_ACTIVATION_OPS(MYTORCH_IMPL_CUDA)

  // normalization (norm.cu, batchnorm.cu)
  m.impl("rms_norm", &mytorch::cuda::rms_norm);
  m.impl("rms_norm_backward", &mytorch::cuda::rms_norm_backward);
  m.impl("layer_norm", &mytorch::cuda::layer_norm);
  m.impl("layer_norm_backward", &mytorch::cuda::layer_norm_backward);
  m.impl("batch_norm", &mytorch::cuda::batch_norm);
  m.impl("batch_norm_update_stats_", &mytorch::cuda::batch_norm_update_stats);
  m.impl("batch_norm_backward", &mytorch::cuda::batch_norm_backward);

  // softmax (softmax.cu)
  m.impl("softmax", &mytorch::cuda::softmax);
  m.impl("softmax_backward", &mytorch::cuda::softmax_backward);
  m.impl("log_softmax", &mytorch::cuda::log_softmax);
  m.impl("log_softmax_backward", &mytorch::cuda::log_softmax_backward);

  // rope (rope.cu)
  MYTORCH_ROPE_OPS(MYTORCH_IMPL_CUDA)

  // loss (loss.cu, loss_fused.cu, loss_one_pass.cu, loss_stream.cu)
  MYTORCH_LOSS_OPS(MYTORCH_IMPL_CUDA)

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

  // elementwise_{unary,binary,ternary} (elementwise_*.cu)
  MYTORCH_UNARY_TENSOR_OPS(MYTORCH_IMPL_CUDA_EW2)
  MYTORCH_BINARY_TENSOR_OPS(MYTORCH_IMPL_CUDA_EW2)
  MYTORCH_ELEMENTWISE_OTHER_OPS(MYTORCH_IMPL_CUDA_EW)
  m.impl("scale_", &mytorch::cuda::scale_);
}
#endif  // MYTORCH_WITH_CUDA
