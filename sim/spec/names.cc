// The Name() overloads of the spec headers, all read from the tables in enum_names.h.

#include "absl/strings/str_cat.h"
#include "sim/spec/enum_names.h"

namespace sim {

absl::string_view Name(Precision p) { return EnumName(p); }
absl::string_view Name(OptimizerKind o) { return EnumName(o); }
absl::string_view Name(FinetuneMethod m) { return EnumName(m); }
absl::string_view Name(LoraTarget t) { return EnumName(t); }
absl::string_view Name(OffloadTarget t) { return EnumName(t); }
absl::string_view Name(Recompute r) { return EnumName(r); }
absl::string_view Name(RecomputeMethod m) { return EnumName(m); }
absl::string_view Name(RecomputeModule m) { return EnumName(m); }
absl::string_view Name(LossKernel l) { return EnumName(l); }
absl::string_view Name(AttentionKernel a) { return EnumName(a); }
absl::string_view Name(FlashImpl f) { return EnumName(f); }
absl::string_view Name(KernelFusion k) { return EnumName(k); }
absl::string_view Name(NcclRelease r) { return EnumName(r); }
std::string Name(TeVersion v) { return absl::StrCat(v.major, ".", v.minor); }
absl::string_view Name(Framework f) { return EnumName(f); }
absl::string_view Name(FsdpSharding s) { return EnumName(s); }
absl::string_view Name(CollectiveAlgorithm a) { return EnumName(a); }
absl::string_view Name(PipelineSchedule p) { return EnumName(p); }
absl::string_view Name(Fp8Recipe r) { return EnumName(r); }
absl::string_view Name(ParallelDim d) { return EnumName(d); }
absl::string_view Name(Dtype d) { return EnumName(d); }
absl::string_view Name(KernelLibrary l) { return EnumName(l); }

}  // namespace sim
