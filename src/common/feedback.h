// Ground truth a client sends for a past prediction (POST /v2/models/M/feedback), as the HTTP
// codec hands it to the server (core) and the server to metrics/quality_tracker.
#pragma once

#include <string>
#include <variant>
#include <vector>

namespace inferd {

// One row's ground truth: a class index or a regression value, or a class's label (a line of the
// output's label_filename).
using FeedbackLabel = std::variant<double, std::string>;

// One item: the id of a past request and one label per row of its batch. `well_formed` false: the
// item lacked an id or a usable label (counted invalid; the rest of the batch still counts).
struct FeedbackItem {
  std::string id;
  std::vector<FeedbackLabel> labels;
  bool well_formed = true;
};

}  // namespace inferd
