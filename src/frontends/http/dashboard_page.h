// The live status page (dashboard.html), compiled into the binary by CMake (dashboard_page.cc.in).
#pragma once

#include <string_view>

namespace inferd {

std::string_view DashboardPage();

}  // namespace inferd
