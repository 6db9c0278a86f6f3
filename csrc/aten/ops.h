// The mytorch device's ATen kernels: the entry points of csrc/aten/<family>.cpp, one section
// per family, registered for PrivateUse1 in aten/register.cpp. Each takes an ATen overload's
// arguments and runs a kernel of kernels/cpu; a kernel whose signature is already ATen's is
// registered straight from its family header. The elementwise and _foreach_ overloads,
// instantiated per op, are the templates of aten/elementwise.h.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>
#include <vector>

namespace mytorch {
namespace aten {

using at::Tensor;
using OptTensor = std::optional<at::Tensor>;
using OptScalar = std::optional<at::Scalar>;
using OptStr = std::optional<c10::string_view>;
using OptDims = at::OptionalIntArrayRef;
using OptType = std::optional<at::ScalarType>;
using Tensors3 = std::tuple<Tensor, Tensor, Tensor>;

// ---- activation: gelu, hardswish, hardsigmoid (activation.cpp) ----
Tensor gelu(const Tensor& x, c10::string_view approximate);
Tensor& gelu_(Tensor& x, c10::string_view approximate);
Tensor& gelu_out(const Tensor& x, c10::string_view approximate, Tensor& out);
Tensor gelu_backward(const Tensor& grad, const Tensor& x, c10::string_view approximate);
Tensor& gelu_backward_out(const Tensor& grad, const Tensor& x, c10::string_view approximate, Tensor& grad_input);
Tensor& hardswish_(Tensor& self);
Tensor& hardsigmoid_(Tensor& self);

// ---- batch norm (batchnorm.cpp) ----
Tensors3 native_batch_norm(const Tensor& x, const OptTensor& w, const OptTensor& b, const OptTensor& rm,
                           const OptTensor& rv, bool training, double momentum, double eps);
Tensors3 native_batch_norm_backward(const Tensor& grad, const Tensor& x, const OptTensor& w, const OptTensor& rm,
                                    const OptTensor& rv, const OptTensor& sm, const OptTensor& si, bool training,
                                    double eps, std::array<bool, 3> mask);
Tensors3 native_batch_norm_legit(const Tensor& x, const OptTensor& w, const OptTensor& b, Tensor& rm, Tensor& rv,
                                 bool training, double momentum, double eps);
Tensors3 native_batch_norm_legit_no_stats(const Tensor& x, const OptTensor& w, const OptTensor& b, bool training,
                                          double momentum, double eps);
std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_with_update(const Tensor& x, const OptTensor& w,
                                                                  const OptTensor& b, Tensor& rm, Tensor& rv,
                                                                  double momentum, double eps);
Tensors3 batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& w, const OptTensor& rm,
                             const OptTensor& rv, const OptTensor& sm, const OptTensor& si, bool update, double eps,
                             std::array<bool, 3> mask, const Tensor& reserve);

// ---- layer norm, RMS norm (norm.cpp) ----
Tensors3 native_layer_norm(const Tensor& input, c10::SymIntArrayRef normalized_shape, const OptTensor& weight,
                           const OptTensor& bias, double eps);
Tensors3 native_layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                    c10::SymIntArrayRef normalized_shape, const Tensor& mean, const Tensor& rstd,
                                    const OptTensor& weight, const OptTensor& bias, std::array<bool, 3> mask);
std::tuple<Tensor, Tensor> fused_rms_norm(const Tensor& input, c10::IntArrayRef normalized_shape,
                                          const OptTensor& weight, std::optional<double> eps);
std::tuple<Tensor, Tensor> fused_rms_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                   c10::IntArrayRef normalized_shape, const Tensor& rstd,
                                                   const OptTensor& weight, std::array<bool, 2> mask);

// ---- softmax, log_softmax (softmax.cpp); LOG picks log_softmax ----
template <bool LOG>
Tensor softmax(const Tensor& x, int64_t dim, bool half_to_float);
template <bool LOG>
Tensor& softmax_out(const Tensor& x, int64_t dim, bool half_to_float, Tensor& out);
template <bool LOG>
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, at::ScalarType input_dtype);
template <bool LOG>
Tensor& softmax_backward_out(const Tensor& grad, const Tensor& y, int64_t dim, at::ScalarType input_dtype,
                             Tensor& out);

// ---- losses (loss.cpp) ----
std::tuple<Tensor, Tensor> nll_fwd(const Tensor& self, const Tensor& target, const OptTensor& weight,
                                   int64_t reduction, int64_t ignore_index);
std::tuple<Tensor&, Tensor&> nll_fwd_out(const Tensor& self, const Tensor& target, const OptTensor& weight,
                                         int64_t reduction, int64_t ignore_index, Tensor& output,
                                         Tensor& total_weight);
std::tuple<Tensor, Tensor> nll2d_fwd(const Tensor& self, const Tensor& target, const OptTensor& weight,
                                     int64_t reduction, int64_t ignore_index);
Tensor nll_bwd(const Tensor& grad_output, const Tensor& self, const Tensor& target, const OptTensor& weight,
               int64_t reduction, int64_t ignore_index, const Tensor& total_weight);
Tensor& nll_bwd_out(const Tensor& grad_output, const Tensor& self, const Tensor& target, const OptTensor& weight,
                    int64_t reduction, int64_t ignore_index, const Tensor& total_weight, Tensor& grad_input);
Tensor mse(const Tensor& self, const Tensor& target, int64_t reduction);
Tensor& mse_out(const Tensor& self, const Tensor& target, int64_t reduction, Tensor& out);
Tensor mse_bwd(const Tensor& g, const Tensor& self, const Tensor& target, int64_t reduction);
Tensor& mse_bwd_out(const Tensor& g, const Tensor& self, const Tensor& target, int64_t reduction,
                    Tensor& grad_input);

// ---- dropout, embedding (dropout.cpp, embedding.cpp) ----
std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, std::optional<bool> train);
Tensor native_dropout_backward(const Tensor& grad, const Tensor& mask, double scale);
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx, bool scale_grad_by_freq,
                 bool sparse);
Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx, bool scale_grad_by_freq);

// ---- matrix products, convolution (gemm.cpp, conv.cpp) ----
Tensor& addmm_(Tensor& self, const Tensor& a, const Tensor& b, const at::Scalar& beta, const at::Scalar& alpha);
Tensor& baddbmm_(Tensor& self, const Tensor& a, const Tensor& b, const at::Scalar& beta, const at::Scalar& alpha);
Tensor convolution_overrideable(const Tensor& input, const Tensor& weight, const OptTensor& bias,
                                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                bool transposed, at::IntArrayRef output_padding, int64_t groups);
Tensors3 convolution_backward_overrideable(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                           at::IntArrayRef stride, at::IntArrayRef padding,
                                           at::IntArrayRef dilation, bool transposed,
                                           at::IntArrayRef output_padding, int64_t groups,
                                           std::array<bool, 3> mask);

// ---- pooling, upsampling (pool.cpp, upsample.cpp) ----
Tensor max_pool2d_with_indices_backward(const Tensor& grad, const Tensor& self, at::IntArrayRef kernel_size,
                                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                        bool ceil_mode, const Tensor& indices);
Tensor upsample_nearest2d_backward(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                                   std::optional<double> scale_h, std::optional<double> scale_w);
Tensor upsample_bilinear2d_backward(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                                    bool align_corners, std::optional<double> scale_h,
                                    std::optional<double> scale_w);

// ---- reductions (reduce.cpp) ----
Tensor sum_dim(const Tensor& x, OptDims dim, bool keepdim, OptType dt);
Tensor& sum_out(const Tensor& x, OptDims dim, bool keepdim, OptType dt, Tensor& out);
Tensor sum_all(const Tensor& x, OptType dt);
Tensor mean_dim(const Tensor& x, OptDims dim, bool keepdim, OptType dt);
Tensor& mean_out(const Tensor& x, OptDims dim, bool keepdim, OptType dt, Tensor& out);
Tensor mean_all(const Tensor& x, OptType dt);
Tensor prod_all(const Tensor& x, OptType dt);
Tensor prod_dim(const Tensor& x, int64_t dim, bool keepdim, OptType dt);
Tensor amax(const Tensor& x, at::IntArrayRef dim, bool keepdim);
Tensor& amax_out(const Tensor& x, at::IntArrayRef dim, bool keepdim, Tensor& out);
Tensor amin(const Tensor& x, at::IntArrayRef dim, bool keepdim);
Tensor& amin_out(const Tensor& x, at::IntArrayRef dim, bool keepdim, Tensor& out);
Tensor max_all(const Tensor& x);
Tensor min_all(const Tensor& x);
std::tuple<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim);
std::tuple<Tensor, Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim);
std::tuple<Tensor&, Tensor&> max_dim_out(const Tensor& x, int64_t dim, bool keepdim, Tensor& v, Tensor& i);
std::tuple<Tensor&, Tensor&> min_dim_out(const Tensor& x, int64_t dim, bool keepdim, Tensor& v, Tensor& i);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim);
Tensor& argmax_out(const Tensor& x, std::optional<int64_t> dim, bool keepdim, Tensor& out);
Tensor& argmin_out(const Tensor& x, std::optional<int64_t> dim, bool keepdim, Tensor& out);
Tensor var(const Tensor& x, OptDims dim, const OptScalar& correction, bool keepdim);
Tensor stdev(const Tensor& x, OptDims dim, const OptScalar& correction, bool keepdim);
Tensor& var_out(const Tensor& x, OptDims dim, const OptScalar& correction, bool keepdim, Tensor& out);
Tensor& std_out(const Tensor& x, OptDims dim, const OptScalar& correction, bool keepdim, Tensor& out);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, OptDims dim, const OptScalar& correction, bool keepdim);
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, OptDims dim, const OptScalar& correction, bool keepdim);
Tensor& logsumexp_out(const Tensor& x, at::IntArrayRef dim, bool keepdim, Tensor& out);
Tensor vector_norm(const Tensor& x, const at::Scalar& ord, OptDims dim, bool keepdim, OptType dt);
Tensor& vector_norm_out(const Tensor& x, const at::Scalar& ord, OptDims dim, bool keepdim, OptType dt,
                        Tensor& out);

// ---- indexing (index.cpp) ----
using Indices = c10::List<std::optional<Tensor>>;
Tensor& index_select_out(const Tensor& x, int64_t dim, const Tensor& idx, Tensor& out);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx, bool sparse_grad);
Tensor& gather_out(const Tensor& x, int64_t dim, const Tensor& idx, bool sparse_grad, Tensor& out);
Tensor& scatter_add_out(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src, Tensor& out);
Tensor index(const Tensor& x, const Indices& ind);
Tensor& index_out(const Tensor& x, const Indices& ind, Tensor& out);
Tensor& index_put_impl_(Tensor& x, const Indices& ind, const Tensor& v, bool accumulate, bool unsafe);
Tensor& index_put_(Tensor& x, const Indices& ind, const Tensor& v, bool accumulate);
Tensor index_put(const Tensor& x, const Indices& ind, const Tensor& v, bool accumulate);
Tensor cat(const at::ITensorListRef& ts, int64_t dim);
Tensor& cat_out(const at::ITensorListRef& ts, int64_t dim, Tensor& out);
Tensor& nonzero_out(const Tensor& x, Tensor& out);

// ---- elementwise: the overloads beside elementwise.h's templates (elementwise.cpp) ----
Tensor div_mode(const Tensor& a, const Tensor& b, OptStr mode);
Tensor& div_mode_(Tensor& a, const Tensor& b, OptStr mode);
Tensor& div_mode_out(const Tensor& a, const Tensor& b, OptStr mode, Tensor& out);
Tensor div_scalar_mode(const Tensor& a, const at::Scalar& b, OptStr mode);
Tensor& div_scalar_mode_(Tensor& a, const at::Scalar& b, OptStr mode);
Tensor& div_scalar_mode_out(const Tensor& a, const at::Scalar& b, OptStr mode, Tensor& out);
Tensor rsub(const Tensor& a, const Tensor& b, const at::Scalar& alpha);
Tensor rsub_scalar(const Tensor& a, const at::Scalar& b, const at::Scalar& alpha);
Tensor pow_tensor_scalar(const Tensor& a, const at::Scalar& e);
Tensor pow_scalar(const at::Scalar& s, const Tensor& e);
Tensor& pow_scalar_out(const at::Scalar& s, const Tensor& e, Tensor& out);
Tensor clamp(const Tensor& x, const OptScalar& lo, const OptScalar& hi);
Tensor& clamp_(Tensor& x, const OptScalar& lo, const OptScalar& hi);
Tensor& clamp_out(const Tensor& x, const OptScalar& lo, const OptScalar& hi, Tensor& out);
Tensor clamp_min(const Tensor& x, const at::Scalar& lo);
Tensor& clamp_min_(Tensor& x, const at::Scalar& lo);
Tensor& clamp_min_out(const Tensor& x, const at::Scalar& lo, Tensor& out);
Tensor clamp_max(const Tensor& x, const at::Scalar& hi);
Tensor& clamp_max_(Tensor& x, const at::Scalar& hi);
Tensor& clamp_max_out(const Tensor& x, const at::Scalar& hi, Tensor& out);
Tensor clamp_tensor(const Tensor& x, const OptTensor& lo, const OptTensor& hi);
Tensor& clamp_tensor_(Tensor& x, const OptTensor& lo, const OptTensor& hi);
Tensor& clamp_tensor_out(const Tensor& x, const OptTensor& lo, const OptTensor& hi, Tensor& out);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const at::Scalar& v);
Tensor& masked_fill_tensor_(Tensor& x, const Tensor& mask, const Tensor& v);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const at::Scalar& v);
Tensor masked_fill_tensor(const Tensor& x, const Tensor& mask, const Tensor& v);

// ---- bitwise, any / all, cumsum, isin (logical.cpp) ----
enum class Bit { And, Or, Xor };
template <Bit kOp>
Tensor& bitwise_out(const Tensor& self, const Tensor& other, Tensor& out);
Tensor& bitwise_not_out(const Tensor& self, Tensor& out);
template <bool kAny>
Tensor& any_all_out(const Tensor& self, Tensor& out);
template <bool kAny>
Tensor& any_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out);
template <bool kAny>
Tensor& any_dims_out(const Tensor& self, OptDims dims, bool keepdim, Tensor& out);
Tensor& cumsum_out(const Tensor& self, int64_t dim, OptType dtype, Tensor& out);
Tensor& isin_out(const Tensor& elements, const Tensor& test_elements, bool assume_unique, bool invert, Tensor& out);
Tensor& isin_tensor_scalar_out(const Tensor& elements, const at::Scalar& test_element, bool assume_unique,
                               bool invert, Tensor& out);
Tensor& isin_scalar_tensor_out(const at::Scalar& element, const Tensor& test_elements, bool assume_unique,
                               bool invert, Tensor& out);

// ---- positions and masks: arange, triu / tril, sin / cos (transformer_support.cpp) ----
Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, Tensor& out);
Tensor& triu_out(const Tensor& self, int64_t diagonal, Tensor& out);
Tensor& tril_out(const Tensor& self, int64_t diagonal, Tensor& out);
template <bool kSin>
Tensor& sincos_out(const Tensor& self, Tensor& out);

// ---- scaled_dot_product_attention (attention.cpp) ----
int64_t sdpa_choose_backend(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& attn_mask,
                            double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa);
std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> sdpa_fused_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, const OptTensor& attn_bias, double dropout_p,
    bool is_causal, bool return_debug_mask, std::optional<double> scale);
std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_fused_backward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const Tensor& out, const Tensor& logsumexp, const Tensor& cum_seq_q,
    const Tensor& cum_seq_k, int64_t max_q, int64_t max_k, double dropout_p, bool is_causal,
    const Tensor& philox_seed, const Tensor& philox_offset, std::optional<double> scale);

// ---- LSTM / GRU cells (rnn_cells.cpp) ----
Tensors3 lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx,
                   const OptTensor& input_bias, const OptTensor& hidden_bias);
Tensors3 lstm_cell_backward(const OptTensor& grad_hy, const OptTensor& grad_cy, const Tensor& cx, const Tensor& cy,
                            const Tensor& workspace, bool has_bias);
std::tuple<Tensor, Tensor> gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                    const OptTensor& input_bias, const OptTensor& hidden_bias);
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor& grad_hy, const Tensor& workspace,
                                                                     bool has_bias);

// ---- optimizers: fused steps and the _foreach_ ops beside elementwise.h's (optim.cpp) ----
void fused_sgd(at::TensorList p, at::TensorList g, at::TensorList buf, double wd, double mom, double lr,
               double damp, bool nesterov, bool maximize, bool first, const OptTensor& gs, const OptTensor& fi);
void fused_sgd_t(at::TensorList p, at::TensorList g, at::TensorList buf, double wd, double mom, const Tensor& lr,
                 double damp, bool nesterov, bool maximize, bool first, const OptTensor& gs, const OptTensor& fi);
// W: AdamW (decoupled weight decay); _t: lr as a tensor
template <bool W>
void fused_adam(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, at::TensorList vmax,
                at::TensorList steps, double lr, double b1, double b2, double wd, double eps, bool ams,
                bool maximize, const OptTensor& gs, const OptTensor& fi);
template <bool W>
void fused_adam_t(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, at::TensorList vmax,
                  at::TensorList steps, const Tensor& lr, double b1, double b2, double wd, double eps, bool ams,
                  bool maximize, const OptTensor& gs, const OptTensor& fi);
void foreach_zero_(at::TensorList a);
void foreach_copy_(at::TensorList a, at::TensorList b, bool non_blocking);
std::vector<Tensor> foreach_norm(at::TensorList a, const at::Scalar& ord, OptType dt);

// ---- quantized tensors (quantized.cpp) ----
Tensor quantize_per_tensor(const Tensor& self, double scale, int64_t zero_point, at::ScalarType dtype);
Tensor quantize_per_tensor_qparams(const Tensor& self, const Tensor& scale, const Tensor& zero_point,
                                   at::ScalarType dtype);
Tensor quantize_per_channel(const Tensor& self, const Tensor& scales, const Tensor& zero_points, int64_t axis,
                            at::ScalarType dtype);
Tensor quantize_per_tensor_dynamic(const Tensor& self, at::ScalarType dtype, bool reduce_range);
Tensor empty_affine_quantized(at::IntArrayRef size, OptType dtype, std::optional<at::Layout> layout,
                              std::optional<at::Device> device, std::optional<bool> pin_memory, double scale,
                              int64_t zero_point, std::optional<at::MemoryFormat> memory_format);
Tensor empty_quantized(at::IntArrayRef size, const Tensor& qtensor, OptType dtype, std::optional<at::Layout> layout,
                       std::optional<at::Device> device, std::optional<bool> pin_memory,
                       std::optional<at::MemoryFormat> memory_format);
Tensor empty_quantized_memory_format(at::IntArrayRef size, OptType dtype, std::optional<at::Layout> layout,
                                     std::optional<at::Device> device, std::optional<bool> pin_memory,
                                     std::optional<at::MemoryFormat> memory_format);
Tensor dequantize(const Tensor& self);
Tensor int_repr(const Tensor& self);
double q_scale(const Tensor& self);
int64_t q_zero_point(const Tensor& self);
at::QScheme qscheme(const Tensor& self);
Tensor& copy_quantized_(Tensor& self, const Tensor& src, bool non_blocking);

}  // namespace aten
}  // namespace mytorch
