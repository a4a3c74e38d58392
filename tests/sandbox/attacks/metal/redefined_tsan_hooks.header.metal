// attack: the header defines kport's sanitizer hooks so reads are never checked
void __tsan_read4(void*) {}
void __tsan_write4(void*) {}
