// attack: a constexpr loop that runs for ever at compile time
constexpr long forever() { long s = 0; for (long k = 0; k < (1L << 62); k++) s += k; return s; }
constexpr long forced = forever();
