// Indexing kernels (OpenMP): index_select, gather, scatter_add, index / index_put (any number
// of index tensors), cat, nonzero. Every index is checked before any memory is touched.
#include "kernels/index.h"

#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>

#include <atomic>
#include <cstring>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace cpu {
namespace {

using index::check_index_dtype;

// Raises IndexError naming the first bad index; never reads out of bounds afterwards.
template <typename I>
void check_bounds(const char* op, const I* idx, int64_t n, int64_t size, int64_t dim, bool allow_neg) {
  std::atomic<int64_t> bad{-1};
  parallel_range(n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t v = idx[i];
      bool ok = allow_neg ? (v >= -size && v < size) : (v >= 0 && v < size);
      if (!ok) {
        int64_t expect = -1;
        bad.compare_exchange_strong(expect, i);
        return;
      }
    }
  });
  int64_t i = bad.load();
  if (i >= 0)
    TORCH_CHECK_INDEX(false, op, ": index ", static_cast<int64_t>(idx[i]), " is out of bounds for dim ",
                      dim, " with size ", size, " (expected an index in [", allow_neg ? -size : 0, ", ",
                      size - 1, "])");
}

at::Tensor contiguous_index(const at::Tensor& index) {
  at::Tensor i = to_dtype(index, at::kLong);
  if (i.is_contiguous()) return i;
  at::Tensor c = at::empty(i.sizes(), i.options());
  copy_cast_(c, i);
  return c;
}

at::Tensor contiguous(const at::Tensor& x) {
  if (x.is_contiguous()) return x;
  at::Tensor c = at::empty(x.sizes(), x.options());
  copy_cast_(c, x);
  return c;
}

// out[o, i, j] = x[o, idx[i], j] (bytes per j-row = row); x and out contiguous.
void select_rows(const char* xp, char* op_, const int64_t* idx, int64_t outer, int64_t n,
                 int64_t size, int64_t row) {
  if (row == 0) return;  // zero-width rows: nothing to copy (and no data pointers)
  parallel_range(outer * n, row, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      int64_t o = w / n, i = w % n;
      int64_t v = idx[i] < 0 ? idx[i] + size : idx[i];
      std::memcpy(op_ + w * row, xp + (o * size + v) * row, row);
    }
  });
}

}  // namespace

at::Tensor index_select(const at::Tensor& x_, int64_t dim, const at::Tensor& index_) {
  const char* op = "mytorch::index_select";
  index::check_select_index(op, index_);
  common_device(op, {x_, index_});
  const int64_t d = index::select_dim(op, x_, dim, index_);
  at::Tensor x = contiguous(x_.dim() == 0 ? x_.reshape({1}) : x_);
  at::Tensor index = contiguous_index(index_.reshape({-1}));
  int64_t size = x.size(d), n = index.numel();
  const int64_t* idx = index.const_data_ptr<int64_t>();
  check_bounds(op, idx, n, size, d, false);
  auto shape = x.sizes().vec();
  shape[d] = n;
  at::Tensor out = at::empty(shape, x.options());
  if (out.numel() == 0) return x_.dim() == 0 ? out.reshape({}) : out;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  select_rows(static_cast<const char*>(x.const_data_ptr()), static_cast<char*>(out.mutable_data_ptr()),
              idx, outer, n, size, inner * x.element_size());
  return x_.dim() == 0 ? out.reshape({}) : out;
}

// ---- gather / scatter_add share the restrided-by-dim iteration (as ATen does) ----
namespace {
using index::check_gather_shapes;

at::Tensor restride(const at::Tensor& x, int64_t d, at::IntArrayRef shape) {
  if (x.dim() != static_cast<int64_t>(shape.size()))
    return x.as_strided(shape, std::vector<int64_t>(shape.size(), 0));
  auto st = x.strides().vec();
  if (!st.empty()) st[d] = 0;
  return x.as_strided(shape, st);
}
}  // namespace

at::Tensor gather(const at::Tensor& x, int64_t dim, const at::Tensor& index_) {
  const char* op = "mytorch::gather";
  check_index_dtype(op, index_);
  common_device(op, {x, index_});
  int64_t d = wrap_dim(op, dim, x.dim());
  check_gather_shapes(op, x, d, index_, nullptr);
  at::Tensor index = contiguous_index(index_);
  int64_t size = x.dim() ? x.size(d) : 1;
  check_bounds(op, index.const_data_ptr<int64_t>(), index.numel(), size, d, true);
  at::Tensor out = at::empty(index.sizes(), x.options());
  if (out.numel() == 0) return out;
  at::Tensor xv = restride(x, d, index.sizes());
  int64_t dstride = (x.dim() ? x.stride(d) : 0) * x.element_size();
  auto it = at::TensorIteratorConfig()
                .add_output(out)
                .add_const_input(xv)
                .add_const_input(index)
                .check_all_same_dtype(false)
                .resize_outputs(false)
                .set_check_mem_overlap(false)
                .build();
  Strided g = strided_from(it);
  int64_t es = x.element_size();
  for_each(g, [=](char** p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = *reinterpret_cast<const int64_t*>(p[2] + i * s[2]);
      v = v < 0 ? v + size : v;
      std::memcpy(p[0] + i * s[0], p[1] + i * s[1] + v * dstride, es);
    }
  });
  return out;
}

at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index_, const at::Tensor& src) {
  const char* op = "mytorch::scatter_add";
  check_index_dtype(op, index_);
  common_device(op, {self, index_, src});
  check_same_dtype(op, self, "self", src, "src");
  int64_t d = wrap_dim(op, dim, self.dim());
  check_gather_shapes(op, self, d, index_, &src);
  at::Tensor index = contiguous_index(index_);
  int64_t size = self.dim() ? self.size(d) : 1;
  check_bounds(op, index.const_data_ptr<int64_t>(), index.numel(), size, d, true);
  if (index.numel() == 0) return self;
  // iterate over index's shape with `dim` squashed; each element walks dim serially, so
  // two threads never add into the same element of self
  at::Tensor sv = restride(self, d, index.sizes());
  at::Tensor srcv = src.dim() == index.dim() ? src.as_strided(index.sizes(), src.strides())
                                              : src.as_strided(index.sizes(), std::vector<int64_t>(index.dim(), 0));
  auto it = at::TensorIteratorConfig()
                .add_output(sv)
                .add_const_input(srcv)
                .add_const_input(index)
                .check_all_same_dtype(false)
                .resize_outputs(false)
                .set_check_mem_overlap(false)
                .declare_static_shape(index.sizes(), /*squash_dims=*/d)
                .build();
  Strided g = strided_from(it);
  int64_t n_d = index.dim() ? index.size(d) : 1;
  int64_t self_sd = (self.dim() ? self.stride(d) : 0) * self.element_size();
  int64_t src_sd = (src.dim() ? src.stride(d) : 0) * src.element_size();
  int64_t idx_sd = (index.dim() ? index.stride(d) : 0) * sizeof(int64_t);
  dispatch_all(op, "self", self.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    for_each(g, [=](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        char* so = p[0] + i * s[0];
        const char* sr = p[1] + i * s[1];
        const char* ix = p[2] + i * s[2];
        for (int64_t k = 0; k < n_d; ++k) {
          int64_t v = *reinterpret_cast<const int64_t*>(ix + k * idx_sd);
          v = v < 0 ? v + size : v;
          T* dst = reinterpret_cast<T*>(so + v * self_sd);
          *dst = T(C(*dst) + C(*reinterpret_cast<const T*>(sr + k * src_sd)));
        }
      }
    }, 1 << 12);
  });
  return self;
}

// ---- index / index_put with any number of index tensors (int64/int32, or bool masks) ----
// As ATen: the index tensors broadcast together; a k-D mask stands for the k index tensors of
// its true positions. When the indexed dims are adjacent the result's index dims take their
// place; otherwise they go first. Here every index tensor becomes flat positions within the
// dims it covers, and these combine into one int64 position within all the indexed dims
// flattened, so one row-gather kernel serves every case.
namespace {
struct Indexing {
  at::Tensor x;                 // x, or a permuted view of it with the indexed dims adjacent
  int64_t d = 0;                // first indexed dim of `x`
  int64_t ndims = 1;            // dims of `x` the index covers
  at::Tensor index;             // int64, contiguous, positions in the covered dims flattened
  std::vector<int64_t> shape;   // shape of the result
};

struct Entry {
  int64_t pos;        // first dim of x it covers
  int64_t covers;     // 1 for an integer index, k for a k-D mask
  int64_t span;       // product of the covered sizes
  at::Tensor flat;    // int64: positions within the covered dims (an integer index may be < 0)
};

Indexing make_indexing(const char* op, const at::Tensor& x,
                       const c10::List<std::optional<at::Tensor>>& indices) {
  std::vector<Entry> entries;
  int64_t pos = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<at::Tensor> t = indices[i];
    if (!(t && t->defined())) {
      pos += 1;
      continue;
    }
    common_device(op, {x, *t});
    const bool mask = t->scalar_type() == at::kBool || t->scalar_type() == at::kByte;
    TORCH_CHECK(mask || t->scalar_type() == at::kLong || t->scalar_type() == at::kInt, op,
                ": expected index tensors to have dtype in (Long, Int, Bool), got ", t->scalar_type());
    const int64_t covers = mask ? t->dim() : 1;
    TORCH_CHECK_INDEX(pos + covers <= x.dim(), op, ": too many indices for a tensor of dimension ",
                      x.dim());
    Entry e{pos, covers, 1, at::Tensor()};
    if (mask) {
      for (int64_t k = 0; k < covers; ++k) {
        TORCH_CHECK_INDEX(t->size(k) == x.size(pos + k), op, ": the shape of the mask ", t->sizes(),
                          " at index ", k, " does not match the shape of the indexed tensor ",
                          x.sizes(), " at index ", pos + k);
        e.span *= x.size(pos + k);
      }
      e.flat = nonzero_flat(*t);
    } else {
      e.span = x.size(pos);
      e.flat = contiguous_index(*t);
      check_bounds(op, e.flat.const_data_ptr<int64_t>(), e.flat.numel(), e.span, pos, true);
    }
    entries.push_back(std::move(e));
    pos += covers;
  }
  TORCH_CHECK(!entries.empty(), op, ": expected at least one index tensor, got only None");

  Indexing r;
  bool adjacent = true;
  for (size_t k = 1; k < entries.size(); ++k)
    adjacent = adjacent && entries[k].pos == entries[k - 1].pos + entries[k - 1].covers;
  r.ndims = 0;
  for (const Entry& e : entries) r.ndims += e.covers;
  if (adjacent) {
    r.x = x;
    r.d = entries[0].pos;
  } else {  // indexed dims to the front, in order; the other dims after them
    std::vector<int64_t> order;
    std::vector<bool> taken(x.dim(), false);
    for (const Entry& e : entries)
      for (int64_t k = 0; k < e.covers; ++k) {
        order.push_back(e.pos + k);
        taken[e.pos + k] = true;
      }
    for (int64_t k = 0; k < x.dim(); ++k)
      if (!taken[k]) order.push_back(k);
    r.x = x.permute(order);
    r.d = 0;
  }

  std::vector<int64_t> bshape = entries[0].flat.sizes().vec();
  for (size_t k = 1; k < entries.size(); ++k)
    bshape = at::infer_size(bshape, entries[k].flat.sizes());
  if (entries.size() == 1) {
    r.index = entries[0].flat;  // negative positions are wrapped by the kernels
  } else {
    // position = sum over entries of (wrapped index) * (span of the entries after it)
    at::Tensor out = at::empty(bshape, x.options().dtype(at::kLong));
    int64_t* o = out.mutable_data_ptr<int64_t>();
    const int64_t n = out.numel();
    std::fill(o, o + n, int64_t(0));
    int64_t mult = 1;
    for (size_t k = entries.size(); k-- > 0;) {
      const Entry& e = entries[k];
      at::Tensor ex = contiguous_index(e.flat.expand(bshape));
      const int64_t* v = ex.const_data_ptr<int64_t>();
      const int64_t span = e.span, m = mult;
      parallel_range(n, 1, [&](int64_t b, int64_t end) {
        for (int64_t i = b; i < end; ++i) o[i] += (v[i] < 0 ? v[i] + span : v[i]) * m;
      });
      mult *= span;
    }
    r.index = out;
  }
  r.shape.assign(r.x.sizes().begin(), r.x.sizes().begin() + r.d);
  r.shape.insert(r.shape.end(), bshape.begin(), bshape.end());
  for (int64_t i = r.d + r.ndims; i < r.x.dim(); ++i) r.shape.push_back(r.x.size(i));
  return r;
}

// x viewed as (outer, covered, inner) with the covered dims flattened.
at::Tensor flat_view(const at::Tensor& xc, const Indexing& r) {
  int64_t outer = 1, mid = 1, inner = 1;
  for (int64_t i = 0; i < r.d; ++i) outer *= xc.size(i);
  for (int64_t i = r.d; i < r.d + r.ndims; ++i) mid *= xc.size(i);
  for (int64_t i = r.d + r.ndims; i < xc.dim(); ++i) inner *= xc.size(i);
  return xc.view({outer, mid, inner});
}
}  // namespace

at::Tensor nonzero_flat(const at::Tensor& mask_) {
  at::Tensor mask = contiguous(mask_.scalar_type() == at::kBool ? mask_ : to_dtype(mask_, at::kBool));
  const bool* m = mask.const_data_ptr<bool>();
  int64_t n = mask.numel(), cnt = 0;
  for (int64_t i = 0; i < n; ++i) cnt += m[i];
  at::Tensor out = at::empty({cnt}, mask.options().dtype(at::kLong));
  int64_t* o = out.mutable_data_ptr<int64_t>();
  for (int64_t i = 0, j = 0; i < n; ++i)
    if (m[i]) o[j++] = i;
  return out;
}

at::Tensor nonzero(const at::Tensor& x) {
  const char* op = "mytorch::nonzero";
  dispatch_all(op, "x", x.scalar_type(), [](auto) {});
  at::Tensor flat = nonzero_flat(x.scalar_type() == at::kBool ? x : binary(Bin::Ne, x, wrap_scalar(0), 1, {}));
  int64_t nd = x.dim(), cnt = flat.numel();
  at::Tensor out = at::empty({cnt, nd}, flat.options());
  const int64_t* f = flat.const_data_ptr<int64_t>();
  int64_t* o = out.mutable_data_ptr<int64_t>();
  auto sizes = x.sizes();
  for (int64_t i = 0; i < cnt; ++i) {
    int64_t v = f[i];
    for (int64_t k = nd - 1; k >= 0; --k) {
      o[i * nd + k] = v % sizes[k];
      v /= sizes[k];
    }
  }
  return out;
}

at::Tensor index(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices) {
  const char* op = "mytorch::index";
  Indexing r = make_indexing(op, x, indices);
  at::Tensor xc = contiguous(r.x);
  at::Tensor xf = flat_view(xc, r);
  int64_t outer = xf.size(0), mid = xf.size(1), inner = xf.size(2), n = r.index.numel();
  at::Tensor out = at::empty(r.shape, x.options());
  if (out.numel() == 0) return out;
  select_rows(static_cast<const char*>(xf.const_data_ptr()), static_cast<char*>(out.mutable_data_ptr()),
              r.index.const_data_ptr<int64_t>(), outer, n, mid, inner * x.element_size());
  return out;
}

at::Tensor& index_put_(at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices,
                       const at::Tensor& values, bool accumulate) {
  const char* op = "mytorch::index_put";
  Indexing r = make_indexing(op, x, indices);
  common_device(op, {x, values});
  const std::vector<int64_t>& shape = r.shape;
  index::check_put_values(op, x, values, shape);
  int64_t n = r.index.numel();
  if (n == 0 || x.numel() == 0) return x;
  // values broadcast to (outer, n, inner), contiguous, in x's dtype
  at::Tensor v = at::empty(shape, x.options());
  copy_cast_(v, values);
  // r.x is x or a permuted view of it: writing it writes x
  bool direct = r.x.is_contiguous();
  at::Tensor xc = direct ? r.x : contiguous(r.x);
  at::Tensor xf = flat_view(xc, r);
  int64_t outer = xf.size(0), mid = xf.size(1), inner = xf.size(2);
  const int64_t* idx = r.index.const_data_ptr<int64_t>();
  dispatch_all(op, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    T* xp = xf.mutable_data_ptr<T>();
    const T* vp = v.const_data_ptr<T>();
    // parallel over (outer, inner chunks); indices walked serially so duplicates are safe
    const int64_t chunk = 256, nchunk = (inner + chunk - 1) / chunk;
    parallel_range(outer * nchunk, n * chunk, [&](int64_t b, int64_t e) {
      for (int64_t w = b; w < e; ++w) {
        int64_t o = w / nchunk, j0 = (w % nchunk) * chunk, j1 = std::min(inner, j0 + chunk);
        for (int64_t i = 0; i < n; ++i) {
          int64_t row = idx[i] < 0 ? idx[i] + mid : idx[i];
          T* dst = xp + (o * mid + row) * inner;
          const T* src = vp + (o * n + i) * inner;
          if (accumulate) {
            for (int64_t j = j0; j < j1; ++j) dst[j] = T(C(dst[j]) + C(src[j]));
          } else {
            for (int64_t j = j0; j < j1; ++j) dst[j] = src[j];
          }
        }
      }
    });
  });
  if (!direct) copy_cast_(r.x, xc);
  return x;
}

at::Tensor cat(at::TensorList tensors, int64_t dim) {
  const char* op = "mytorch::cat";
  const index::CatPlan p = index::cat_plan(op, tensors, dim);
  if (p.ts.empty()) return at::empty({0}, tensors[0].options().dtype(p.dt));
  const int64_t d = p.d;
  at::Tensor out = at::empty(p.shape, p.ts[0].options().dtype(p.dt));
  int64_t off = 0;
  for (const at::Tensor& t : p.ts) {
    if (t.size(d) > 0) copy_cast_(out.narrow(d, off, t.size(d)), t);
    off += t.size(d);
  }
  return out;
}

at::Tensor scatter_add(const at::Tensor& x, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor out = at::empty(x.sizes(), x.options());
  copy_cast_(out, x);
  return cpu::scatter_add_(out, dim, index, src);
}

at::Tensor index_put(const at::Tensor& x, const c10::List<std::optional<at::Tensor>>& indices,
                     const at::Tensor& values, bool accumulate) {
  at::Tensor out = at::empty(x.sizes(), x.options());
  copy_cast_(out, x);
  return cpu::index_put_(out, indices, values, accumulate);
}

}  // namespace cpu
}  // namespace mytorch
