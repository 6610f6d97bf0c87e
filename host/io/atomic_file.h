// The one rule for every file the program writes (checkpoint, JSON report, tuning
// cache): a regular file or a new path appears whole or not at all; a stream is
// written through, never replaced.
#pragma once
#include <string>

namespace lenet5 {

// `path` is first followed through symbolic links (the link stays, its target gets
// the content). "-" is standard output. A path that exists and is not a regular file
// (a FIFO, a character device, /dev/stdout) is opened and written as a stream. Any
// other path is written to "<name>.tmp.<pid>" in the same folder, synced, renamed
// over the target and the folder synced; temporaries of that naming left by
// processes that are gone (killed mid-save) are then removed. A directory is an
// Error. Throws Error naming the path on any failure; a replaced file is then untouched.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace lenet5
