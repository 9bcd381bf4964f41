#pragma once
// Pipeline schedules as the order in which each stage runs its work units (a forward or a
// backward of one model chunk for one micro-batch). Time-free: the bubble emerges when the
// replay runs these orders with the cross-stage dependencies (forward of virtual stage k needs
// k − 1's output; backward of k needs k + 1's input gradient).
//
//   gpipe        all m forwards, then all m backwards (Huang et al. 2019, GPipe).
//   1f1b         PipeDream-Flush (Narayanan et al. SC21 §2.2.1): stage s runs
//                min(p − s − 1, m) warm-up forwards, then alternates one forward and one
//                backward, then drains the remaining backwards. At most p − s micro-batches
//                are in flight on stage s.
//   interleaved  Megatron-LM's interleaved 1F1B with v chunks per stage (SC21 §2.2.2; the
//                order of megatron/core/pipeline_parallel/schedules.py): warm-up
//                min((p − s − 1)·2 + (v − 1)·p, m·v) units (current megatron-core; 2022
//                versions ran all m·v forwards first when m = p), unit k of a direction is
//                chunk (k / p) mod v (reversed for backward) of micro-batch
//                (k / (p·v))·p + k mod p.
// Virtual stage of chunk c on stage s: c·p + s (chunk c of every stage before chunk c + 1).

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/spec/scenario.h"

namespace sim {

struct PipelineUnit {
  int32_t chunk = 0;
  int32_t micro_batch = 0;
  bool forward = true;
};

// Per stage, its units in execution order.
std::vector<std::vector<PipelineUnit>> PipelineOrder(PipelineSchedule schedule, int64_t stages,
                                                     int64_t chunks, int64_t micro_batches);

// One unit of a stage's order (PipelineOrder): order[stage][index].
struct PipelineSlot {
  int32_t stage = 0;
  int32_t index = 0;
};

// Every stage's units in the order a program lists them: each unit after the one before it on
// its stage and after the unit whose output it receives (the forward of virtual stage k − 1, or
// the backward of k + 1, of its micro-batch), so that ops only depend on earlier ops. Units are
// ranked by the step at which a pipeline whose units each take one step would run them (a unit
// runs one step after the later of its stage's previous unit and the unit it receives from),
// ties by stage. The replay does not depend on this order (ops wait for their dependencies and
// their stream, not their place), but the fold does (sim/replay/fold.h): ranked so, one more
// micro-batch (a group of p, interleaved) inserts one contiguous block of units into the list,
// after which the list goes on as before a period later — where stages taken in turn, each as
// far as its receives allow, insert its units at several places.
std::vector<PipelineSlot> PipelineEmission(const std::vector<std::vector<PipelineUnit>>& order,
                                           int64_t chunks);

// Decoder layers per virtual stage (index c·p + s): an equal split, the first and last virtual
// stage (chunk 0 of stage 0, the last chunk of the last stage) as given and the rest equal, or
// parallel.pp_layers (checked by the scenario loader).
std::vector<int64_t> LayersPerVirtualStage(const Scenario& s);

}  // namespace sim
