#include "common/option_list.h"

#include <sstream>

namespace inferd {

StatusOr<std::vector<std::pair<std::string, std::string>>> ParseOptionList(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> options;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    if (first == std::string::npos) continue;
    item = item.substr(first, last - first + 1);
    const size_t equals = item.find('=');
    if (equals == std::string::npos) return Status::InvalidArgument("expected key=value, got '" + item + "'");
    options.emplace_back(item.substr(0, equals), item.substr(equals + 1));
  }
  return options;
}

std::vector<std::string_view> SplitOn(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace inferd
