// The entry points of the CUDA kernels of attention and losses; the other families declare
// theirs in kernels/<family>.h. Registrations in register.cpp. Each family's .cu includes this
// header, so declaration and definition are checked against each other; the header stays light
// (core tensor headers only) because every CUDA translation unit parses it.
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

}  // namespace cuda
}  // namespace mytorch
