// patch(): C++ kernels on ATen ops that route supported calls to mytorch ops
// (mytorch_ext/patching/aten.py decides which ops and devices; this file does the calls).
//
// Each route is a boxed kernel registered, while patch() is in force, on the backend keys
// (CPU, CUDA: reached under inference_mode) and the per-backend Autograd keys (AutogradCPU,
// AutogradCUDA) of one ATen op. It checks whether the mytorch op supports the call (dtype,
// shapes, mask; for SDPA the decision shared with the mytorch device, kernels/attention_sdpa.h)
// and calls it through the dispatcher; the mytorch op carries its own autograd (the SDPA route
// is one autograd node of its own: SdpaAttentionBackward). A call it does not support falls through
// to ATen:
// - CompositeImplicitAutograd ops (scaled_dot_product_attention, layer_norm, rms_norm,
//   softmax, log_softmax, cross_entropy_loss) run their composite kernel;
// - aten::gelu, whose own kernels the route hides, runs its formula in ATen ops.
// Routing costs one boxed call and the checks: no Python runs between the ATen call and the
// mytorch kernel.
// The Hugging Face attention function reaches the same SDPA code through the op
// mytorch_patching::hf_attention.
//
// The registrations live in one torch::Library; unpatch() destroys it, which removes them.
// Counters (patch_stats) count calls on real tensors only: a FakeTensor or functional
// tensor means torch.compile or make_fx is tracing, and a trace is not a call.
#include "patching/aten.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/common.h"
#include "kernels/attention_checks.h"
#include "kernels/attention_sdpa.h"

namespace mytorch {
namespace patching {
namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;
using Stack = torch::jit::Stack;

// ---------------------------------------------------------------- counters

// the routes of patch(), then the Hugging Face attention (hf_attention)
enum Route { kSdpa, kLayerNorm, kRmsNorm, kSoftmax, kLogSoftmax, kGelu, kCrossEntropy, kHfAttention, kRoutes };
const char* const kRouteNames[kRoutes] = {"sdpa",    "layer_norm", "rms_norm",      "softmax",
                                          "log_softmax", "gelu", "cross_entropy", "hf_attention"};
std::array<std::array<std::atomic<int64_t>, 2>, kRoutes> g_counts{};

bool traced(const Tensor& t) {
  const auto ks = t.key_set();
  return ks.has(c10::DispatchKey::Python) || ks.has(c10::DispatchKey::Functionalize);
}

void tally(Route r, bool mine, const Tensor& t) {
  if (!traced(t)) g_counts[r][mine ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------- helpers

template <typename Sig>
c10::TypedOperatorHandle<Sig> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").template typed<Sig>();
}

bool is_float(at::ScalarType s) {
  return s == at::kFloat || s == at::kDouble || s == at::kBFloat16 || s == at::kHalf;
}

// the dtypes of the fused kernels (cross-entropy): the CUDA ones have no float64
bool fused_float(const Tensor& t) {
  return t.is_cuda() ? (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 ||
                        t.scalar_type() == at::kHalf)
                     : is_float(t.scalar_type());
}

OptTensor opt_tensor(const c10::IValue& v) { return v.isNone() ? OptTensor() : OptTensor(v.toTensor()); }

// concrete ints, or nothing when one is symbolic (a dynamic-shape trace: ATen's kernel serves)
std::optional<std::vector<int64_t>> concrete(const c10::IValue& v) {
  std::vector<int64_t> out;
  if (v.isIntList()) return v.toIntVector();
  for (const auto& s : v.toSymIntList()) {
    const c10::SymInt si = s;
    auto i = si.maybe_as_int();
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

void finish(Stack* stack, size_t n_args, Tensor result) {
  torch::jit::drop(*stack, n_args);
  torch::jit::push(*stack, std::move(result));
}

void composite(const c10::OperatorHandle& op, Stack* stack) {
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
}

// ---------------------------------------------------------------- sdpa

// CUDA device indices (bits) whose plain attention calls (no mask, no dropout, head_dim at
// most 128) go to PyTorch's SDPA, and the least work (batch * heads * queries * keys *
// head_dim, halved when causal) a call needs to go there (0: every plain call):
// set_attention_backend() in patching/aten.py decides both.
std::atomic<uint64_t> g_sdpa_devices{0};
std::atomic<int64_t> g_sdpa_min_work{0};

bool plain_to_sdpa(const Tensor& q, const Tensor& k, const OptTensor& mask, double dropout_p, bool causal) {
  if (!q.is_cuda() || mask.has_value() || dropout_p != 0.0 || q.sym_size(-1) > 128) return false;
  const int i = q.device().index();
  if (i < 0 || i >= 64 || !((g_sdpa_devices.load(std::memory_order_relaxed) >> i) & 1)) return false;
  const int64_t min_work = g_sdpa_min_work.load(std::memory_order_relaxed);
  if (min_work <= 0) return true;
  // q: (..., heads, queries, head_dim), k: (..., keys, head_dim). Under torch.compile with
  // dynamic shapes the comparison becomes a guard of the graph.
  c10::SymInt work = q.sym_numel() * k.sym_size(-2);
  if (causal) work = work / 2;
  return work.sym_ge(c10::SymInt(min_work)).guard_bool(__FILE__, __LINE__);
}

void set_sdpa_devices(const std::vector<int64_t>& indices, int64_t min_work) {
  uint64_t bits = 0;
  for (int64_t i : indices)
    if (i >= 0 && i < 64) bits |= uint64_t(1) << i;
  g_sdpa_min_work.store(min_work);
  g_sdpa_devices.store(bits);
}

using FlashSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, double,
                                            std::optional<double>, bool, int64_t, int64_t, double,
                                            const OptTensor&, const OptTensor&, const OptTensor&, int64_t,
                                            int64_t, int64_t, const OptTensor&, bool, const OptTensor&);
using FlashBwdSig = std::tuple<Tensor, Tensor, Tensor>(
    const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, double, bool,
    int64_t, int64_t, double, const OptTensor&, const OptTensor&, const OptTensor&, int64_t, int64_t, int64_t, bool,
    const OptTensor&, const OptTensor&);

// The backward of SDPA's call on mytorch::flash_attn: one node, so the layout change and the
// key cut of attention::sdpa_call add no nodes of their own. It holds flash_attn's operands
// (the (batch, seqlen, heads, head_dim) views) and its out and lse; the gradients of query,
// key and value come back in SDPA's layout, those of the keys sdpa_call cut off zero.
// seqlen_k is a SymInt: torch.compile traces this node with symbolic sizes.
struct SdpaAttentionBackward : autograd::BackwardNode<SdpaAttentionBackward> {
  static constexpr const char* kName = "mytorch::SdpaAttentionBackward";
  autograd::SavedVariable q, k, v, out, lse, mask, seed_tensor;
  double dropout_p = 0.0, scale = 1.0;
  bool causal = false;
  int64_t window_right = -1;
  c10::SymInt seqlen_k;

  autograd::variable_list apply(autograd::variable_list&& grads) override {
    static const auto bwd = find_op<FlashBwdSig>("mytorch::flash_attn_backward");
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const Tensor sq = unpack(q), sk = unpack(k), sv = unpack(v), so = unpack(out), sl = unpack(lse),
                 sm = unpack(mask), ss = unpack(seed_tensor);
    autograd::BackwardCall call;
    auto [dq, dk, dv] = bwd.call(grads[0].transpose(1, 2), sq, sk, sv, so, sl, dropout_p, scale, causal, -1,
                                 window_right, 0.0, std::nullopt, std::nullopt, std::nullopt, 0, 0, 0, false,
                                 autograd::optional(sm), autograd::optional(ss));
    return {dq.transpose(1, 2), attention::sdpa_key_grad(dk, seqlen_k), attention::sdpa_key_grad(dv, seqlen_k)};
  }
  void release_variables() override {
    for (autograd::SavedVariable* s : {&q, &k, &v, &out, &lse, &mask, &seed_tensor}) s->reset_data();
  }
};

// SDPA's call (attention::sdpa_call rewrites it) on mytorch::flash_attn, with its backward node
// when query, key or value needs a gradient (the mask gets none). `op` names the caller in errors.
Tensor sdpa_attention(const char* op, const Tensor& query, const Tensor& key, const Tensor& value,
                      const OptTensor& attn_mask, double dropout_p, bool is_causal, std::optional<double> scale) {
  static const auto flash = find_op<FlashSig>("mytorch::flash_attn");
  attention::SdpaCall c;
  OptTensor seed;  // a tensor, so a compiled graph or a CUDA graph draws a new one each run
  Tensor out, lse, result;
  {
    // below autograd: sdpa_call's views and the output's transpose record no nodes of their own
    autograd::BelowAutograd below;
    c = attention::sdpa_call(query, key, value, attn_mask, is_causal);
    if (dropout_p > 0.0) seed = at::randint(0, int64_t(1) << 62, {1}, query.options().dtype(at::kLong));
    std::tie(out, lse) = flash.call(c.q, c.k, c.v, dropout_p, scale, c.causal, -1, c.window_right, 0.0,
                                    std::nullopt, std::nullopt, std::nullopt, 0, 0, 0, c.mask, false, seed);
    result = out.transpose(1, 2);  // no autograd view of out: the node is its grad_fn
  }
  if (auto node = autograd::make_node<SdpaAttentionBackward>(op, query, key, value)) {
    autograd::attach(node, {result});
    node->q = autograd::SavedVariable(c.q, false);
    node->k = autograd::SavedVariable(c.k, false);
    node->v = autograd::SavedVariable(c.v, false);
    node->out = autograd::SavedVariable(out, false);
    node->lse = autograd::SavedVariable(lse, false);
    node->mask = autograd::SavedVariable(c.mask, false);
    node->seed_tensor = autograd::SavedVariable(seed, false);
    node->dropout_p = dropout_p;
    node->scale = attention::softmax_scale(scale, query.sym_size(-1).guard_int(__FILE__, __LINE__));
    node->causal = c.causal;
    node->window_right = c.window_right;
    node->seqlen_k = key.sym_size(2);
    autograd::created(node);
  }
  return result;
}

// Whether SDPA's call runs on mytorch::flash_attn: the shared decision, less the plain CUDA
// calls set_attention_backend() leaves to PyTorch's SDPA.
bool sdpa_mine(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& mask, double dropout_p,
               bool is_causal, bool enable_gqa) {
  return !plain_to_sdpa(q, k, mask, dropout_p, is_causal) &&
         attention::sdpa_supported(q, k, v, mask, dropout_p, is_causal, enable_gqa);
}

// scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, *, scale, enable_gqa)
void sdpa_route(const c10::OperatorHandle& op, Stack* stack) {
  auto a = torch::jit::last(*stack, 8);
  const Tensor &q = a[0].toTensor(), &k = a[1].toTensor(), &v = a[2].toTensor();
  const OptTensor mask = opt_tensor(a[3]);
  const double p = a[4].toDouble();
  const bool causal = a[5].toBool();
  const std::optional<double> scale = a[6].isNone() ? std::nullopt : std::optional<double>(a[6].toDouble());
  if (!sdpa_mine(q, k, v, mask, p, causal, a[7].toBool())) {
    tally(kSdpa, false, q);
    return composite(op, stack);
  }
  tally(kSdpa, true, q);
  Tensor out = sdpa_attention("aten::scaled_dot_product_attention", q, k, v, mask, p, causal, scale);
  finish(stack, 8, std::move(out));
}

// mytorch_patching::hf_attention: the Hugging Face attention function's call (GQA heads
// allowed), the same way as the sdpa route, counted as hf_attention. An op, so that
// torch.compile traces the decision rather than breaking the graph at it.
Tensor hf_attention(const Tensor& query, const Tensor& key, const Tensor& value, const OptTensor& attn_mask,
                    double dropout_p, bool is_causal, std::optional<double> scale) {
  const bool mine = sdpa_mine(query, key, value, attn_mask, dropout_p, is_causal, /*enable_gqa=*/true);
  tally(kHfAttention, mine, query);
  if (mine)
    return sdpa_attention("mytorch_patching::hf_attention", query, key, value, attn_mask, dropout_p, is_causal,
                          scale);
  return at::scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                          /*enable_gqa=*/true);
}

// ---------------------------------------------------------------- norms

bool norm_ok(const Tensor& x, const std::vector<int64_t>& shape, std::initializer_list<const OptTensor*> params) {
  if (!is_float(x.scalar_type())) return false;
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd < 1 || x.dim() < nd) return false;
  for (int64_t i = 0; i < nd; ++i)
    if (x.size(x.dim() - nd + i) != shape[i]) return false;
  for (const OptTensor* p : params) {
    if (!p->has_value()) continue;
    const Tensor& w = **p;
    if (w.scalar_type() != x.scalar_type() || w.device() != x.device() || w.sizes() != at::IntArrayRef(shape))
      return false;
  }
  return true;
}

// layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
void layer_norm_route(const c10::OperatorHandle& op, Stack* stack) {
  using Sig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, at::IntArrayRef, const OptTensor&,
                                                  const OptTensor&, double);
  static const auto ln = find_op<Sig>("mytorch::layer_norm");
  auto a = torch::jit::last(*stack, 6);
  const Tensor& x = a[0].toTensor();
  const auto shape = concrete(a[1]);
  const OptTensor w = opt_tensor(a[2]), b = opt_tensor(a[3]);
  if (!shape || !norm_ok(x, *shape, {&w, &b})) {
    tally(kLayerNorm, false, x);
    return composite(op, stack);
  }
  tally(kLayerNorm, true, x);
  Tensor out = std::get<0>(ln.call(x, *shape, w, b, a[4].toDouble()));
  finish(stack, 6, std::move(out));
}

// rms_norm(input, normalized_shape, weight, eps)
void rms_norm_route(const c10::OperatorHandle& op, Stack* stack) {
  using Sig = std::tuple<Tensor, Tensor>(const Tensor&, at::IntArrayRef, const OptTensor&, std::optional<double>);
  static const auto rms = find_op<Sig>("mytorch::rms_norm");
  auto a = torch::jit::last(*stack, 4);
  const Tensor& x = a[0].toTensor();
  const auto shape = concrete(a[1]);
  const OptTensor w = opt_tensor(a[2]);
  if (!shape || !norm_ok(x, *shape, {&w})) {
    tally(kRmsNorm, false, x);
    return composite(op, stack);
  }
  tally(kRmsNorm, true, x);
  const std::optional<double> eps = a[3].isNone() ? std::nullopt : std::optional<double>(a[3].toDouble());
  Tensor out = std::get<0>(rms.call(x, *shape, w, eps));
  finish(stack, 4, std::move(out));
}

// ---------------------------------------------------------------- softmax, log_softmax

// softmax.int / log_softmax.int (self, dim, dtype)
template <Route R>
void softmax_route(const c10::OperatorHandle& op, Stack* stack) {
  static const auto my = find_op<Tensor(const Tensor&, int64_t)>(R == kSoftmax ? "mytorch::softmax"
                                                                              : "mytorch::log_softmax");
  auto a = torch::jit::last(*stack, 3);
  const Tensor& self = a[0].toTensor();
  const int64_t dim = a[1].toInt();
  Tensor x = self;
  if (!a[2].isNone() && a[2].toScalarType() != self.scalar_type()) x = self.to(a[2].toScalarType());
  if (!is_float(x.scalar_type()) || x.dim() == 0 || dim < -x.dim() || dim >= x.dim()) {
    tally(R, false, self);
    return composite(op, stack);
  }
  tally(R, true, self);
  Tensor out = my.call(x, dim);
  finish(stack, 3, std::move(out));
}

// ---------------------------------------------------------------- gelu

// ATen's gelu formulas, in ATen ops (for the calls mytorch::gelu does not take)
Tensor gelu_formula(const Tensor& x, c10::string_view approximate) {
  if (approximate == "tanh") {
    const double k = std::sqrt(2.0 / M_PI);
    return x * 0.5 * (1.0 + at::tanh(k * (x + 0.044715 * x * x * x)));
  }
  return x * 0.5 * (1.0 + at::erf(x * M_SQRT1_2));
}

// gelu(self, *, approximate)
void gelu_route(const c10::OperatorHandle&, Stack* stack) {
  static const auto my = find_op<Tensor(const Tensor&, c10::string_view)>("mytorch::gelu");
  auto a = torch::jit::last(*stack, 2);
  const Tensor& x = a[0].toTensor();
  const std::string approximate = a[1].toStringRef();
  Tensor out;
  if (is_float(x.scalar_type()) && (approximate == "none" || approximate == "tanh")) {
    tally(kGelu, true, x);
    out = my.call(x, approximate);
  } else {
    tally(kGelu, false, x);
    out = gelu_formula(x, approximate);
  }
  finish(stack, 2, std::move(out));
}

// ---------------------------------------------------------------- cross-entropy

// cross_entropy_loss(self, target, weight, reduction, ignore_index, label_smoothing)
void cross_entropy_route(const c10::OperatorHandle& op, Stack* stack) {
  using FwdSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, int64_t, double, int64_t);
  using GradSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, int64_t, double, int64_t,
                                             const OptTensor&);
  static const auto fwd = find_op<FwdSig>("mytorch::fused_cross_entropy");
  static const auto grad = find_op<GradSig>("mytorch::fused_cross_entropy_grad");
  auto a = torch::jit::last(*stack, 6);
  const Tensor &x = a[0].toTensor(), &t = a[1].toTensor();
  const int64_t reduction = a[3].toInt();  // at::Reduction, as the mytorch loss ops take it
  const auto ignore = a[4].isInt() ? std::optional<int64_t>(a[4].toInt()) : a[4].toSymInt().maybe_as_int();
  const double smoothing = a[5].toDouble();
  const bool ok = a[2].isNone() && reduction >= 0 && reduction <= 2 && ignore.has_value() && x.dim() == 2 &&
                  t.dim() == 1 && t.scalar_type() == at::kLong && t.size(0) == x.size(0) && smoothing >= 0.0 &&
                  smoothing <= 1.0 && t.device() == x.device() && fused_float(x);
  if (!ok) {
    tally(kCrossEntropy, false, x);
    return composite(op, stack);
  }
  tally(kCrossEntropy, true, x);
  // training (the logits need a gradient): loss and gradient in one pass
  const bool train = reduction != at::Reduction::None && x.requires_grad() && at::GradMode::is_enabled();
  Tensor loss = train ? std::get<0>(grad.call(x, t, *ignore, smoothing, reduction, std::nullopt))
                      : std::get<0>(fwd.call(x, t, *ignore, smoothing, reduction));
  finish(stack, 6, std::move(loss));
}

// ---------------------------------------------------------------- registration

using BoxedFn = void(const c10::OperatorHandle&, Stack*);

template <BoxedFn* F>
torch::CppFunction boxed() {
  return torch::CppFunction::makeFromBoxedFunction<F>();
}

struct Spec {
  const char* name;               // the route's name in patch()
  const char* aten;               // the ATen op (overload) it takes
  torch::CppFunction (*kernel)();  // its kernel
};

const Spec kSpecs[] = {
    {"sdpa", "scaled_dot_product_attention", &boxed<&sdpa_route>},
    {"layer_norm", "layer_norm", &boxed<&layer_norm_route>},
    {"rms_norm", "rms_norm", &boxed<&rms_norm_route>},
    {"softmax", "softmax.int", &boxed<&softmax_route<kSoftmax>>},
    {"log_softmax", "log_softmax.int", &boxed<&softmax_route<kLogSoftmax>>},
    {"gelu", "gelu", &boxed<&gelu_route>},
    {"cross_entropy", "cross_entropy_loss", &boxed<&cross_entropy_route>},
};

c10::DispatchKey key_of(const std::string& k) {
  if (k == "CPU") return c10::DispatchKey::CPU;
  if (k == "AutogradCPU") return c10::DispatchKey::AutogradCPU;
  if (k == "CUDA") return c10::DispatchKey::CUDA;
  if (k == "AutogradCUDA") return c10::DispatchKey::AutogradCUDA;
  TORCH_CHECK(false, "mytorch_ext.patch: unknown dispatch key ", k, " (expected CPU, AutogradCPU, CUDA or AutogradCUDA)");
}

struct Quiet : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

std::mutex g_mutex;
std::unique_ptr<torch::Library> g_lib;

void unpatch() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_lib.reset();
}

// Registers each named route on its dispatch keys, replacing any earlier patch.
void patch(const std::vector<std::pair<std::string, std::vector<std::string>>>& routes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_lib.reset();
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", std::nullopt, "csrc/patching/aten.cpp", __LINE__);
  // the dispatcher warns when a kernel overrides another (aten::gelu's): intended, and
  // undone by unpatch
  Quiet quiet;
  c10::WarningUtils::WarningHandlerGuard guard(&quiet);
  for (const auto& [name, keys] : routes) {
    const Spec* spec = nullptr;
    for (const auto& s : kSpecs)
      if (name == s.name) spec = &s;
    TORCH_CHECK(spec != nullptr, "mytorch_ext.patch: no C++ route for ", name);
    for (const auto& k : keys) lib->impl(spec->aten, torch::dispatch(key_of(k), spec->kernel()));
  }
  g_lib = std::move(lib);
}

pybind11::dict counts(bool reset) {
  pybind11::dict d;
  for (int r = 0; r < kRoutes; ++r) {
    pybind11::dict c;
    c["mytorch"] = reset ? g_counts[r][0].exchange(0) : g_counts[r][0].load();
    c["fallthrough"] = reset ? g_counts[r][1].exchange(0) : g_counts[r][1].load();
    d[kRouteNames[r]] = c;
  }
  return d;
}

}  // namespace

void init_bindings(pybind11::module& parent) {
  auto m = parent.def_submodule("_patching", "patch(): the C++ routes of ATen ops to mytorch ops");
  m.def("patch", &patch, "Register the named routes on their dispatch keys, replacing an earlier patch");
  m.def("unpatch", &unpatch, "Remove every route registration");
  m.def("set_sdpa_devices", &set_sdpa_devices, pybind11::arg("indices"), pybind11::arg("min_work") = 0,
        "CUDA device indices whose plain attention calls of at least min_work (batch * heads * "
        "queries * keys * head_dim, halved when causal; 0: all) the sdpa route leaves to PyTorch's SDPA");
  m.def("counts", &counts, pybind11::arg("reset") = false,
        "Calls per route since the last reset: {name: {'mytorch': n, 'fallthrough': m}}");
}

}  // namespace patching
}  // namespace mytorch

// Ops of the patching layer: entry points of the integrations that route to mytorch:: ops or to
// ATen (not kernels, so not in the mytorch:: namespace).
TORCH_LIBRARY(mytorch_patching, m) {
  m.def("hf_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, float dropout_p, "
        "bool is_causal, float? scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(mytorch_patching, CompositeImplicitAutograd, m) {
  m.impl("hf_attention", &mytorch::patching::hf_attention);
}
