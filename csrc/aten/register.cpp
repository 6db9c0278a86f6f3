// The mytorch device's ATen kernels, registered for PrivateUse1 in one file, by family, as the
// kernels of the mytorch ops are (kernels/cpu/register.cpp, kernels/cuda/register.cpp): the
// device runtime's own ops (device/ops.h), then each family's entry points (aten/ops.h, the
// templates of aten/elementwise.h, and the kernels/cpu kernels whose signature is ATen's).
// Quantized tensors have their own dispatch key, QuantizedPrivateUse1, registered last.
// An ATen op registered nowhere here runs on the CPU through the boxed fallback
// (device/fallback.cpp).
#include <torch/library.h>

#include "aten/elementwise.h"
#include "aten/ops.h"
#include "device/ops.h"
#include "kernels/cpu/activation.h"
#include "kernels/gemm.h"
#include "kernels/index.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/upsample.h"

// The overload sets of one elementwise op, from aten/elementwise.h's templates.
// OP.Tensor, OP_.Tensor, OP + OUT, OP.Scalar, OP_.Scalar, OP.Scalar_out
#define REG_BIN_OUT(m, NAME, OP, OUT)       \
  m.impl(#NAME ".Tensor", &B<OP>::t);       \
  m.impl(#NAME "_.Tensor", &B<OP>::ti);     \
  m.impl(#NAME OUT, &B<OP>::to);            \
  m.impl(#NAME ".Scalar", &B<OP>::s);       \
  m.impl(#NAME "_.Scalar", &B<OP>::si);     \
  m.impl(#NAME ".Scalar_out", &B<OP>::so);
#define REG_BIN(m, NAME, OP) REG_BIN_OUT(m, NAME, OP, ".Tensor_out")
// the same with alpha (add, sub)
#define REG_ALPHA(m, NAME, OP)              \
  m.impl(#NAME ".Tensor", &B<OP>::ta);      \
  m.impl(#NAME "_.Tensor", &B<OP>::tai);    \
  m.impl(#NAME ".out", &B<OP>::tao);        \
  m.impl(#NAME ".Scalar", &B<OP>::sa);      \
  m.impl(#NAME "_.Scalar", &B<OP>::sai);    \
  m.impl(#NAME ".Scalar_out", &B<OP>::sao);
// OP, OP_, OP.out over tensors (logical_and, logical_or, maximum)
#define REG_BIN_TENSORS(m, NAME, OP) \
  m.impl(#NAME, &B<OP>::t);          \
  m.impl(#NAME "_", &B<OP>::ti);     \
  m.impl(#NAME ".out", &B<OP>::to);
// OP(grad, x) and OP.grad_input (sigmoid_backward, tanh_backward, silu_backward)
#define REG_GRAD(m, NAME, OP)  \
  m.impl(#NAME, &B<OP>::t);    \
  m.impl(#NAME ".grad_input", &B<OP>::to);
#define REG_UN(m, NAME, OP)      \
  m.impl(#NAME, &U<OP>::f);      \
  m.impl(#NAME "_", &U<OP>::i);  \
  m.impl(#NAME ".out", &U<OP>::o);
#define REG_T3(m, NAME, OP)      \
  m.impl(#NAME, &T3<OP>::f);     \
  m.impl(#NAME "_", &T3<OP>::i); \
  m.impl(#NAME ".out", &T3<OP>::o);
// The _foreach_ overloads of one op (FB, FU, FT): .Scalar, .ScalarList and .List (LIST: l, or
// la with alpha), in place and not; .Tensor (TENSOR: t, or ta with alpha)
#define REG_FB(m, NAME, OP, LIST)                             \
  m.impl("_foreach_" #NAME ".Scalar", &FB<OP>::s);            \
  m.impl("_foreach_" #NAME "_.Scalar", &FB<OP>::si);          \
  m.impl("_foreach_" #NAME ".ScalarList", &FB<OP>::sl);       \
  m.impl("_foreach_" #NAME "_.ScalarList", &FB<OP>::sli);     \
  m.impl("_foreach_" #NAME ".List", &FB<OP>::LIST);           \
  m.impl("_foreach_" #NAME "_.List", &FB<OP>::LIST##i);
#define REG_FB_TENSOR(m, NAME, OP, TENSOR)                    \
  m.impl("_foreach_" #NAME ".Tensor", &FB<OP>::TENSOR);       \
  m.impl("_foreach_" #NAME "_.Tensor", &FB<OP>::TENSOR##i);
#define REG_FU(m, NAME, OP)                    \
  m.impl("_foreach_" #NAME, &FU<OP>::f);       \
  m.impl("_foreach_" #NAME "_", &FU<OP>::i);
#define REG_FT(m, NAME, OP)                                   \
  m.impl("_foreach_" #NAME ".Scalar", &FT<OP>::s);            \
  m.impl("_foreach_" #NAME "_.Scalar", &FT<OP>::si);          \
  m.impl("_foreach_" #NAME ".ScalarList", &FT<OP>::sl);       \
  m.impl("_foreach_" #NAME "_.ScalarList", &FT<OP>::sli);     \
  m.impl("_foreach_" #NAME ".Tensor", &FT<OP>::t);            \
  m.impl("_foreach_" #NAME "_.Tensor", &FT<OP>::ti);

namespace mytorch {
namespace aten {
namespace {

using cpu::Bin;
using cpu::Tern;
using cpu::Un;

void register_kernels(torch::Library& m) {
  // the device runtime: allocation, views, resize, set_, scalars, fill (device/ops_minimal.cpp)
  m.impl("empty.memory_format", TORCH_FN(device::empty_memory_format));
  m.impl("empty_strided", TORCH_FN(device::empty_strided));
  m.impl("as_strided", TORCH_FN(device::as_strided));
  m.impl("view", TORCH_FN(device::view));
  m.impl("_reshape_alias", TORCH_FN(device::reshape_alias));
  m.impl("resize_", TORCH_FN(device::resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(device::set_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(device::set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(device::set_tensor));
  m.impl("set_", TORCH_FN(device::set_empty));
  m.impl("_local_scalar_dense", TORCH_FN(device::local_scalar_dense));
  m.impl("fill_.Scalar", TORCH_FN(device::fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(device::fill_tensor));
  m.impl("zero_", TORCH_FN(device::zero_));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(device::has_compatible_shallow_copy_type));
  // copies (device/copy.cpp)
  m.impl("_copy_from", TORCH_FN(device::copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(device::copy_from_and_resize));
  // random sampling (device/random.cpp)
  m.impl("normal_", TORCH_FN(device::normal_));
  m.impl("uniform_", TORCH_FN(device::uniform_));
  m.impl("bernoulli_.float", TORCH_FN(device::bernoulli_float_));
  m.impl("bernoulli_.Tensor", TORCH_FN(device::bernoulli_tensor_));
  m.impl("bernoulli", TORCH_FN(device::bernoulli));
  m.impl("random_", TORCH_FN(device::random_));
  m.impl("random_.from", TORCH_FN(device::random_from_));
  m.impl("random_.to", TORCH_FN(device::random_to_));
  m.impl("randperm.generator_out", TORCH_FN(device::randperm_out));

  // activation (activation.cpp)
  m.impl("gelu", &gelu);
  m.impl("gelu_", &gelu_);
  m.impl("gelu.out", &gelu_out);
  m.impl("gelu_backward", &gelu_backward);
  m.impl("gelu_backward.grad_input", &gelu_backward_out);
  m.impl("hardswish", &cpu::hardswish);
  m.impl("hardswish_", &hardswish_);
  m.impl("hardswish_backward", &cpu::hardswish_backward);
  m.impl("hardsigmoid", &cpu::hardsigmoid);
  m.impl("hardsigmoid_", &hardsigmoid_);
  m.impl("hardsigmoid_backward", &cpu::hardsigmoid_backward);

  // normalization (batchnorm.cpp, norm.cpp)
  m.impl("native_batch_norm", &native_batch_norm);
  m.impl("native_batch_norm_backward", &native_batch_norm_backward);
  m.impl("_native_batch_norm_legit", &native_batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", &native_batch_norm_legit_no_stats);
  m.impl("_batch_norm_with_update", &batch_norm_with_update);
  m.impl("batch_norm_backward", &batch_norm_backward);
  m.impl("native_layer_norm", &native_layer_norm);
  m.impl("native_layer_norm_backward", &native_layer_norm_backward);
  m.impl("_fused_rms_norm", &fused_rms_norm);
  m.impl("_fused_rms_norm_backward", &fused_rms_norm_backward);

  // softmax (softmax.cpp)
  m.impl("_softmax", &softmax<false>);
  m.impl("_softmax.out", &softmax_out<false>);
  m.impl("_log_softmax", &softmax<true>);
  m.impl("_log_softmax.out", &softmax_out<true>);
  m.impl("_softmax_backward_data", &softmax_backward<false>);
  m.impl("_softmax_backward_data.out", &softmax_backward_out<false>);
  m.impl("_log_softmax_backward_data", &softmax_backward<true>);
  m.impl("_log_softmax_backward_data.out", &softmax_backward_out<true>);

  // attention (attention.cpp): torch._fused_sdp_choice answers what SDPA itself picks
  m.impl("_fused_sdp_choice", TORCH_FN(sdpa_choose_backend));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(sdpa_fused_forward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(sdpa_fused_backward));

  // losses (loss.cpp)
  m.impl("nll_loss_forward", &nll_fwd);
  m.impl("nll_loss_forward.output", &nll_fwd_out);
  m.impl("nll_loss_backward", &nll_bwd);
  m.impl("nll_loss_backward.grad_input", &nll_bwd_out);
  m.impl("nll_loss2d_forward", &nll2d_fwd);
  m.impl("nll_loss2d_backward", &nll_bwd);
  m.impl("mse_loss", &mse);
  m.impl("mse_loss.out", &mse_out);
  m.impl("mse_loss_backward", &mse_bwd);
  m.impl("mse_loss_backward.grad_input", &mse_bwd_out);

  // dropout, embedding (dropout.cpp, embedding.cpp)
  m.impl("native_dropout", &native_dropout);
  m.impl("native_dropout_backward", &native_dropout_backward);
  m.impl("embedding", &embedding);
  m.impl("embedding_dense_backward", &embedding_dense_backward);

  // matrix products, convolution (gemm.cpp, conv.cpp)
  m.impl("mm", &cpu::mm);
  m.impl("mm.out", &cpu::mm_out);
  m.impl("bmm", &cpu::bmm);
  m.impl("bmm.out", &cpu::bmm_out);
  m.impl("addmm", &cpu::addmm);
  m.impl("addmm.out", &cpu::addmm_out);
  m.impl("addmm_", &addmm_);
  m.impl("baddbmm", &cpu::baddbmm);
  m.impl("baddbmm.out", &cpu::baddbmm_out);
  m.impl("baddbmm_", &baddbmm_);
  m.impl("convolution_overrideable", &convolution_overrideable);
  m.impl("convolution_backward_overrideable", &convolution_backward_overrideable);

  // pooling, upsampling (pool.cpp, upsample.cpp)
  m.impl("max_pool2d_with_indices", &cpu::max_pool2d);
  m.impl("max_pool2d_with_indices_backward", &max_pool2d_with_indices_backward);
  m.impl("avg_pool2d", &cpu::avg_pool2d);
  m.impl("avg_pool2d_backward", &cpu::avg_pool2d_backward);
  m.impl("_adaptive_avg_pool2d", &cpu::adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", &cpu::adaptive_avg_pool2d_backward);
  m.impl("upsample_nearest2d", &cpu::upsample_nearest2d);
  m.impl("upsample_nearest2d_backward", &upsample_nearest2d_backward);
  m.impl("upsample_bilinear2d", &cpu::upsample_bilinear2d);
  m.impl("upsample_bilinear2d_backward", &upsample_bilinear2d_backward);

  // reductions (reduce.cpp)
  m.impl("sum.dim_IntList", &sum_dim);
  m.impl("sum.IntList_out", &sum_out);
  m.impl("sum", &sum_all);
  m.impl("mean.dim", &mean_dim);
  m.impl("mean.out", &mean_out);
  m.impl("mean", &mean_all);
  m.impl("prod", &prod_all);
  m.impl("prod.dim_int", &prod_dim);
  m.impl("amax", &amax);
  m.impl("amax.out", &amax_out);
  m.impl("amin", &amin);
  m.impl("amin.out", &amin_out);
  m.impl("max", &max_all);
  m.impl("min", &min_all);
  m.impl("max.dim", &max_dim);
  m.impl("max.dim_max", &max_dim_out);
  m.impl("min.dim", &min_dim);
  m.impl("min.dim_min", &min_dim_out);
  m.impl("argmax", &argmax);
  m.impl("argmax.out", &argmax_out);
  m.impl("argmin", &argmin);
  m.impl("argmin.out", &argmin_out);
  m.impl("var.correction", &var);
  m.impl("var.correction_out", &var_out);
  m.impl("std.correction", &stdev);
  m.impl("std.correction_out", &std_out);
  m.impl("var_mean.correction", &var_mean);
  m.impl("std_mean.correction", &std_mean);
  m.impl("logsumexp", &cpu::logsumexp);
  m.impl("logsumexp.out", &logsumexp_out);
  m.impl("linalg_vector_norm", &vector_norm);
  m.impl("linalg_vector_norm.out", &vector_norm_out);

  // indexing (index.cpp)
  m.impl("index_select", &cpu::index_select);
  m.impl("index_select.out", &index_select_out);
  m.impl("gather", &gather);
  m.impl("gather.out", &gather_out);
  m.impl("scatter_add", &cpu::scatter_add);
  m.impl("scatter_add_", &cpu::scatter_add_);
  m.impl("scatter_add.out", &scatter_add_out);
  m.impl("index.Tensor", &index);
  m.impl("index.Tensor_out", &index_out);
  m.impl("_index_put_impl_", &index_put_impl_);
  m.impl("index_put_", &index_put_);
  m.impl("index_put", &index_put);
  m.impl("cat", &cat);
  m.impl("cat.out", &cat_out);
  m.impl("nonzero", &cpu::nonzero);
  m.impl("nonzero.out", &nonzero_out);

  // elementwise_binary (elementwise.cpp, elementwise.h)
  REG_ALPHA(m, add, Bin::Add)
  REG_ALPHA(m, sub, Bin::Sub)
  m.impl("rsub.Tensor", &rsub);
  m.impl("rsub.Scalar", &rsub_scalar);
  REG_BIN_OUT(m, mul, Bin::Mul, ".out")
  REG_BIN_OUT(m, div, Bin::Div, ".out")
  m.impl("div.Tensor_mode", &div_mode);
  m.impl("div_.Tensor_mode", &div_mode_);
  m.impl("div.out_mode", &div_mode_out);
  m.impl("div.Scalar_mode", &div_scalar_mode);
  m.impl("div_.Scalar_mode", &div_scalar_mode_);
  m.impl("div.Scalar_mode_out", &div_scalar_mode_out);
  m.impl("floor_divide", &B<Bin::DivFloor>::t);
  m.impl("floor_divide_.Tensor", &B<Bin::DivFloor>::ti);
  m.impl("floor_divide.out", &B<Bin::DivFloor>::to);
  m.impl("floor_divide.Scalar", &B<Bin::DivFloor>::s);
  m.impl("floor_divide_.Scalar", &B<Bin::DivFloor>::si);
  m.impl("maximum", &B<Bin::Maximum>::t);
  m.impl("maximum.out", &B<Bin::Maximum>::to);
  m.impl("minimum", &B<Bin::Minimum>::t);
  m.impl("minimum.out", &B<Bin::Minimum>::to);
  m.impl("pow.Tensor_Tensor", &B<Bin::Pow>::t);
  m.impl("pow_.Tensor", &B<Bin::Pow>::ti);
  m.impl("pow.Tensor_Tensor_out", &B<Bin::Pow>::to);
  m.impl("pow.Tensor_Scalar", &pow_tensor_scalar);
  m.impl("pow_.Scalar", &B<Bin::Pow>::si);
  m.impl("pow.Tensor_Scalar_out", &B<Bin::Pow>::so);
  m.impl("pow.Scalar", &pow_scalar);
  m.impl("pow.Scalar_out", &pow_scalar_out);
  REG_BIN(m, eq, Bin::Eq)
  REG_BIN(m, ne, Bin::Ne)
  REG_BIN(m, lt, Bin::Lt)
  REG_BIN(m, le, Bin::Le)
  REG_BIN(m, gt, Bin::Gt)
  REG_BIN(m, ge, Bin::Ge)
  REG_BIN_TENSORS(m, logical_and, Bin::LogicalAnd)
  REG_BIN_TENSORS(m, logical_or, Bin::LogicalOr)
  REG_GRAD(m, sigmoid_backward, Bin::SigmoidBwd)
  REG_GRAD(m, tanh_backward, Bin::TanhBwd)
  REG_GRAD(m, silu_backward, Bin::SiluBwd)
  m.impl("threshold_backward", &B<Bin::ThresholdBwd>::ta);
  m.impl("threshold_backward.grad_input", &B<Bin::ThresholdBwd>::tao);
  // elementwise_unary
  REG_UN(m, logical_not, Un::LogicalNot)
  REG_UN(m, neg, Un::Neg)
  REG_UN(m, abs, Un::Abs)
  REG_UN(m, exp, Un::Exp)
  REG_UN(m, log, Un::Log)
  REG_UN(m, sqrt, Un::Sqrt)
  REG_UN(m, rsqrt, Un::Rsqrt)
  REG_UN(m, tanh, Un::Tanh)
  REG_UN(m, sigmoid, Un::Sigmoid)
  REG_UN(m, silu, Un::Silu)
  REG_UN(m, reciprocal, Un::Reciprocal)
  REG_UN(m, sign, Un::Sign)
  m.impl("relu", &U<Un::Relu>::f);
  m.impl("relu_", &U<Un::Relu>::i);
  m.impl("clamp", &clamp);
  m.impl("clamp_", &clamp_);
  m.impl("clamp.out", &clamp_out);
  m.impl("clamp.Tensor", &clamp_tensor);
  m.impl("clamp_.Tensor", &clamp_tensor_);
  m.impl("clamp.Tensor_out", &clamp_tensor_out);
  m.impl("clamp_min", &clamp_min);
  m.impl("clamp_min_", &clamp_min_);
  m.impl("clamp_min.out", &clamp_min_out);
  m.impl("clamp_max", &clamp_max);
  m.impl("clamp_max_", &clamp_max_);
  m.impl("clamp_max.out", &clamp_max_out);
  m.impl("clamp_min.Tensor", &B<Bin::Maximum>::t);
  m.impl("clamp_min_.Tensor", &B<Bin::Maximum>::ti);
  m.impl("clamp_max.Tensor", &B<Bin::Minimum>::t);
  m.impl("clamp_max_.Tensor", &B<Bin::Minimum>::ti);
  // elementwise_ternary
  m.impl("where.self", &T3<Tern::Where>::t);
  m.impl("where.self_out", &T3<Tern::Where>::to);
  m.impl("masked_fill.Scalar", &masked_fill);
  m.impl("masked_fill.Tensor", &masked_fill_tensor);
  m.impl("masked_fill_.Scalar", &masked_fill_);
  m.impl("masked_fill_.Tensor", &masked_fill_tensor_);
  REG_T3(m, addcmul, Tern::Addcmul)
  REG_T3(m, addcdiv, Tern::Addcdiv)
  m.impl("lerp.Scalar", &B<Bin::Lerp>::ta);
  m.impl("lerp_.Scalar", &B<Bin::Lerp>::tai);
  m.impl("lerp.Scalar_out", &B<Bin::Lerp>::tao);
  m.impl("lerp.Tensor", &T3<Tern::LerpTensor>::t);
  m.impl("lerp_.Tensor", &T3<Tern::LerpTensor>::ti);
  m.impl("lerp.Tensor_out", &T3<Tern::LerpTensor>::to);

  // bitwise, any / all, cumsum, isin (logical.cpp)
  m.impl("bitwise_and.Tensor_out", &bitwise_out<Bit::And>);
  m.impl("bitwise_or.Tensor_out", &bitwise_out<Bit::Or>);
  m.impl("bitwise_xor.Tensor_out", &bitwise_out<Bit::Xor>);
  m.impl("bitwise_not.out", &bitwise_not_out);
  m.impl("any.all_out", &any_all_out<true>);
  m.impl("all.all_out", &any_all_out<false>);
  m.impl("any.out", &any_dim_out<true>);
  m.impl("all.out", &any_dim_out<false>);
  m.impl("any.dims_out", &any_dims_out<true>);
  m.impl("all.dims_out", &any_dims_out<false>);
  m.impl("cumsum.out", &cumsum_out);
  m.impl("isin.Tensor_Tensor_out", &isin_out);
  m.impl("isin.Tensor_Scalar_out", &isin_tensor_scalar_out);
  m.impl("isin.Scalar_Tensor_out", &isin_scalar_tensor_out);

  // positions and masks (transformer_support.cpp)
  m.impl("arange.start_out", &arange_out);
  m.impl("triu.out", &triu_out);
  m.impl("tril.out", &tril_out);
  m.impl("sin.out", &sincos_out<true>);
  m.impl("cos.out", &sincos_out<false>);

  // LSTM / GRU cells (rnn_cells.cpp)
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gru_cell_backward));

  // optimizers (optim.cpp): the fused steps, then the _foreach_ ops of foreach=True
  m.impl("_fused_sgd_", &fused_sgd);
  m.impl("_fused_sgd_.tensor_lr", &fused_sgd_t);
  m.impl("_fused_adam_", &fused_adam<false>);
  m.impl("_fused_adam_.tensor_lr", &fused_adam_t<false>);
  m.impl("_fused_adamw_", &fused_adam<true>);
  m.impl("_fused_adamw_.tensor_lr", &fused_adam_t<true>);
  REG_FB(m, add, Bin::Add, la)
  REG_FB_TENSOR(m, add, Bin::Add, ta)
  REG_FB(m, sub, Bin::Sub, la)
  REG_FB(m, mul, Bin::Mul, l)
  REG_FB_TENSOR(m, mul, Bin::Mul, t)
  REG_FB(m, div, Bin::Div, l)
  REG_FB_TENSOR(m, div, Bin::Div, t)
  REG_FB(m, maximum, Bin::Maximum, l)
  REG_FB(m, minimum, Bin::Minimum, l)
  REG_FT(m, addcmul, Tern::Addcmul)
  REG_FT(m, addcdiv, Tern::Addcdiv)
  m.impl("_foreach_lerp.Scalar", &FB<Bin::Lerp>::la);
  m.impl("_foreach_lerp_.Scalar", &FB<Bin::Lerp>::lai);
  m.impl("_foreach_lerp.List", &FT<Tern::LerpTensor>::l);
  m.impl("_foreach_lerp_.List", &FT<Tern::LerpTensor>::li);
  REG_FU(m, sqrt, Un::Sqrt)
  REG_FU(m, neg, Un::Neg)
  REG_FU(m, abs, Un::Abs)
  REG_FU(m, exp, Un::Exp)
  REG_FU(m, reciprocal, Un::Reciprocal)
  REG_FU(m, sign, Un::Sign)
  REG_FU(m, sigmoid, Un::Sigmoid)
  m.impl("_foreach_zero_", &foreach_zero_);
  m.impl("_foreach_copy_", &foreach_copy_);
  m.impl("_foreach_norm.Scalar", &foreach_norm);

  // quantize (quantized.cpp): from a dense tensor on the device
  m.impl("quantize_per_tensor", TORCH_FN(quantize_per_tensor));
  m.impl("quantize_per_tensor.tensor_qparams", TORCH_FN(quantize_per_tensor_qparams));
  m.impl("quantize_per_channel", TORCH_FN(quantize_per_channel));
  m.impl("quantize_per_tensor_dynamic", TORCH_FN(quantize_per_tensor_dynamic));
}

// quantized tensors (quantized.cpp)
void register_quantized(torch::Library& m) {
  m.impl("_empty_affine_quantized", TORCH_FN(empty_affine_quantized));
  m.impl("empty_quantized", TORCH_FN(empty_quantized));
  m.impl("empty.memory_format", TORCH_FN(empty_quantized_memory_format));
  m.impl("dequantize.self", TORCH_FN(dequantize));
  m.impl("int_repr", TORCH_FN(int_repr));
  m.impl("q_scale", TORCH_FN(q_scale));
  m.impl("q_zero_point", TORCH_FN(q_zero_point));
  m.impl("qscheme", TORCH_FN(qscheme));
  m.impl("copy_", TORCH_FN(copy_quantized_));
}

}  // namespace
}  // namespace aten
}  // namespace mytorch

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { mytorch::aten::register_kernels(m); }
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) { mytorch::aten::register_quantized(m); }
