// attack: a macro expands to extern "C" int system(const char*)
#define DECLARE_AND_CALL extern "C" int system(const char*); system("touch @CANARY@/pwned")
