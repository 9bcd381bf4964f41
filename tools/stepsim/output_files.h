#pragma once
// A command's output files, written all or none.
//
// Contract: Stage(path, text) writes `text` for `path` at once into a new temporary file in the
// path's own folder, created exclusively with an unpredictable name (mkstemp: O_CREAT|O_EXCL, so
// a symlink or file planted at any name is never followed or shared, and two processes never
// write one temporary). Commit() then renames each temporary over its target, in the order
// staged (rename(2) replaces a symlink at the target, it does not write through it), and only
// then writes what was staged for standard output ("-") or for a device or FIFO (written in
// place: renaming over one would replace it). An error in any Stage, or a command that fails
// before Commit, leaves every target as it was: the destructor removes the temporaries not yet
// renamed. So a full disk, a bad later path or a failure mid-command leaves the old files or none,
// never a half-written one; the status says which file and why.

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace stepsim_cli {

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();

  // Writes `text` for `path` ("-" = standard output) to its temporary; for "-", a device or a
  // FIFO, keeps the text for Commit. InvalidArgument with the path and the system's reason.
  absl::Status Stage(const std::string& path, std::string text);
  // Renames the staged files over their targets, then writes the standard-output and device
  // parts. A write to a full or closed standard output is FailedPrecondition (exit 2).
  absl::Status Commit();
  // Whether some staged output goes to standard output (then the command prints no text report).
  bool writes_stdout() const { return writes_stdout_; }

 private:
  struct Staged {
    std::string path;
    std::string temporary;  // the staged file until renamed; empty once renamed
    std::string text;       // what is written at Commit, for "-", a device or a FIFO
    bool in_place = false;  // "-", a device or a FIFO
  };
  std::vector<Staged> staged_;
  bool writes_stdout_ = false;
};

// One output, whole or not at all (an OutputFiles of one file, committed).
absl::Status WriteOutput(const std::string& path, const std::string& text);

// Writes what the command left in std::cout's buffer; FailedPrecondition when standard output
// could not take it (a full disk, a closed pipe), so the command does not exit 0 on lost text.
absl::Status FlushStandardOutput();

}  // namespace stepsim_cli
