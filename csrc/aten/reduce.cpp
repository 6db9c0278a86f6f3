// ATen reductions on the mytorch device -> kernels/cpu/reduce.cpp (logsumexp takes ATen's
// arguments as they are: aten/register.cpp).
#include <ATen/native/Resize.h>

#include "aten/ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/reduce.h"

namespace mytorch {
namespace aten {
namespace {

using cpu::Red;

Tensor& write_out(const char* op, const Tensor& r, Tensor& out) {
  TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), op, ": result type ", r.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, r.sizes());
  cpu::copy_cast_(out, r);
  return out;
}

double corr(const OptScalar& c) { return c ? c->toDouble() : 1.0; }

}  // namespace

Tensor sum_dim(const Tensor& x, OptDims dim, bool keepdim, OptType dt) {
  return cpu::reduce(Red::Sum, x, dim, keepdim, dt);
}
Tensor& sum_out(const Tensor& x, OptDims dim, bool keepdim, OptType dt, Tensor& out) {
  return write_out("mytorch::sum", aten::sum_dim(x, dim, keepdim, dt), out);
}
Tensor sum_all(const Tensor& x, OptType dt) { return cpu::reduce(Red::Sum, x, std::nullopt, false, dt); }
Tensor mean_dim(const Tensor& x, OptDims dim, bool keepdim, OptType dt) { return cpu::mean(x, dim, keepdim, dt); }
Tensor& mean_out(const Tensor& x, OptDims dim, bool keepdim, OptType dt, Tensor& out) {
  return write_out("mytorch::mean", cpu::mean(x, dim, keepdim, dt), out);
}
Tensor mean_all(const Tensor& x, OptType dt) { return cpu::mean(x, std::nullopt, false, dt); }
Tensor prod_all(const Tensor& x, OptType dt) { return cpu::reduce(Red::Prod, x, std::nullopt, false, dt); }
Tensor prod_dim(const Tensor& x, int64_t dim, bool keepdim, OptType dt) {
  return cpu::reduce(Red::Prod, x, at::IntArrayRef(dim), keepdim, dt);
}
Tensor amax(const Tensor& x, at::IntArrayRef dim, bool keepdim) { return cpu::reduce(Red::Max, x, dim, keepdim); }
Tensor& amax_out(const Tensor& x, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  return write_out("mytorch::amax", aten::amax(x, dim, keepdim), out);
}
Tensor amin(const Tensor& x, at::IntArrayRef dim, bool keepdim) { return cpu::reduce(Red::Min, x, dim, keepdim); }
Tensor& amin_out(const Tensor& x, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  return write_out("mytorch::amin", aten::amin(x, dim, keepdim), out);
}
Tensor max_all(const Tensor& x) { return cpu::reduce(Red::Max, x, std::nullopt, false); }
Tensor min_all(const Tensor& x) { return cpu::reduce(Red::Min, x, std::nullopt, false); }
std::tuple<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim) {
  return cpu::minmax_dim(true, x, dim, keepdim);
}
std::tuple<Tensor, Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim) {
  return cpu::minmax_dim(false, x, dim, keepdim);
}
std::tuple<Tensor&, Tensor&> max_dim_out(const Tensor& x, int64_t dim, bool keepdim, Tensor& v, Tensor& i) {
  auto [rv, ri] = cpu::minmax_dim(true, x, dim, keepdim);
  write_out("mytorch::max", rv, v);
  write_out("mytorch::max", ri, i);
  return {v, i};
}
std::tuple<Tensor&, Tensor&> min_dim_out(const Tensor& x, int64_t dim, bool keepdim, Tensor& v, Tensor& i) {
  auto [rv, ri] = cpu::minmax_dim(false, x, dim, keepdim);
  write_out("mytorch::min", rv, v);
  write_out("mytorch::min", ri, i);
  return {v, i};
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return cpu::arg_minmax(true, x, dim, keepdim); }
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return cpu::arg_minmax(false, x, dim, keepdim); }
Tensor& argmax_out(const Tensor& x, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  return write_out("mytorch::argmax", aten::argmax(x, dim, keepdim), out);
}
Tensor& argmin_out(const Tensor& x, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  return write_out("mytorch::argmin", aten::argmin(x, dim, keepdim), out);
}
Tensor var(const Tensor& x, OptDims dim, const OptScalar& c, bool keepdim) {
  return std::get<0>(cpu::var_mean(x, dim, corr(c), keepdim, false));
}
Tensor stdev(const Tensor& x, OptDims dim, const OptScalar& c, bool keepdim) {
  return std::get<0>(cpu::var_mean(x, dim, corr(c), keepdim, true));
}
Tensor& var_out(const Tensor& x, OptDims dim, const OptScalar& c, bool keepdim, Tensor& out) {
  return write_out("mytorch::var", aten::var(x, dim, c, keepdim), out);
}
Tensor& std_out(const Tensor& x, OptDims dim, const OptScalar& c, bool keepdim, Tensor& out) {
  return write_out("mytorch::std", aten::stdev(x, dim, c, keepdim), out);
}
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, OptDims dim, const OptScalar& c, bool keepdim) {
  return cpu::var_mean(x, dim, corr(c), keepdim, false);
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, OptDims dim, const OptScalar& c, bool keepdim) {
  return cpu::var_mean(x, dim, corr(c), keepdim, true);
}
Tensor& logsumexp_out(const Tensor& x, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  return write_out("mytorch::logsumexp", cpu::logsumexp(x, dim, keepdim), out);
}
Tensor vector_norm(const Tensor& x, const at::Scalar& ord, OptDims dim, bool keepdim, OptType dt) {
  return cpu::vector_norm(dt ? cpu::to_dtype(x, *dt) : x, ord.toDouble(), dim, keepdim);
}
Tensor& vector_norm_out(const Tensor& x, const at::Scalar& ord, OptDims dim, bool keepdim, OptType dt, Tensor& out) {
  return write_out("mytorch::vector_norm", aten::vector_norm(x, ord, dim, keepdim, dt), out);
}

}  // namespace aten
}  // namespace mytorch
