#pragma once

// How SimGrid switches between actors in this build.
//
// Actors run on stacks SimGrid allocates; AddressSanitizer must be told each
// switch, or an exception thrown on an actor's stack (a bad record in the
// middle of a trace, raised in the driver actor; SimGrid ending an actor)
// makes it unpoison the wrong stack ("ASan is ignoring requested
// __asan_handle_no_return", on stderr) and report false stack errors
// afterwards. Debian's libsimgrid is not built with ASan's fiber hooks, so
// under ASan kvtier selects SimGrid's Boost.Context contexts and announces
// every switch SimGrid makes (sanitizer_fibers.cpp). Measured on the Mooncake
// preset's first 2,000 requests: thread contexts, which ASan tracks without
// help, cost a kernel round trip per switch (28.3 s in a release build,
// against 0.78 s with Boost.Context); under ASan, ucontext contexts announced
// the same way took 9.1 s and Boost.Context's 4.6 s (sigprocmask per switch).

#if defined(__SANITIZE_ADDRESS__)
#define KVTIER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVTIER_ASAN 1
#endif
#endif

namespace kvtier {

// The SimGrid option that selects the context factory this build needs
// ("--cfg=contexts/factory:ucontext" under ASan), or nullptr for SimGrid's
// default.
const char* context_factory_option();

}  // namespace kvtier
