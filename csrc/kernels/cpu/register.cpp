// The CPU kernels' registrations, for the CPU and the mytorch device (PrivateUse1), in one file
// as the CUDA ones (kernels/cuda/register.cpp). The entry points are declared in the family
// headers, kernels/<family>.h.
#include <torch/library.h>

#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/conv.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kvcache.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/index.h"
#include "kernels/loss_checks.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "kernels/upsample.h"

namespace {

// One registration of a family's op list, X(name) (kernels/<family>.h); the elementwise ops
// are in namespace ew, their one-op lists X(name, op).
#define MYTORCH_IMPL_CPU(NAME) m.impl(#NAME, &mytorch::cpu::NAME);
#define MYTORCH_IMPL_CPU_EW(NAME) m.impl(#NAME, &mytorch::cpu::ew::NAME);
#define MYTORCH_IMPL_CPU_EW2(NAME, OP) MYTORCH_IMPL_CPU_EW(NAME)

void register_kernels(torch::Library& m) {
  // attention, kvcache (attention.cpp, kvcache.cpp)
  m.impl("flash_attn", &mytorch::cpu::flash_attn_op);
  m.impl("flash_attn_backward", &mytorch::cpu::flash_attn_backward_op);
  m.impl("flash_attn_with_kvcache", &mytorch::cpu::flash_attn_with_kvcache_op);

  // activation (activation.cpp)
  MYTORCH_ACTIVATION_OPS(MYTORCH_IMPL_CPU)

  // rope (rope.cpp)
  MYTORCH_ROPE_OPS(MYTORCH_IMPL_CPU)

  // elementwise_{unary,binary,ternary} (elementwise_*.cpp)
  MYTORCH_UNARY_TENSOR_OPS(MYTORCH_IMPL_CPU_EW2)
  MYTORCH_BINARY_TENSOR_OPS(MYTORCH_IMPL_CPU_EW2)
  MYTORCH_ELEMENTWISE_OTHER_OPS(MYTORCH_IMPL_CPU_EW)
  m.impl("scale_", &mytorch::cpu::scale_);

  // normalization (norm.cpp, batchnorm.cpp)
  m.impl("layer_norm", &mytorch::cpu::layer_norm);
  m.impl("layer_norm_backward", &mytorch::cpu::layer_norm_backward);
  m.impl("rms_norm", &mytorch::cpu::rms_norm);
  m.impl("rms_norm_backward", &mytorch::cpu::rms_norm_backward);
  m.impl("batch_norm", &mytorch::cpu::batch_norm);
  m.impl("batch_norm_update_stats_", &mytorch::cpu::batch_norm_update_stats);
  m.impl("batch_norm_backward", &mytorch::cpu::batch_norm_backward);

  // softmax (softmax.cpp)
  m.impl("softmax", &mytorch::cpu::softmax);
  m.impl("softmax_backward", &mytorch::cpu::softmax_backward);
  m.impl("log_softmax", &mytorch::cpu::log_softmax);
  m.impl("log_softmax_backward", &mytorch::cpu::log_softmax_backward);

  // dropout, embedding (dropout.cpp, embedding.cpp)
  m.impl("dropout", &mytorch::cpu::dropout);
  m.impl("dropout_backward", &mytorch::cpu::dropout_backward);
  m.impl("embedding", &mytorch::cpu::embedding);
  m.impl("embedding_backward", &mytorch::cpu::embedding_backward);

  // matrix products, convolution (gemm.cpp, conv.cpp)
  m.impl("mm", &mytorch::cpu::mm);
  m.impl("bmm", &mytorch::cpu::bmm);
  m.impl("addmm", &mytorch::cpu::addmm);
  m.impl("baddbmm", &mytorch::cpu::baddbmm);
  m.impl("linear", &mytorch::cpu::linear);
  m.impl("conv2d", &mytorch::cpu::conv2d);
  m.impl("conv2d_backward", &mytorch::cpu::conv2d_backward);
  m.impl("conv1d", &mytorch::cpu::conv1d);
  m.impl("conv1d_backward", &mytorch::cpu::conv1d_backward);

  // pooling, upsampling (pool.cpp, upsample.cpp)
  m.impl("max_pool2d", &mytorch::cpu::max_pool2d);
  m.impl("max_pool2d_backward", &mytorch::cpu::max_pool2d_backward);
  m.impl("avg_pool2d", &mytorch::cpu::avg_pool2d);
  m.impl("avg_pool2d_backward", &mytorch::cpu::avg_pool2d_backward);
  m.impl("adaptive_avg_pool2d", &mytorch::cpu::adaptive_avg_pool2d);
  m.impl("adaptive_avg_pool2d_backward", &mytorch::cpu::adaptive_avg_pool2d_backward);
  m.impl("upsample_nearest2d", &mytorch::cpu::upsample_nearest2d);
  m.impl("upsample_nearest2d_backward", &mytorch::cpu::upsample_nearest2d_backward);
  m.impl("upsample_bilinear2d", &mytorch::cpu::upsample_bilinear2d);
  m.impl("upsample_bilinear2d_backward", &mytorch::cpu::upsample_bilinear2d_backward);

  // reductions (reduce.cpp)
  m.impl("sum", &mytorch::cpu::op_sum);
  m.impl("mean", &mytorch::cpu::mean);
  m.impl("prod", &mytorch::cpu::op_prod);
  m.impl("amax", &mytorch::cpu::op_amax);
  m.impl("amin", &mytorch::cpu::op_amin);
  m.impl("max_dim", &mytorch::cpu::op_max_dim);
  m.impl("min_dim", &mytorch::cpu::op_min_dim);
  m.impl("argmax", &mytorch::cpu::op_argmax);
  m.impl("argmin", &mytorch::cpu::op_argmin);
  m.impl("var", &mytorch::cpu::op_var);
  m.impl("std", &mytorch::cpu::op_std);
  m.impl("logsumexp", &mytorch::cpu::logsumexp);

  // indexing (index.cpp)
  m.impl("index_select", &mytorch::cpu::index_select);
  m.impl("gather", &mytorch::cpu::gather);
  m.impl("scatter_add", &mytorch::cpu::scatter_add);
  m.impl("cat", &mytorch::cpu::cat);
  m.impl("index", &mytorch::cpu::index);
  m.impl("index_put", &mytorch::cpu::index_put);
  m.impl("nonzero", &mytorch::cpu::nonzero);

  // loss (loss.cpp)
  MYTORCH_LOSS_OPS(MYTORCH_IMPL_CPU)

  // optim (optim.cpp)
  m.impl("sgd_step_", &mytorch::cpu::sgd_step_);
  m.impl("adam_step_", &mytorch::cpu::adam_step_);
}

}  // namespace

TORCH_LIBRARY_IMPL(mytorch, CPU, m) { register_kernels(m); }
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) { register_kernels(m); }
