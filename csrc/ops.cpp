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

  // ---- elementwise (kernels/cpu/elementwise_*.cpp, aten/elementwise.cpp) ----
  // Broadcasting and type promotion as ATen; results are contiguous.
  m.def("add(Tensor a, Tensor b, Scalar alpha=1) -> Tensor");
  m.def("sub(Tensor a, Tensor b, Scalar alpha=1) -> Tensor");
  m.def("mul(Tensor a, Tensor b) -> Tensor");
  m.def("div(Tensor a, Tensor b, str? rounding_mode=None) -> Tensor");
  m.def("maximum(Tensor a, Tensor b) -> Tensor");
  m.def("minimum(Tensor a, Tensor b) -> Tensor");
  m.def("pow(Tensor a, Tensor b) -> Tensor");
  m.def("eq(Tensor a, Tensor b) -> Tensor");
  m.def("ne(Tensor a, Tensor b) -> Tensor");
  m.def("lt(Tensor a, Tensor b) -> Tensor");
  m.def("le(Tensor a, Tensor b) -> Tensor");
  m.def("gt(Tensor a, Tensor b) -> Tensor");
  m.def("ge(Tensor a, Tensor b) -> Tensor");
  m.def("where(Tensor condition, Tensor a, Tensor b) -> Tensor");
  m.def("neg(Tensor x) -> Tensor");
  m.def("abs(Tensor x) -> Tensor");
  m.def("exp(Tensor x) -> Tensor");
  m.def("log(Tensor x) -> Tensor");
  m.def("sqrt(Tensor x) -> Tensor");
  m.def("rsqrt(Tensor x) -> Tensor");
  m.def("tanh(Tensor x) -> Tensor");
  m.def("sigmoid(Tensor x) -> Tensor");
  m.def("relu(Tensor x) -> Tensor");
  m.def("silu(Tensor x) -> Tensor");
  m.def("reciprocal(Tensor x) -> Tensor");
  m.def("sigmoid_backward(Tensor grad, Tensor y) -> Tensor");
  m.def("tanh_backward(Tensor grad, Tensor y) -> Tensor");
  m.def("silu_backward(Tensor grad, Tensor x) -> Tensor");
  m.def("threshold_backward(Tensor grad, Tensor x, Scalar threshold) -> Tensor");
  m.def("clamp(Tensor x, Scalar? min=None, Scalar? max=None) -> Tensor");
  m.def("clamp_tensor(Tensor x, Tensor? min=None, Tensor? max=None) -> Tensor");
  m.def("masked_fill(Tensor x, Tensor mask, Scalar value) -> Tensor");
  m.def("addcmul(Tensor x, Tensor t1, Tensor t2, Scalar value=1) -> Tensor");
  m.def("addcdiv(Tensor x, Tensor t1, Tensor t2, Scalar value=1) -> Tensor");
  m.def("lerp(Tensor x, Tensor end, Tensor weight) -> Tensor");
  m.def("cast(Tensor x, ScalarType dtype) -> Tensor");

  // ---- reductions (kernels/cpu/reduce.cpp, aten/reduce.cpp) ----
  // dim=None or []: every dim. Integer sum/prod give int64.
  m.def("sum(Tensor x, int[]? dim=None, bool keepdim=False, ScalarType? dtype=None) -> Tensor");
  m.def("mean(Tensor x, int[]? dim=None, bool keepdim=False, ScalarType? dtype=None) -> Tensor");
  m.def("prod(Tensor x, int[]? dim=None, bool keepdim=False) -> Tensor");
  m.def("amax(Tensor x, int[] dim=[], bool keepdim=False) -> Tensor");
  m.def("amin(Tensor x, int[] dim=[], bool keepdim=False) -> Tensor");
  m.def("max_dim(Tensor x, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
  m.def("min_dim(Tensor x, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
  m.def("argmax(Tensor x, int? dim=None, bool keepdim=False) -> Tensor");
  m.def("argmin(Tensor x, int? dim=None, bool keepdim=False) -> Tensor");
  m.def("var(Tensor x, int[]? dim=None, float correction=1, bool keepdim=False) -> Tensor");
  m.def("std(Tensor x, int[]? dim=None, float correction=1, bool keepdim=False) -> Tensor");
  m.def("logsumexp(Tensor x, int[] dim, bool keepdim=False) -> Tensor");

  // ---- indexing (kernels/cpu/index.cpp, aten/index.cpp) ----
  // index / index_put: exactly one index tensor (int64, int32 or a bool mask), the others None.
  m.def("index_select(Tensor x, int dim, Tensor index) -> Tensor");
  m.def("gather(Tensor x, int dim, Tensor index) -> Tensor");
  m.def("scatter_add(Tensor x, int dim, Tensor index, Tensor src) -> Tensor");
  m.def("index(Tensor x, Tensor?[] indices) -> Tensor");
  m.def("index_put(Tensor x, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor");
  m.def("cat(Tensor[] tensors, int dim=0) -> Tensor");
  m.def("nonzero(Tensor x) -> Tensor");

  // ---- optimizers (kernels/cpu/optim.cpp, aten/optim.cpp) ----
  // Update params and state in place. steps: the step count after this step, one per param.
  m.def("sgd_step_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] momentum_buffers, float lr, "
        "float momentum=0, float dampening=0, float weight_decay=0, bool nesterov=False, "
        "bool maximize=False, bool first_step=False) -> ()");
  m.def("adam_step_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avgs, "
        "Tensor(c!)[] exp_avg_sqs, Tensor(d!)[] max_exp_avg_sqs, Tensor[] steps, float lr, "
        "float beta1=0.9, float beta2=0.999, float weight_decay=0, float eps=1e-8, "
        "bool amsgrad=False, bool maximize=False, bool decoupled_weight_decay=False) -> ()");
}
