#pragma once

#include "messages/run.hpp"

#include <string>
#include <vector>

namespace guestflow {

/// What a person reading a terminal wants from a run's outputs: for every harvested
/// vertex, in order, the text of each message-like result (`results.<output>.text`, or a
/// plain string result). Vertices without one contribute nothing.
std::vector<std::string> output_texts(const std::vector<run_outputs>& outs);

} // namespace guestflow
