// One request through an ensemble (pipeline/ensemble_plan.h). Each step's request goes to its
// model through `dispatch`: the server's own door for requests, so it queues, batches and counts
// with that model's direct traffic. A step starts as soon as the steps it takes tensors from have
// answered, so independent steps run at once; nothing here waits on a thread (a step's answer
// starts the steps behind it from the thread that answered), so a request in its last step never
// holds up another request's first.
//
// Tensors move between steps by pointer: a step's request holds its producers' output buffers,
// never a copy. A step that fails ends the run with its error, naming the step; steps not yet
// started are not started. With a client deadline, each step is given what is left of it, and a
// step that would start after it is not run (DEADLINE_EXCEEDED, naming the step).
#pragma once

#include <functional>
#include <memory>

#include "common/clock.h"
#include "common/infer_request.h"
#include "pipeline/ensemble_plan.h"

namespace inferd {

// Sends a step's request to its model; `done` is called exactly once.
using StepDispatch = std::function<void(std::unique_ptr<InferRequest> request, InferCallback done)>;

// Runs `request` (validated for the ensemble's config) through `plan`; `done` is called exactly
// once, with the ensemble's requested outputs (all of them when the request names none).
void RunEnsemble(std::shared_ptr<const EnsemblePlan> plan, int64_t ensemble_version,
                 std::unique_ptr<InferRequest> request, StepDispatch dispatch, const Clock* clock, InferCallback done);

}  // namespace inferd
