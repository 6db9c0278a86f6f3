// Scratch that the calling thread keeps from one call to the next. Fresh blocks of megabytes come
// from mmap, and faulting their pages in at every call costs as much as the work that fills them.
#pragma once
#include <cstdint>
#include <memory>

namespace mytorch {
namespace cpu {

// At least n elements of A, kept by the calling thread for its next call (Slot: one buffer per
// use, so that the uses of one call get a buffer each). Blocks over kMax elements are not kept:
// they belong to owner, which frees them.
template <typename A, int Slot, int64_t kMax>
A* kept_buffer(int64_t n, std::unique_ptr<A[]>& owner) {
  thread_local std::unique_ptr<A[]> kept;
  thread_local int64_t cap = 0;
  if (n > kMax) {
    owner.reset(new A[n]);
    return owner.get();
  }
  if (cap < n) {
    kept.reset(new A[n]);
    cap = n;
  }
  return kept.get();
}

}  // namespace cpu
}  // namespace mytorch
