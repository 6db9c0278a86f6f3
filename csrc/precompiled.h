// The torch headers nearly every translation unit includes. The build compiles this once
// per configuration into a precompiled header and force-includes it (setup.py), so that
// each source file skips re-parsing ATen.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>
