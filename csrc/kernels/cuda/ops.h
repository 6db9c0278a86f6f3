// The entry points of the CUDA kernels of attention, rope, losses and
// the elementwise ops; the other families declare theirs in kernels/<family>.h. Registrations
// in register.cpp. Each family's .cu includes this header, so declaration and definition are
// checked against each other; the header stays light (core tensor headers only) because every
// CUDA translation unit parses it.
#pragma once
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/OptionalArrayRef.h>
#include <c10/util/string_view.h>

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>

namespace mytorch {
namespace cuda {

using Tensor = at::Tensor;
using OptionalTensor = std::optional<at::Tensor>;
using Tensor2 = std::tuple<at::Tensor, at::Tensor>;
using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// ---- attention (attention.cpp: the Triton kernels launched from C++) ----
Tensor2 flash_attn(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p,
                   std::optional<double> softmax_scale, bool causal, int64_t window_left,
                   int64_t window_right, double softcap, const OptionalTensor& alibi_slopes,
                   const OptionalTensor& cu_seqlens_q, const OptionalTensor& cu_seqlens_k,
                   int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t seed,
                   const OptionalTensor& attn_mask, bool deterministic,
                   const OptionalTensor& seed_tensor);
Tensor3 flash_attn_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse, double dropout_p,
                            double softmax_scale, bool causal, int64_t window_left,
                            int64_t window_right, double softcap, const OptionalTensor& alibi_slopes,
                            const OptionalTensor& cu_seqlens_q, const OptionalTensor& cu_seqlens_k,
                            int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t seed,
                            bool deterministic, const OptionalTensor& attn_mask,
                            const OptionalTensor& seed_tensor);

// ---- rope (rope.cu) ----
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved);
void rope_(Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved);
Tensor rope_backward(const Tensor& grad, const Tensor& cos, const Tensor& sin, bool interleaved);

// ---- loss (loss.cu, loss_fused.cu, loss_one_pass.cu, loss_stream.cu) ----
Tensor2 nll_loss(const Tensor& input, const Tensor& target, const OptionalTensor& weight, int64_t reduction,
                 int64_t ignore_index);
Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& input, const Tensor& target,
                         const OptionalTensor& weight, int64_t reduction, int64_t ignore_index,
                         const Tensor& total_weight);
Tensor cross_entropy(const Tensor& input, const Tensor& target, const OptionalTensor& weight, int64_t reduction,
                     int64_t ignore_index, double label_smoothing);
Tensor cross_entropy_backward(const Tensor& grad_output, const Tensor& input, const Tensor& target,
                              const OptionalTensor& weight, int64_t reduction, int64_t ignore_index,
                              double label_smoothing);
Tensor mse_loss(const Tensor& input, const Tensor& target, int64_t reduction);
Tensor mse_loss_backward(const Tensor& grad_output, const Tensor& input, const Tensor& target, int64_t reduction);
Tensor2 fused_cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                            double label_smoothing, c10::string_view reduction);
Tensor fused_cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target,
                                    const Tensor& lse, int64_t ignore_index, double label_smoothing,
                                    c10::string_view reduction);
Tensor2 fused_cross_entropy_grad(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                 double label_smoothing, c10::string_view reduction,
                                 const c10::optional<Tensor>& divisor);
Tensor3 fused_linear_cross_entropy(const Tensor& input, const Tensor& weight, const Tensor& target,
                                   int64_t ignore_index, double label_smoothing, c10::string_view reduction,
                                   int64_t chunk_size, const c10::optional<Tensor>& divisor);

// ---- elementwise_{unary,binary,ternary} (elementwise_*.cu) ----
void scale_(const Tensor& self, const Tensor& scale);  // elementwise_binary_scale.cu

namespace ew {

// binary (elementwise_binary.cu, elementwise_binary_compare.cu)
Tensor add(const Tensor& a, const Tensor& b, const at::Scalar& alpha);
Tensor sub(const Tensor& a, const Tensor& b, const at::Scalar& alpha);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b, std::optional<c10::string_view> mode);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor sigmoid_backward(const Tensor& a, const Tensor& b);
Tensor tanh_backward(const Tensor& a, const Tensor& b);
Tensor silu_backward(const Tensor& a, const Tensor& b);
Tensor threshold_backward(const Tensor& g, const Tensor& x, const at::Scalar& thr);
Tensor clamp_tensor(const Tensor& x, const OptionalTensor& lo, const OptionalTensor& hi);

// unary (elementwise_unary.cu)
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor clamp(const Tensor& x, const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi);

// ternary (elementwise_ternary.cu)
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b);
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, const at::Scalar& v);
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, const at::Scalar& v);
Tensor lerp(const Tensor& x, const Tensor& end, const Tensor& w);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const at::Scalar& value);

// cast (elementwise_unary_cast.cu)
Tensor cast(const Tensor& x, at::ScalarType dtype);

}  // namespace ew
}  // namespace cuda
}  // namespace mytorch
