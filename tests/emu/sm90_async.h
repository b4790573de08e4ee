// sm90_async.h - between the sm_90 emulation files (not a kernel header):
// the mbarrier side of the asynchronous copies (sm90_mbarrier.cc) that the
// bulk and tensor copies (sm90_tma.cc) complete on.
#ifndef KLAUNCH_TESTS_EMU_SM90_ASYNC_H
#define KLAUNCH_TESTS_EMU_SM90_ASYNC_H

#include <stdint.h>

#include <functional>
#include <string>

namespace emu {
namespace sm90 {

// A copy of `bytes` bytes issued by the calling thread that completes on
// the (initialised) mbarrier at `mbar`: the next wait on that mbarrier
// runs `land` (which writes the data as the issuer's), releases the
// issuer's clock into the phase in progress and performs a complete_tx of
// `bytes` on it. `what` names the copy in reports.
void mbarrier_transaction(uint32_t mbar, const char *op, uint32_t bytes, const std::string &what,
                          std::function<void()> land);

}  // namespace sm90
}  // namespace emu

#endif  // KLAUNCH_TESTS_EMU_SM90_ASYNC_H
