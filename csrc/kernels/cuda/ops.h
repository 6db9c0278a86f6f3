// The entry points of the CUDA kernels of attention; the other families declare theirs in
// kernels/<family>.h. Registrations in register.cpp. Each family's .cu includes this header, so
// declaration and definition are checked against each other; the header stays light (core
// tensor headers only) because every CUDA translation unit parses it.
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

// ---- varlen value checks (attention_checks.cu): cu_seqlens checked on the stream ----
// cu_q, cu_k: 1-D int32 offsets of one length (their shapes already checked). A bad value
// prints what check_cu in kernels/attention_checks.h would raise, then asserts on the device.
void check_cu_seqlens_on_device(const char* op, const Tensor& cu_q, const Tensor& cu_k, int64_t total_q,
                                int64_t total_k, int64_t max_seqlen_q, int64_t max_seqlen_k);

}  // namespace cuda
}  // namespace mytorch
