// ATen indexing ops on the mytorch device -> kernels/cpu/index.cpp. index_select, scatter_add,
// scatter_add_ and nonzero take ATen's arguments as they are (aten/register.cpp).
#include <ATen/native/Resize.h>

#include "aten/ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/index.h"

namespace mytorch {
namespace aten {
namespace {

Tensor& write_out(const Tensor& r, Tensor& out) {
  at::native::resize_output(out, r.sizes());
  cpu::copy_cast_(out, r);
  return out;
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

}  // namespace

Tensor& index_select_out(const Tensor& x, int64_t dim, const Tensor& idx, Tensor& out) {
  return write_out(cpu::index_select(x, dim, idx), out);
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx, bool) { return cpu::gather(x, dim, idx); }
Tensor& gather_out(const Tensor& x, int64_t dim, const Tensor& idx, bool, Tensor& out) {
  return write_out(cpu::gather(x, dim, idx), out);
}
Tensor& scatter_add_out(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src, Tensor& out) {
  write_out(x, out);
  return cpu::scatter_add_(out, dim, idx, src);
}
Tensor index(const Tensor& x, const Indices& ind) { return cpu::index(x, on_device(ind, x)); }
Tensor& index_out(const Tensor& x, const Indices& ind, Tensor& out) {
  return write_out(cpu::index(x, on_device(ind, x)), out);
}
Tensor& index_put_impl_(Tensor& x, const Indices& ind, const Tensor& v, bool acc, bool) {
  return cpu::index_put_(x, on_device(ind, x), v, acc);
}
Tensor& index_put_(Tensor& x, const Indices& ind, const Tensor& v, bool acc) {
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
Tensor& nonzero_out(const Tensor& x, Tensor& out) { return write_out(cpu::nonzero(x), out); }

}  // namespace aten
}  // namespace mytorch
