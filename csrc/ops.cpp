// Every mytorch:: schema, in one place. Kernels register per backend with
// TORCH_LIBRARY_IMPL(mytorch, <Key>, m) next to their glue code; the Python side
// (mytorch_ext/ops/) adds fake kernels and autograd.
#include <torch/library.h>

TORCH_LIBRARY(mytorch, m) {
  // ---- activation (kernels/cpu/activation.cpp; kernels/cuda/activation.cu, activation_hard.cu) ----
  // approximate: "none" (erf) or "tanh"
  m.def("gelu(Tensor x, str approximate='none') -> Tensor");
  m.def("gelu_backward(Tensor grad, Tensor x, str approximate='none') -> Tensor");
  m.def("hardswish(Tensor x) -> Tensor");
  m.def("hardswish_backward(Tensor grad, Tensor x) -> Tensor");
  m.def("hardsigmoid(Tensor x) -> Tensor");
  m.def("hardsigmoid_backward(Tensor grad, Tensor x) -> Tensor");
  // gelu(x + bias), bias (x.size(-1),); swiglu: silu(a) * b
  m.def("bias_gelu(Tensor x, Tensor bias, str approximate='tanh') -> Tensor");
  m.def("bias_gelu_backward(Tensor grad, Tensor x, Tensor bias, str approximate='tanh') -> (Tensor grad_x, Tensor grad_bias)");
  m.def("swiglu(Tensor a, Tensor b) -> Tensor");
  m.def("swiglu_backward(Tensor grad, Tensor a, Tensor b) -> (Tensor grad_a, Tensor grad_b)");

  // ---- rope (kernels/cpu/rope.cpp, kernels/cuda/rope.cu) ----
  // x (..., seq, heads, head_dim); cos, sin (seq, rotary_dim / 2)
  m.def("rope(Tensor x, Tensor cos, Tensor sin, bool interleaved=False) -> Tensor");
  m.def("rope_(Tensor(a!) x, Tensor cos, Tensor sin, bool interleaved=False) -> ()");
  m.def("rope_backward(Tensor grad, Tensor cos, Tensor sin, bool interleaved=False) -> Tensor");

  // ---- attention (kernels/cpu/attention.cpp, kernels/cuda/attention.cpp + mytorch_ext/triton/) ----
  // Layout (batch, seqlen, heads, head_dim); with cu_seqlens_q/k, (total_tokens, heads, head_dim).
  // lse is float32, (batch, heads_q, seqlen_q), or (heads_q, total_q) for varlen.
  // window_left/right < 0 means unbounded; causal is bottom-right aligned.
  // seed: dropout seed; seed_tensor, when given, replaces it: a one-element int64 tensor on
  // q's device that the kernels read themselves (the Python API draws it with torch.randint,
  // so that torch.compile and CUDA graphs draw a new one every step).
  // attn_mask: optional bool (True = attend) or additive float mask, broadcastable to
  // (batch, heads_q, seqlen_q, seqlen_k); not with cu_seqlens. It gets no gradient.
  // deterministic (forward): the backward this forward's autograd runs must be deterministic.
  m.def(
      "flash_attn(Tensor q, Tensor k, Tensor v, float dropout_p=0.0, float? softmax_scale=None, "
      "bool causal=False, int window_left=-1, int window_right=-1, float softcap=0.0, "
      "Tensor? alibi_slopes=None, Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, "
      "int max_seqlen_q=0, int max_seqlen_k=0, int seed=0, Tensor? attn_mask=None, "
      "bool deterministic=False, Tensor? seed_tensor=None) "
      "-> (Tensor out, Tensor lse)");
  m.def(
      "flash_attn_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
      "float dropout_p, float softmax_scale, bool causal, int window_left, int window_right, "
      "float softcap, Tensor? alibi_slopes, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, "
      "int max_seqlen_q, int max_seqlen_k, int seed, bool deterministic, Tensor? attn_mask=None, "
      "Tensor? seed_tensor=None) -> (Tensor dq, Tensor dk, Tensor dv)");

  // ---- attention, float8 forward (mytorch_ext/ops/attention_fp8.py; the Hopper kernel in
  //      mytorch_ext/triton/flash_attn_hopper.py) ----
  // q, k, v float8_e4m3fn (batch, seqlen, heads, head_dim), head_dim 64 or 128; descales
  // float32 (batch, heads_k) or one element, x = x_fp8 * descale (required: None is an
  // error naming them). out bfloat16; lse float32 (batch, heads, seqlen_q). Forward only.
  m.def(
      "flash_attn_fp8(Tensor q, Tensor k, Tensor v, Tensor? q_descale=None, "
      "Tensor? k_descale=None, Tensor? v_descale=None, float? softmax_scale=None, "
      "bool causal=False, int window_left=-1, int window_right=-1, float softcap=0.0) "
      "-> (Tensor out, Tensor lse)");

  // ---- kvcache: decoding attention over a KV cache (kernels/cpu/kvcache.cpp,
  //      mytorch_ext/triton/kvcache.py registered from mytorch_ext/ops/kvcache.py) ----
  // flash-attn's flash_attn_with_kvcache. q (batch, seqlen_q, heads, head_dim); caches
  // (batch_cache, seqlen_cache, heads_k, head_dim), or pages (num_blocks, block_size, heads_k,
  // head_dim) with block_table (batch, max_blocks) int32. k, v (batch, seqlen_new, heads_k,
  // head_dim), when given, are written into the caches in place at cache_seqlens (int32,
  // (batch,); None: the whole cache is filled), rotated by rotary_cos/sin (seqlen_ro,
  // rotary_dim / 2) when given. Keys are cache positions [cache_leftpad, cache_seqlens +
  // seqlen_new); causal / windows bottom-right aligned on them. num_splits: 0 = heuristic.
  // key_mask (not in flash-attn's API): bool (batch, cache length), False hides the key at
  // that cache position from every query of the sequence; what a padded or otherwise masked
  // decode step needs without reading the mask on the host.
  // lse float32 (batch, heads, seqlen_q); +inf where a row sees no key (out 0 there).
  m.def(
      "flash_attn_with_kvcache(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k=None, "
      "Tensor? v=None, Tensor? rotary_cos=None, Tensor? rotary_sin=None, Tensor? cache_seqlens=None, "
      "Tensor? cache_batch_idx=None, Tensor? cache_leftpad=None, Tensor? block_table=None, "
      "float? softmax_scale=None, bool causal=False, int window_left=-1, int window_right=-1, "
      "float softcap=0.0, bool rotary_interleaved=True, Tensor? alibi_slopes=None, int num_splits=0, "
      "Tensor? key_mask=None) -> (Tensor out, Tensor lse)");

  // ---- vision (kernels/cpu/{conv,pool,batchnorm,upsample}.cpp) ----
  // Layout NCHW (NCL for conv1d); outputs are contiguous. bool[3] masks pick (input, weight, bias) grads.
  m.def("conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensor");
  m.def("conv2d_backward(Tensor grad, Tensor input, Tensor weight, int[2] stride, int[2] padding, int[2] dilation, int groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  m.def("conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, int[1] padding=0, int[1] dilation=1, int groups=1) -> Tensor");
  m.def("conv1d_backward(Tensor grad, Tensor input, Tensor weight, int[1] stride, int[1] padding, int[1] dilation, int groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  // indices: flat positions h * W + w within each input plane (int64), as ATen's
  m.def("max_pool2d(Tensor x, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor out, Tensor indices)");
  m.def("max_pool2d_backward(Tensor grad, Tensor x, Tensor indices) -> Tensor");
  m.def("avg_pool2d(Tensor x, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor");
  m.def("avg_pool2d_backward(Tensor grad, Tensor x, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor");
  m.def("adaptive_avg_pool2d(Tensor x, int[2] output_size) -> Tensor");
  m.def("adaptive_avg_pool2d_backward(Tensor grad, Tensor x) -> Tensor");
  // training: normalize with the batch statistics; eval: with running_mean / running_var.
  // save_mean / save_invstd: per-channel batch statistics (training), empty (eval).
  m.def("batch_norm(Tensor x, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float eps) -> (Tensor out, Tensor save_mean, Tensor save_invstd)");
  // running = (1 - momentum) * running + momentum * batch statistic (unbiased variance over count values)
  m.def("batch_norm_update_stats_(Tensor(a!) running_mean, Tensor(b!) running_var, Tensor save_mean, Tensor save_invstd, float momentum, float eps, int count) -> ()");
  m.def("batch_norm_backward(Tensor grad, Tensor x, Tensor? weight, Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool training, float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  m.def("upsample_nearest2d(Tensor x, int[2] output_size, float? scale_h=None, float? scale_w=None) -> Tensor");
  m.def("upsample_nearest2d_backward(Tensor grad, int[4] input_size, float? scale_h=None, float? scale_w=None) -> Tensor");
  m.def("upsample_bilinear2d(Tensor x, int[2] output_size, bool align_corners=False, float? scale_h=None, float? scale_w=None) -> Tensor");
  m.def("upsample_bilinear2d_backward(Tensor grad, int[4] input_size, bool align_corners=False, float? scale_h=None, float? scale_w=None) -> Tensor");

  // ---- gemm (kernels/cpu/gemm.cpp) ----
  m.def("mm(Tensor self, Tensor mat2) -> Tensor");
  m.def("bmm(Tensor self, Tensor mat2) -> Tensor");
  m.def("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor");
  m.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");

  // ---- softmax (kernels/cpu/softmax.cpp, kernels/cuda/softmax.cu) ----
  m.def("softmax(Tensor self, int dim) -> Tensor");
  m.def("log_softmax(Tensor self, int dim) -> Tensor");
  m.def("softmax_backward(Tensor grad_output, Tensor output, int dim) -> Tensor");
  m.def("log_softmax_backward(Tensor grad_output, Tensor output, int dim) -> Tensor");

  // ---- norm (kernels/cpu/norm.cpp; kernels/cuda/norm.cu, norm_backward.cu, norm_wide.cu) ----
  // mean/rstd: shape input.shape[:axis] + [1]*len(normalized_shape), float32 for bf16/fp16
  // inputs (the input's dtype otherwise), as ATen's CUDA kernels.
  m.def("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05) -> (Tensor out, Tensor mean, Tensor rstd)");
  m.def("layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, "
        "Tensor rstd, Tensor? weight) -> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)");
  m.def("rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) "
        "-> (Tensor out, Tensor rstd)");
  m.def("rms_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor rstd, "
        "Tensor? weight) -> (Tensor grad_input, Tensor grad_weight)");

  // ---- loss (kernels/cpu/loss.cpp; kernels/cuda/loss.cu, loss_fused.cu, loss_one_pass.cu, loss_stream.cu) ----
  // reduction, in every loss op as in ATen's loss schemas (at::Reduction): 0 none, 1 mean, 2 sum.
  // The Python wrappers (mytorch_ext.ops.loss) take 'none' / 'mean' / 'sum' as F.cross_entropy.
  // nll_loss input (C,), (N, C) or (N, C, d1, ...).
  m.def("nll_loss(Tensor input, Tensor target, Tensor? weight=None, int reduction=1, "
        "int ignore_index=-100) -> (Tensor output, Tensor total_weight)");
  m.def("nll_loss_backward(Tensor grad_output, Tensor input, Tensor target, Tensor? weight, "
        "int reduction, int ignore_index, Tensor total_weight) -> Tensor");
  // fused log_softmax + nll_loss with label smoothing; input (C,) or (N, C)
  m.def("cross_entropy(Tensor input, Tensor target, Tensor? weight=None, int reduction=1, "
        "int ignore_index=-100, float label_smoothing=0.0) -> Tensor");
  m.def("cross_entropy_backward(Tensor grad_output, Tensor input, Tensor target, Tensor? weight, "
        "int reduction, int ignore_index, float label_smoothing) -> Tensor");
  m.def("mse_loss(Tensor input, Tensor target, int reduction=1) -> Tensor");
  m.def("mse_loss_backward(Tensor grad_output, Tensor input, Tensor target, int reduction) -> Tensor");
  // The large-vocabulary cross-entropies of training.
  // Vocab-chunked: logits [N, C], target [N] int64; lse [N] float32 (float64 for float64 logits).
  m.def("fused_cross_entropy(Tensor logits, Tensor target, int ignore_index=-100, float label_smoothing=0.0, "
        "int reduction=1) -> (Tensor loss, Tensor lse)");
  m.def("fused_cross_entropy_backward(Tensor grad, Tensor logits, Tensor target, Tensor lse, int ignore_index, "
        "float label_smoothing, int reduction) -> Tensor");
  // The loss and its gradient for a loss gradient of 1, in one pass (reduction 1 mean or 2 sum):
  // training calls it when the logits need a gradient (backward then only scales it). divisor
  // (one element): the loss and the gradient divided by it in the same pass (a sum over
  // tokens / items in the batch, a loss / accumulation steps).
  m.def("fused_cross_entropy_grad(Tensor logits, Tensor target, int ignore_index=-100, "
        "float label_smoothing=0.0, int reduction=1, Tensor? divisor=None) -> (Tensor loss, Tensor grad_logits)");
  // input [N, H], weight [V, H]: loss of cross_entropy(input @ weight.T) and its gradients
  // for grad_output = 1, computed chunk by chunk (chunk_size=0 picks one); reduction and
  // divisor as in fused_cross_entropy_grad.
  m.def("fused_linear_cross_entropy(Tensor input, Tensor weight, Tensor target, int ignore_index=-100, "
        "float label_smoothing=0.0, int reduction=1, int chunk_size=0, Tensor? divisor=None) -> "
        "(Tensor loss, Tensor grad_input, Tensor grad_weight)");

  // ---- embedding (kernels/cpu/embedding.cpp) ----
  m.def("embedding(Tensor weight, Tensor indices, int padding_idx=-1) -> Tensor");
  m.def("embedding_backward(Tensor grad, Tensor indices, int num_weights, int padding_idx=-1, "
        "bool scale_grad_by_freq=False) -> Tensor");

  // ---- dropout (kernels/cpu/dropout.cpp) ----
  // draws from the generator (default: the input device's); mask is bool
  m.def("dropout(Tensor input, float p, bool train=True, Generator? generator=None) "
        "-> (Tensor out, Tensor mask)", {at::Tag::nondeterministic_seeded});
  m.def("dropout_backward(Tensor grad, Tensor mask, float scale) -> Tensor");

  // ---- elementwise_binary (kernels/cpu/elementwise_binary.cpp; kernels/cuda/elementwise_binary.cu,
  //      elementwise_binary_compare.cu, elementwise_binary_scale.cu) ----
  // The elementwise families: broadcasting and type promotion as ATen; results are contiguous.
  // (The aten ops of the mytorch device take the same kernels: aten/elementwise.cpp.)
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
  m.def("sigmoid_backward(Tensor grad, Tensor y) -> Tensor");
  m.def("tanh_backward(Tensor grad, Tensor y) -> Tensor");
  m.def("silu_backward(Tensor grad, Tensor x) -> Tensor");
  m.def("threshold_backward(Tensor grad, Tensor x, Scalar threshold) -> Tensor");
  m.def("clamp_tensor(Tensor x, Tensor? min=None, Tensor? max=None) -> Tensor");
  // self *= scale (one element, any floating dtype); a scale of exactly 1 leaves self untouched,
  // decided on the device without a host sync (the fused linear + cross-entropy backward).
  m.def("scale_(Tensor(a!) self, Tensor scale) -> ()");

  // ---- elementwise_unary (kernels/cpu/elementwise_unary.cpp; kernels/cuda/elementwise_unary.cu,
  //      elementwise_unary_cast.cu) ----
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
  m.def("clamp(Tensor x, Scalar? min=None, Scalar? max=None) -> Tensor");
  m.def("cast(Tensor x, ScalarType dtype) -> Tensor");

  // ---- elementwise_ternary (kernels/cpu/elementwise_ternary.cpp, kernels/cuda/elementwise_ternary.cu) ----
  m.def("where(Tensor condition, Tensor a, Tensor b) -> Tensor");
  m.def("masked_fill(Tensor x, Tensor mask, Scalar value) -> Tensor");
  m.def("addcmul(Tensor x, Tensor t1, Tensor t2, Scalar value=1) -> Tensor");
  m.def("addcdiv(Tensor x, Tensor t1, Tensor t2, Scalar value=1) -> Tensor");
  m.def("lerp(Tensor x, Tensor end, Tensor weight) -> Tensor");

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
  // index / index_put: index tensors (int64, int32 or bool masks) broadcast together, None: whole dims.
  m.def("index_select(Tensor x, int dim, Tensor index) -> Tensor");
  m.def("gather(Tensor x, int dim, Tensor index) -> Tensor");
  m.def("scatter_add(Tensor x, int dim, Tensor index, Tensor src) -> Tensor");
  m.def("index(Tensor x, Tensor?[] indices) -> Tensor");
  m.def("index_put(Tensor x, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor");
  m.def("cat(Tensor[] tensors, int dim=0) -> Tensor");
  m.def("nonzero(Tensor x) -> Tensor");

  // ---- optim (kernels/cpu/optim.cpp; kernels/cuda/optim.cu, optim_step.cu) ----
  // Update params and state in place, any strides. On CUDA one launch updates every param where
  // they and their state are contiguous, of one float32 / bfloat16 / float16 dtype on one device
  // (SGD and AdamW without maximize or amsgrad); one launch a param otherwise.
  // steps: the step count after this step, one 1-element tensor per param. The CUDA kernels read
  // a step tensor on the device where it lies (as torch's fused Adam reads its state_steps), so a
  // step makes no host sync and a captured CUDA graph replays with the count of each replay; a
  // CPU step tensor is read on the host when the step is launched.
  m.def("sgd_step_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] momentum_buffers, float lr, "
        "float momentum=0, float dampening=0, float weight_decay=0, bool nesterov=False, "
        "bool maximize=False, bool first_step=False) -> ()");
  m.def("adam_step_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avgs, "
        "Tensor(c!)[] exp_avg_sqs, Tensor(d!)[] max_exp_avg_sqs, Tensor[] steps, float lr, "
        "float beta1=0.9, float beta2=0.999, float weight_decay=0, float eps=1e-8, "
        "bool amsgrad=False, bool maximize=False, bool decoupled_weight_decay=False) -> ()");
}
