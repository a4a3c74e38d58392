// attack: ## pastes __asm__ together for an asm label binding a name to system()
#define CAT(a, b) a##b
int run(const char*) CAT(__as, m__)("system");
