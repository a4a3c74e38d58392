// attack: #line renames the candidate's code as if it were kport's own header
#line 1 "/kport/simcore/include/kport/rt.h"
void __tsan_read4(void*) {}
