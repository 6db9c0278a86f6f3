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
  // attn_mask: optional bool (True = attend) or additive float mask, broadcastable to
  // (batch, heads_q, seqlen_q, seqlen_k); not with cu_seqlens. It gets no gradient.
  // deterministic (forward): the backward this forward's autograd runs must be deterministic.
  m.def(
      "flash_attn(Tensor q, Tensor k, Tensor v, float dropout_p=0.0, float? softmax_scale=None, "
      "bool causal=False, int window_left=-1, int window_right=-1, float softcap=0.0, "
      "Tensor? alibi_slopes=None, Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, "
      "int max_seqlen_q=0, int max_seqlen_k=0, int seed=0, Tensor? attn_mask=None, "
      "bool deterministic=False) "
      "-> (Tensor out, Tensor lse)");
  m.def(
      "flash_attn_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
      "float dropout_p, float softmax_scale, bool causal, int window_left, int window_right, "
      "float softcap, Tensor? alibi_slopes, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, "
      "int max_seqlen_q, int max_seqlen_k, int seed, bool deterministic, Tensor? attn_mask=None) "
      "-> (Tensor dq, Tensor dk, Tensor dv)");
}
