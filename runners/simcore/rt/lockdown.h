// The simulator host locks itself down before any candidate code can run (docs/harness.md):
// Landlock limits the file system to reading the kernel library, and a seccomp filter limits
// system calls to what a launch needs. Linux only; elsewhere both report "not available".
#pragma once
#include "mini.h"

namespace __kp {

struct Lockdown {
  int landlock_abi = 0;   // 0: Landlock not in force
  bool seccomp = false;   // the filter is installed
  Str problem;            // why something could not be installed, "" when all went in
};

// Before the kernel library is loaded (its static constructors run inside dlopen): the file
// system shrinks to reading `library`, and system calls to a launch's plus what dlopen needs
// (reading files, mapping code). Every file the host writes must already be open.
Lockdown lock_before_load(const char* library);

// After loading: no file may be opened and no memory made executable, in every thread.
// Returns "" or why the second filter could not be installed.
Str lock_after_load();

// A system call's name for findings ("execve"), or "" when it is not one we name.
const char* syscall_name(long nr);

}  // namespace __kp
