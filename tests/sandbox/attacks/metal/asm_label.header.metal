// attack: an asm label binds a new name to libc's system
int run(const char*) __asm__("system");
