// attack: _Pragma builds the same pragma inside a macro
_Pragma("clang attribute push (__attribute__((no_sanitize(\"thread\"))), apply_to = function)")
