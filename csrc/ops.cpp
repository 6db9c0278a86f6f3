// Every mytorch:: schema, in one place. Kernels register per backend with
// TORCH_LIBRARY_IMPL(mytorch, <Key>, m) next to their glue code; the Python side
// (mytorch_ext/ops/) adds fake kernels and autograd.
#include <torch/library.h>

TORCH_LIBRARY(mytorch, m) {
  // ---- activations (kernels/cpu/activation.cpp, kernels/cuda/activation.cu) ----
  // approximate: "none" (erf) or "tanh"
  m.def("gelu(Tensor x, str approximate='none') -> Tensor");
  m.def("gelu_backward(Tensor grad, Tensor x, str approximate='none') -> Tensor");

  // ---- attention (kernels/cpu/attention.cpp, mytorch_ext/triton/) ----
  // Layout (batch, seqlen, heads, head_dim); with cu_seqlens_q/k, (total_tokens, heads, head_dim).
  // lse is float32, (batch, heads_q, seqlen_q), or (heads_q, total_q) for varlen.
  // window_left/right < 0 means unbounded; causal is bottom-right aligned.
  // seed: dropout seed (the Python API draws it from the device generator).
  m.def(
      "flash_attn(Tensor q, Tensor k, Tensor v, float dropout_p=0.0, float? softmax_scale=None, "
      "bool causal=False, int window_left=-1, int window_right=-1, float softcap=0.0, "
      "Tensor? alibi_slopes=None, Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, "
      "int max_seqlen_q=0, int max_seqlen_k=0, int seed=0) -> (Tensor out, Tensor lse)");
  m.def(
      "flash_attn_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
      "float dropout_p, float softmax_scale, bool causal, int window_left, int window_right, "
      "float softcap, Tensor? alibi_slopes, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, "
      "int max_seqlen_q, int max_seqlen_k, int seed, bool deterministic) "
      "-> (Tensor dq, Tensor dk, Tensor dv)");

  // ---- gemm (kernels/cpu/gemm.cpp) ----
  m.def("mm(Tensor self, Tensor mat2) -> Tensor");
  m.def("bmm(Tensor self, Tensor mat2) -> Tensor");
  m.def("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");

  // ---- softmax (kernels/cpu/softmax.cpp) ----
  m.def("softmax(Tensor self, int dim) -> Tensor");
  m.def("log_softmax(Tensor self, int dim) -> Tensor");
  m.def("softmax_backward(Tensor grad_output, Tensor output, int dim) -> Tensor");
  m.def("log_softmax_backward(Tensor grad_output, Tensor output, int dim) -> Tensor");

  // ---- norm (kernels/cpu/norm.cpp) ----
  // mean/rstd: shape input.shape[:axis] + [1]*len(normalized_shape); layer_norm keeps
  // input's dtype for them, rms_norm's rstd is float32 for bf16/fp16 (as aten).
  m.def("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05) -> (Tensor out, Tensor mean, Tensor rstd)");
  m.def("layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, "
        "Tensor rstd, Tensor? weight) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)");
  m.def("rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) "
        "-> (Tensor out, Tensor rstd)");
  m.def("rms_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor rstd, "
        "Tensor? weight) -> (Tensor grad_input, Tensor grad_weight)");
}
