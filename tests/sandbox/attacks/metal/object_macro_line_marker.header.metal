// attack: an object-like macro expands to a fake line marker
#define MARK # 1 "kport-entry"
MARK
