// attack: a template instantiates itself without end (compile-time bomb)
template <int N> struct R { static constexpr int v = R<N + 1>::v; };
