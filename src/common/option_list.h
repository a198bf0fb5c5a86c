// Parameter values of the form "key=value,key=value" (circuit breakers, router pools, quality,
// drift), and the numbers in them.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace inferd {

// The pairs in order; an error for an item without '='. Spaces around items are dropped.
StatusOr<std::vector<std::pair<std::string, std::string>>> ParseOptionList(const std::string& text);

// The pieces of `text` between `separator`s, empty ones included ("a,,b" -> a, "", b).
std::vector<std::string_view> SplitOn(std::string_view text, char separator);

// The whole of `text` as a number of type T (std::from_chars); false when it is not one.
template <typename T>
bool ParseWholeNumber(std::string_view text, T* value) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

}  // namespace inferd
