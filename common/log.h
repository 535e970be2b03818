#pragma once
// One log library (spdlog) behind one header: one line per event, key=value fields.
#include <spdlog/spdlog.h>

namespace faultline::log {
using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::warn;
}  // namespace faultline::log
