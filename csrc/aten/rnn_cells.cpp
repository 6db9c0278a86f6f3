// The fused LSTM / GRU cells on the mytorch device. nn.LSTM and nn.GRU on an accelerator
// run every time step as two GEMMs (input and hidden projections, native elsewhere) and
// one fused cell: these kernels, forward and backward, with the gate layout and the
// workspace of ATen's CUDA cells, so ATen's autograd formulas apply unchanged.
//   LSTM gates (B, 4H): input, forget, cell, output.  workspace (B, 4H): the activated gates.
//   GRU gates (B, 3H): reset, update, new.  workspace (B, 5H): r, z, n, hn + b_hn, hx.
// Everything computes in fp32 (fp64 for double) and stores in the input dtype.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "aten/ops.h"
#include "checks.h"

namespace mytorch {
namespace aten {
namespace {

template <typename A>
inline A sigmoid(A x) {
  return A(1) / (A(1) + std::exp(-x));
}

// t's data, or nullptr for an undefined tensor (an absent bias or gradient).
template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.const_data_ptr<T>() : nullptr;
}

Tensor contig(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

Tensor opt(const OptTensor& t) { return t.has_value() ? *t : Tensor(); }

void check_cell(const char* op, const Tensor& igates, const Tensor& hgates, const Tensor& state,
                const std::optional<Tensor>& ib, const std::optional<Tensor>& hb,
                int64_t ngates, const char* state_name) {
  mytorch::check_floating(op, "input_gates", igates);
  mytorch::check_dim(op, "input_gates", igates, 2);
  mytorch::check_same_shape(op, igates, "input_gates", hgates, "hidden_gates");
  mytorch::check_same_dtype(op, igates, "input_gates", hgates, "hidden_gates");
  mytorch::check_same_dtype(op, igates, "input_gates", state, state_name);
  mytorch::check_same_device(op, igates, "input_gates", hgates, "hidden_gates");
  mytorch::check_same_device(op, igates, "input_gates", state, state_name);
  const int64_t B = igates.size(0), G = igates.size(1);
  TORCH_CHECK(G % ngates == 0, op, ": expected input_gates of width ", ngates,
              " * hidden_size, got ", G);
  const int64_t H = G / ngates;
  TORCH_CHECK(state.dim() == 2 && state.size(0) == B && state.size(1) == H, op, ": expected ",
              state_name, " of shape [", B, ", ", H, "], got ", mytorch::shape_str(state.sizes()));
  const bool has_ib = ib.has_value() && ib->defined(), has_hb = hb.has_value() && hb->defined();
  TORCH_CHECK(has_ib == has_hb, op, ": expected both biases (input_bias, hidden_bias) or neither, got ",
              has_ib ? "only input_bias" : "only hidden_bias");
  for (const auto* bias : {&ib, &hb}) {
    if (!bias->has_value() || !(*bias)->defined()) continue;
    const Tensor& b = **bias;
    TORCH_CHECK(b.dim() == 1 && b.size(0) == G, op, ": expected a bias of shape [", G, "], got ",
                mytorch::shape_str(b.sizes()));
    mytorch::check_same_dtype(op, igates, "input_gates", b, "bias");
    mytorch::check_same_device(op, igates, "input_gates", b, "bias");
  }
}

// A cell's checked inputs, contiguous: B rows of `ngates` gates of width H.
struct Cell {
  Tensor ig, hg, state, ib, hb;
  int64_t B, H;
  Cell(const char* op, const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& state_,
       const std::optional<Tensor>& input_bias, const std::optional<Tensor>& hidden_bias, int64_t ngates,
       const char* state_name) {
    check_cell(op, input_gates, hidden_gates, state_, input_bias, hidden_bias, ngates, state_name);
    ig = input_gates.contiguous(), hg = hidden_gates.contiguous(), state = state_.contiguous();
    ib = contig(opt(input_bias)), hb = contig(opt(hidden_bias));
    B = ig.size(0), H = ig.size(1) / ngates;
  }
  // the inputs' data as T; the biases nullptr when absent
  template <typename T>
  struct Data {
    const T *ig, *hg, *state, *ib, *hb;
  };
  template <typename T>
  Data<T> data() const {
    return {ig.const_data_ptr<T>(), hg.const_data_ptr<T>(), state.const_data_ptr<T>(), data_or_null<T>(ib),
            data_or_null<T>(hb)};
  }
};

constexpr int64_t kGrain = 1 << 12;

}  // namespace

// ---- LSTM ----
Tensors3 lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx_,
                   const OptTensor& input_bias, const OptTensor& hidden_bias) {
  const Cell cell("mytorch::_thnn_fused_lstm_cell", input_gates, hidden_gates, cx_, input_bias, hidden_bias, 4, "cx");
  const Tensor& ig = cell.ig;
  const int64_t B = cell.B, H = cell.H;
  Tensor hy = at::empty({B, H}, ig.options());
  Tensor cy = at::empty({B, H}, ig.options());
  Tensor ws = at::empty({B, 4 * H}, ig.options());
  if (B * H == 0) return {hy, cy, ws};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, ig.scalar_type(), "mytorch_lstm_cell", [&] {
    using A = at::opmath_type<scalar_t>;
    const auto in = cell.data<scalar_t>();
    const scalar_t *igp = in.ig, *hgp = in.hg, *cxp = in.state, *ibp = in.ib, *hbp = in.hb;
    scalar_t *hyp = hy.mutable_data_ptr<scalar_t>(), *cyp = cy.mutable_data_ptr<scalar_t>();
    scalar_t* wsp = ws.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, B * H, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const int64_t b = k / H, j = k % H, base = b * 4 * H;
        A g[4];
        for (int q = 0; q < 4; ++q) {
          const int64_t c = q * H + j;
          A v = A(igp[base + c]) + A(hgp[base + c]);
          if (ibp != nullptr) v += A(ibp[c]) + A(hbp[c]);
          g[q] = v;
        }
        const A i = sigmoid(g[0]), f = sigmoid(g[1]), c = std::tanh(g[2]), o = sigmoid(g[3]);
        const A cnew = f * A(cxp[k]) + i * c;
        cyp[k] = scalar_t(cnew);
        hyp[k] = scalar_t(o * std::tanh(cnew));
        wsp[base + j] = scalar_t(i);
        wsp[base + H + j] = scalar_t(f);
        wsp[base + 2 * H + j] = scalar_t(c);
        wsp[base + 3 * H + j] = scalar_t(o);
      }
    });
  });
  return {hy, cy, ws};
}

Tensors3 lstm_cell_backward(const OptTensor& grad_hy_, const OptTensor& grad_cy_, const Tensor& cx_,
                            const Tensor& cy_, const Tensor& workspace, bool has_bias) {
  const char* op = "mytorch::_thnn_fused_lstm_cell_backward_impl";
  Tensor ghy = contig(opt(grad_hy_)), gcy = contig(opt(grad_cy_));
  if (!ghy.defined() && !gcy.defined()) return {Tensor(), Tensor(), Tensor()};
  mytorch::check_dim(op, "workspace", workspace, 2);
  Tensor ws = workspace.contiguous(), cx = cx_.contiguous(), cy = cy_.contiguous();
  const int64_t B = ws.size(0), H = ws.size(1) / 4;
  TORCH_CHECK(ws.size(1) == 4 * H && cx.sizes() == cy.sizes() && cx.dim() == 2 &&
                  cx.size(0) == B && cx.size(1) == H,
              op, ": expected cx and cy of shape [", B, ", ", H, "] for a workspace of shape ",
              mytorch::shape_str(ws.sizes()), ", got ", mytorch::shape_str(cx.sizes()), " and ",
              mytorch::shape_str(cy.sizes()));
  for (const Tensor* g : {&ghy, &gcy})
    if (g->defined())
      TORCH_CHECK(g->sizes() == cx.sizes(), op, ": expected gradients of shape [", B, ", ", H,
                  "], got ", mytorch::shape_str(g->sizes()));
  Tensor grad_gates = at::empty({B, 4 * H}, ws.options());
  Tensor grad_cx = at::empty({B, H}, ws.options());
  if (B * H > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, ws.scalar_type(), "mytorch_lstm_cell_bwd", [&] {
      using A = at::opmath_type<scalar_t>;
      const scalar_t* wsp = ws.const_data_ptr<scalar_t>();
      const scalar_t *cxp = cx.const_data_ptr<scalar_t>(), *cyp = cy.const_data_ptr<scalar_t>();
      const scalar_t *ghp = data_or_null<scalar_t>(ghy), *gcp = data_or_null<scalar_t>(gcy);
      scalar_t* ggp = grad_gates.mutable_data_ptr<scalar_t>();
      scalar_t* gcxp = grad_cx.mutable_data_ptr<scalar_t>();
      at::parallel_for(0, B * H, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) {
          const int64_t b = k / H, j = k % H, base = b * 4 * H;
          const A i = A(wsp[base + j]), f = A(wsp[base + H + j]);
          const A c = A(wsp[base + 2 * H + j]), o = A(wsp[base + 3 * H + j]);
          const A go = ghp != nullptr ? A(ghp[k]) : A(0);
          const A gc = gcp != nullptr ? A(gcp[k]) : A(0);
          const A tc = std::tanh(A(cyp[k]));
          const A gcell = go * o * (A(1) - tc * tc) + gc;  // d loss / d cy, total
          ggp[base + j] = scalar_t(gcell * c * (A(1) - i) * i);
          ggp[base + H + j] = scalar_t(gcell * A(cxp[k]) * (A(1) - f) * f);
          ggp[base + 2 * H + j] = scalar_t(gcell * i * (A(1) - c * c));
          ggp[base + 3 * H + j] = scalar_t(go * tc * (A(1) - o) * o);
          gcxp[k] = scalar_t(gcell * f);
        }
      });
    });
  }
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

// ---- GRU ----
std::tuple<Tensor, Tensor> gru_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                    const Tensor& hx_, const std::optional<Tensor>& input_bias,
                                    const std::optional<Tensor>& hidden_bias) {
  const Cell cell("mytorch::_thnn_fused_gru_cell", input_gates, hidden_gates, hx_, input_bias, hidden_bias, 3, "hx");
  const Tensor& ig = cell.ig;
  const int64_t B = cell.B, H = cell.H;
  Tensor hy = at::empty({B, H}, ig.options());
  Tensor ws = at::empty({B, 5 * H}, ig.options());
  if (B * H == 0) return {hy, ws};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, ig.scalar_type(), "mytorch_gru_cell", [&] {
    using A = at::opmath_type<scalar_t>;
    const auto in = cell.data<scalar_t>();
    const scalar_t *igp = in.ig, *hgp = in.hg, *hxp = in.state, *ibp = in.ib, *hbp = in.hb;
    scalar_t *hyp = hy.mutable_data_ptr<scalar_t>(), *wsp = ws.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, B * H, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const int64_t b = k / H, j = k % H, g = b * 3 * H, w = b * 5 * H;
        auto bias = [&](const scalar_t* p, int64_t c) { return p != nullptr ? A(p[c]) : A(0); };
        const A r = sigmoid(A(igp[g + j]) + bias(ibp, j) + A(hgp[g + j]) + bias(hbp, j));
        const A z = sigmoid(A(igp[g + H + j]) + bias(ibp, H + j) + A(hgp[g + H + j]) +
                            bias(hbp, H + j));
        const A hn = A(hgp[g + 2 * H + j]) + bias(hbp, 2 * H + j);
        const A n = std::tanh(A(igp[g + 2 * H + j]) + bias(ibp, 2 * H + j) + r * hn);
        const A h = A(hxp[k]);
        hyp[k] = scalar_t(n + z * (h - n));
        wsp[w + j] = scalar_t(r);
        wsp[w + H + j] = scalar_t(z);
        wsp[w + 2 * H + j] = scalar_t(n);
        wsp[w + 3 * H + j] = scalar_t(hn);
        wsp[w + 4 * H + j] = hxp[k];
      }
    });
  });
  return {hy, ws};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor& grad_hy_,
                                                                     const Tensor& workspace,
                                                                     bool has_bias) {
  const char* op = "mytorch::_thnn_fused_gru_cell_backward";
  mytorch::check_dim(op, "workspace", workspace, 2);
  Tensor ws = workspace.contiguous(), ghy = grad_hy_.contiguous();
  const int64_t B = ws.size(0), H = ws.size(1) / 5;
  TORCH_CHECK(ws.size(1) == 5 * H && ghy.dim() == 2 && ghy.size(0) == B && ghy.size(1) == H, op,
              ": expected grad_hy of shape [", B, ", ", H, "] for a workspace of shape ",
              mytorch::shape_str(ws.sizes()), ", got ", mytorch::shape_str(ghy.sizes()));
  mytorch::check_same_dtype(op, ws, "workspace", ghy, "grad_hy");
  Tensor gi = at::empty({B, 3 * H}, ws.options());
  Tensor gh = at::empty({B, 3 * H}, ws.options());
  Tensor ghx = at::empty({B, H}, ws.options());
  if (B * H > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, ws.scalar_type(), "mytorch_gru_cell_bwd", [&] {
      using A = at::opmath_type<scalar_t>;
      const scalar_t *wsp = ws.const_data_ptr<scalar_t>(), *gop = ghy.const_data_ptr<scalar_t>();
      scalar_t *gip = gi.mutable_data_ptr<scalar_t>(), *ghp = gh.mutable_data_ptr<scalar_t>();
      scalar_t* ghxp = ghx.mutable_data_ptr<scalar_t>();
      at::parallel_for(0, B * H, kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) {
          const int64_t b = k / H, j = k % H, g = b * 3 * H, w = b * 5 * H;
          const A r = A(wsp[w + j]), z = A(wsp[w + H + j]), n = A(wsp[w + 2 * H + j]);
          const A hn = A(wsp[w + 3 * H + j]), h = A(wsp[w + 4 * H + j]);
          const A go = A(gop[k]);
          const A gz = go * (h - n) * (A(1) - z) * z;
          const A gn = go * (A(1) - z) * (A(1) - n * n);
          const A gr = gn * hn * (A(1) - r) * r;
          gip[g + j] = scalar_t(gr);
          gip[g + H + j] = scalar_t(gz);
          gip[g + 2 * H + j] = scalar_t(gn);
          ghp[g + j] = scalar_t(gr);
          ghp[g + H + j] = scalar_t(gz);
          ghp[g + 2 * H + j] = scalar_t(gn * r);
          ghxp[k] = scalar_t(go * z);
        }
      });
    });
  }
  Tensor gib = has_bias ? gi.sum(0) : Tensor();
  Tensor ghb = has_bias ? gh.sum(0) : Tensor();
  return {gi, gh, ghx, gib, ghb};
}

}  // namespace aten
}  // namespace mytorch
