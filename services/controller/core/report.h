#pragma once
#include <vector>

#include "services/controller/core/domain.h"

namespace faultline::controller {

double Median(std::vector<double> values);

// Groups outcomes by (cell, kernel, board) in first-seen order and summarises succeeded runs.
std::vector<SummaryRow> Summarize(const std::vector<RunOutcome>& outcomes);

}  // namespace faultline::controller
