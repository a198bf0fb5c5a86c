// Graceful stop on SIGTERM/SIGINT for a multi-threaded process: block both signals in every thread
// (call before starting any, so that new threads inherit the mask), then wait for one of them on
// the thread that will stop the process.
#pragma once

#include <chrono>
#include <csignal>
#include <optional>

namespace inferd {

sigset_t BlockStopSignals();

// Returns the signal received.
int WaitForStopSignal(const sigset_t& stop_signals);
// The same for at most `timeout`: nullopt when none came.
std::optional<int> WaitForStopSignal(const sigset_t& stop_signals, std::chrono::milliseconds timeout);

}  // namespace inferd
