// attack: virtual dispatch: no virtual functions in MSL
struct B { virtual float f(float v) { return v; } };
