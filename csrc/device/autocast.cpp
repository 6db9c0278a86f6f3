// Autocast on the mytorch device: torch.autocast("mytorch", dtype=...) casts the same
// op lists as CUDA (lower precision for matmul/conv/linear, fp32 for reductions and
// pointwise functions that lose precision, promotion for mixed-dtype ops) and bans the
// same op (binary_cross_entropy) with CUDA's error.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

// Ops not in the lists pass through autocast untouched.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

// The list macros name ATen types unqualified, as in ATen's own autocast_mode.cpp.
namespace at {
namespace autocast {
namespace {

Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                   int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and "
              "BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define MYTORCH_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(MYTORCH_LOWER)
#undef MYTORCH_LOWER
#define MYTORCH_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(MYTORCH_FP32)
#undef MYTORCH_FP32
#define MYTORCH_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(MYTORCH_FP32_SET_OPT_DTYPE)
#undef MYTORCH_FP32_SET_OPT_DTYPE
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define MYTORCH_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(MYTORCH_PROMOTE)
#undef MYTORCH_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN((&binary_cross_entropy_banned)));
}

}  // namespace
}  // namespace autocast
}  // namespace at
