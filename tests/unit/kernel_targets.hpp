#pragma once
// Runs a check once per instruction set the reduction and top-k kernels
// are built for and this CPU has (scalar, SSSE3, SSE4, AVX2, AVX-512 on a
// recent x86), so the fallbacks are tested too. Sanitized builds compile
// the AVX2 kernels only (CMakeLists.txt).

#include "reducers/reduce_kernels.hpp"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <string>

namespace mccl::kernel_test {

template <class F>
void for_each_kernel_target(F&& check) {
  for (int64_t target : detail::reduce_kernel_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(std::string("target ") + hwy::TargetName(target));
    EXPECT_STREQ(detail::reduce_kernel_target(), hwy::TargetName(target));
    check();
    if (::testing::Test::HasFatalFailure())
      break;
  }
  hwy::SetSupportedTargetsForTest(0);
}

} // namespace mccl::kernel_test
