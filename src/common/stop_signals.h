// Graceful stop on SIGTERM/SIGINT for a multi-threaded process: block both signals in every thread
// (call before starting any, so that new threads inherit the mask), then wait for one of them on
// the thread that will stop the process.
#pragma once

#include <csignal>

namespace inferd {

sigset_t BlockStopSignals();

// Returns the signal received.
int WaitForStopSignal(const sigset_t& stop_signals);

}  // namespace inferd
