// First include of the wrapper sources in kernels/cpu/isa/ (see isa.h): the headers the
// dispatched kernels use, so that they are all compiled at the baseline ISA, before the
// wrapper's target pragma.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/native/Resize.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "checks.h"
#include "kernels/cpu/isa.h"
