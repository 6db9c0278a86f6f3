// ATen indexing ops on the mytorch device -> kernels/cpu/index.cpp.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "kernels/cpu/elementwise.h"
#include "kernels/index.h"

namespace mytorch {
namespace aten {
namespace {

using at::Tensor;
using Indices = c10::List<std::optional<Tensor>>;

Tensor& write_out(const Tensor& r, Tensor& out) {
  at::native::resize_output(out, r.sizes());
  cpu::copy_cast_(out, r);
  return out;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) { return cpu::index_select(x, dim, idx); }
Tensor& index_select_out(const Tensor& x, int64_t dim, const Tensor& idx, Tensor& out) {
  return write_out(cpu::index_select(x, dim, idx), out);
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx, bool) { return cpu::gather(x, dim, idx); }
Tensor& gather_out(const Tensor& x, int64_t dim, const Tensor& idx, bool, Tensor& out) {
  return write_out(cpu::gather(x, dim, idx), out);
}
Tensor& scatter_add_i(Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src) {
  return cpu::scatter_add_(x, dim, idx, src);
}
Tensor& scatter_add_o(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src, Tensor& out) {
  write_out(x, out);
  return cpu::scatter_add_(out, dim, idx, src);
}
// As on CUDA, advanced indexing accepts CPU index tensors: they are copied to x's device.
Indices on_device(const Indices& ind, const Tensor& x) {
  Indices moved;
  moved.reserve(ind.size());
  for (const std::optional<Tensor>& i : ind) {
    if (i.has_value() && i->defined() && i->device().is_cpu() && !x.device().is_cpu())
      moved.push_back(i->to(x.device()));
    else
      moved.push_back(i);
  }
  return moved;
}
Tensor index(const Tensor& x, const Indices& ind) { return cpu::index(x, on_device(ind, x)); }
Tensor& index_out(const Tensor& x, const Indices& ind, Tensor& out) {
  return write_out(cpu::index(x, on_device(ind, x)), out);
}
Tensor& index_put_impl(Tensor& x, const Indices& ind, const Tensor& v, bool acc, bool) {
  return cpu::index_put_(x, on_device(ind, x), v, acc);
}
Tensor& index_put_i(Tensor& x, const Indices& ind, const Tensor& v, bool acc) {
  return cpu::index_put_(x, on_device(ind, x), v, acc);
}
Tensor index_put(const Tensor& x, const Indices& ind, const Tensor& v, bool acc) {
  return cpu::index_put(x, on_device(ind, x), v, acc);
}
Tensor cat(const at::ITensorListRef& ts, int64_t dim) {
  const auto list = ts.materialize();
  return cpu::cat(std::vector<Tensor>(list.begin(), list.end()), dim);
}
Tensor& cat_out(const at::ITensorListRef& ts, int64_t dim, Tensor& out) { return write_out(aten::cat(ts, dim), out); }
Tensor nonzero(const Tensor& x) { return cpu::nonzero(x); }
Tensor& nonzero_out(const Tensor& x, Tensor& out) { return write_out(cpu::nonzero(x), out); }

}  // namespace
}  // namespace aten
}  // namespace mytorch

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace mytorch::aten;
  m.impl("index_select", &mytorch::aten::index_select);
  m.impl("index_select.out", &mytorch::aten::index_select_out);
  m.impl("gather", &mytorch::aten::gather);
  m.impl("gather.out", &mytorch::aten::gather_out);
  m.impl("scatter_add", &mytorch::cpu::scatter_add);
  m.impl("scatter_add_", &mytorch::aten::scatter_add_i);
  m.impl("scatter_add.out", &mytorch::aten::scatter_add_o);
  m.impl("index.Tensor", &mytorch::aten::index);
  m.impl("index.Tensor_out", &mytorch::aten::index_out);
  m.impl("_index_put_impl_", &mytorch::aten::index_put_impl);
  m.impl("index_put_", &mytorch::aten::index_put_i);
  m.impl("index_put", &mytorch::aten::index_put);
  m.impl("cat", &mytorch::aten::cat);
  m.impl("cat.out", &mytorch::aten::cat_out);
  m.impl("nonzero", &mytorch::aten::nonzero);
  m.impl("nonzero.out", &mytorch::aten::nonzero_out);
}
